// ServerProcess: starts the real gemm-server binary (or a test build of it)
// on a free loopback port for a test, and stops it with a signal.
//
// Thread-safety: not thread-safe; one test thread owns it.
//
//   ServerProcess server({"--max-queued-jobs", "4"});
//   ASSERT_TRUE(server.Start().ok());
//   auto client = GemmClient::Create({.target = server.address()});
//   int exit_code = server.Stop(SIGTERM);
#ifndef GEMM_TESTS_SERVER_PROCESS_H_
#define GEMM_TESTS_SERVER_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace gemm::testing {

class ServerProcess {
 public:
  // The runfiles of gemm-server and of its test build with
  // --testing-fail-kernel.
  static constexpr char kServer[] = "server/gemm-server";
  static constexpr char kServerWithFaults[] = "tests/gemm-server-with-faults";

  // `binary` is a runfile path: the server, or a test build of it such as
  // kServerWithFaults.
  explicit ServerProcess(std::vector<std::string> extra_flags = {},
                         std::string binary = kServer);
  ~ServerProcess();  // SIGKILLs a server still running.

  // Starts the binary (for kServer, GEMM_SERVER_BINARY when set) and waits
  // (up to 20 s) until it listens. Unless the flags say otherwise it runs
  // with --log-level warn and --drain-delay-s 0 (stopping takes no drain
  // delay). Its output goes to a file: Log().
  absl::Status Start();
  // "127.0.0.1:PORT".
  std::string address() const;
  // "[::1]:PORT": another client address than address()'s, for a server
  // started with "--listen", "[::]:0" (which takes IPv4 and IPv6).
  std::string address_v6() const;
  // Starts the server with this open-file limit, soft and hard, so that it
  // cannot raise it. Default 0: the test's own.
  void set_open_file_limit(int limit) { open_file_limit_ = limit; }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  // Sends `signal` without waiting.
  void Signal(int signal);
  // Sends `signal` and waits for the exit; returns the exit code, or
  // 128 + signal number when the server died of a signal.
  int Stop(int signal);
  // Waits for the exit (up to `timeout_s`); -1 if it did not exit.
  int Wait(double timeout_s);
  // What the server has printed so far (stdout and stderr).
  std::string Log() const;
  // A memory figure of the running server in MiB, from /proc/PID/status
  // ("VmRSS", "VmHWM"); -1 when it cannot be read.
  double StatusMiB(const std::string& field) const;

 private:
  std::vector<std::string> flags_;
  std::string binary_;
  std::string port_file_;
  std::string log_file_;
  pid_t pid_ = -1;
  int open_file_limit_ = 0;
  int port_ = 0;
};

// Path of a file in the test's runfiles, e.g. "server/gemm-server".
std::string RunfilePath(const std::string& relative);

}  // namespace gemm::testing

#endif  // GEMM_TESTS_SERVER_PROCESS_H_
