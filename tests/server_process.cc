#include "tests/server_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
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
  const char* tmp = std::getenv("TEST_TMPDIR");
  port_file_ = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/gemm-server-",
                            getpid(), "-", counter++, ".port");
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

absl::Status ServerProcess::Start() {
  std::remove(port_file_.c_str());
  // GEMM_SERVER_BINARY runs the suites outside Bazel (e.g. on a GPU host
  // that has the binaries but no runfiles).
  const char* override_binary = std::getenv("GEMM_SERVER_BINARY");
  const std::string binary = override_binary != nullptr && binary_ == kServer
                                 ? std::string(override_binary)
                                 : RunfilePath(binary_);
  std::vector<std::string> args = {binary,        "--listen", "127.0.0.1:0",
                                   "--port-file", port_file_, "--log-level",
                                   "warn"};
  args.insert(args.end(), flags_.begin(), flags_.end());
  pid_ = fork();
  if (pid_ < 0) return absl::InternalError("fork failed");
  if (pid_ == 0) {
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
