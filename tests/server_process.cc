#include "tests/server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"

namespace gemm::testing {

std::string RunfilePath(const std::string& relative) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  if (srcdir == nullptr) return relative;
  return absl::StrCat(srcdir, "/",
                      workspace != nullptr ? workspace : "gemm_service", "/",
                      relative);
}

ServerProcess::ServerProcess(std::vector<std::string> extra_flags,
                             std::string binary)
    : flags_(std::move(extra_flags)), binary_(std::move(binary)) {
  static std::atomic<int> counter{0};
  // Bazel keeps files in TEST_UNDECLARED_OUTPUTS_DIR (the server's log
  // among them) after the test.
  const char* tmp = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  if (tmp == nullptr) tmp = std::getenv("TEST_TMPDIR");
  const std::string stem = absl::StrCat(
      tmp != nullptr ? tmp : "/tmp", "/gemm-server-", getpid(), "-", counter++);
  port_file_ = stem + ".port";
  log_file_ = stem + ".log";
}

double ServerProcess::StatusMiB(const std::string& field) const {
  std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      return std::stod(line.substr(field.size() + 1)) / 1024;
    }
  }
  return -1;
}

std::string ServerProcess::Log() const {
  std::ifstream in(log_file_);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

absl::Status ServerProcess::Start() {
  std::remove(port_file_.c_str());
  // GEMM_SERVER_BINARY and GEMM_SERVER_WITH_FAULTS_BINARY run the suites
  // outside Bazel (e.g. on a GPU host that has the binaries but no
  // runfiles).
  const char* override_binary = std::getenv(
      binary_ == kServer             ? "GEMM_SERVER_BINARY"
      : binary_ == kServerWithFaults ? "GEMM_SERVER_WITH_FAULTS_BINARY"
                                     : "GEMM_NO_SUCH_OVERRIDE");
  const std::string binary = override_binary != nullptr
                                 ? std::string(override_binary)
                                 : RunfilePath(binary_);
  std::vector<std::string> args = {binary, "--port-file", port_file_};
  auto has_flag = [this](const char* flag) {
    return std::find(flags_.begin(), flags_.end(), flag) != flags_.end();
  };
  if (!has_flag("--listen"))
    args.insert(args.end(), {"--listen", "127.0.0.1:0"});
  if (!has_flag("--log-level"))
    args.insert(args.end(), {"--log-level", "warn"});
  if (!has_flag("--drain-delay-s")) {
    args.insert(args.end(), {"--drain-delay-s", "0"});
  }
  args.insert(args.end(), flags_.begin(), flags_.end());
  pid_ = fork();
  if (pid_ < 0) return absl::InternalError("fork failed");
  if (pid_ == 0) {
    // The log goes to a file too (Log()); the test's own output shows it
    // when the file cannot be opened.
    const int log = open(log_file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (log >= 0) {
      dup2(log, 1);
      dup2(log, 2);
      close(log);
    }
    if (open_file_limit_ > 0) {
      const rlimit limit = {static_cast<rlim_t>(open_file_limit_),
                            static_cast<rlim_t>(open_file_limit_)};
      if (setrlimit(RLIMIT_NOFILE, &limit) != 0) _exit(126);
    }
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < give_up) {
    std::ifstream in(port_file_);
    if (in >> port_ && port_ > 0) return absl::OkStatus();
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::InternalError(
          absl::StrCat(binary, " exited during start-up with status ", status));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return absl::DeadlineExceededError("gemm-server did not start in 20 s");
}

std::string ServerProcess::address() const {
  return absl::StrCat("127.0.0.1:", port_);
}

std::string ServerProcess::address_v6() const {
  return absl::StrCat("[::1]:", port_);
}

void ServerProcess::Signal(int signal) {
  if (pid_ > 0) kill(pid_, signal);
}

int ServerProcess::Wait(double timeout_s) {
  const auto give_up = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(int64_t(timeout_s * 1000));
  while (pid_ > 0 && std::chrono::steady_clock::now() < give_up) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      return 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

int ServerProcess::Stop(int signal) {
  Signal(signal);
  return Wait(60);
}

}  // namespace gemm::testing
