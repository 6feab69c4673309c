// Runs the gemm-client binary as a subprocess for the CLI's end-to-end
// tests: its exit status, stdout and stderr.
//
// Thread-safety: RunClient from one thread at a time.
//
//   CliResult r = RunClient({"load", "-s", server.address(), "--count", "9"});
//   ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
#ifndef GEMM_TESTS_CLIENT_CLI_H_
#define GEMM_TESTS_CLIENT_CLI_H_

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/server_process.h"

namespace gemm::testing {

// A path under the test's temporary folder.
inline std::string TempPath(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name);
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct CliResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs gemm-client with `args` (words the shell splits no further).
inline CliResult RunClient(const std::vector<std::string>& args) {
  static int runs = 0;
  const std::string base = TempPath(absl::StrCat("client-", runs++));
  const std::string command = absl::StrCat(RunfilePath("client/gemm-client"),
                                           " ", absl::StrJoin(args, " "), " > ",
                                           base, ".out 2> ", base, ".err");
  const int status = std::system(command.c_str());
  CliResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = ReadFile(base + ".out");
  result.err = ReadFile(base + ".err");
  return result;
}

// The number after "key": in a JSON text (first occurrence), or -1.
inline double JsonNumber(const std::string& json, const std::string& key) {
  std::smatch match;
  if (std::regex_search(json, match,
                        std::regex("\"" + key + "\": ([-0-9.e+]+)"))) {
    return std::stod(match[1]);
  }
  return -1;
}

}  // namespace gemm::testing

#endif  // GEMM_TESTS_CLIENT_CLI_H_
