// gemm-server-with-faults: gemm-server (RunServerMain) plus test flags, on
// any backend: --testing-fail-kernel NAME (jobs that name kernel NAME fail
// with INTERNAL, as a failed device would) and --testing-stuck-kernel NAME
// (jobs that name it hold their worker for --testing-stuck-s, 600 by
// default, deaf to cancellation, as a hung device would); and, built with
// CUDA, --testing-fault-device-kernel NAME (a batch of kernel NAME first
// faults the GPU for real, tests/device_fault.h, then runs: the device's
// context is gone). Silent corruption: --testing-flip-m M flips bit
// --testing-flip-bit (30 by default: an exponent bit) of element
// --testing-flip-element (mod M*N) of the result of every job with M rows,
// after its GEMM and before its check, on the first run only (the re-run
// after the failed check is clean), and --testing-flip-always-m M does so
// on every run (the job then fails); --testing-flip-lowest-bit-m M flips
// bit 0 instead, on the first run. For the tests only; production builds
// have no such flags.
//
//   gemm-server-with-faults --listen 127.0.0.1:0 --testing-fail-kernel broken
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "CLI/CLI.hpp"
#include "absl/time/time.h"
#include "server/app/server_main.h"
#include "server/cpu/fault_injecting_executor.h"
#ifdef GEMM_HAVE_CUDA
#include "tests/device_fault.h"
#endif

namespace {

using gemm::server::Executor;

// Faults the device for real before a batch of one kernel runs.
class DeviceFaultingExecutor final : public gemm::server::ForwardingExecutor {
 public:
  DeviceFaultingExecutor(std::unique_ptr<gemm::server::Executor> inner,
                         std::string kernel)
      : ForwardingExecutor(std::move(inner)), kernel_(std::move(kernel)) {}

  absl::Status Execute(const gemm::server::Batch& batch) override {
#ifdef GEMM_HAVE_CUDA
    if (batch.front()->kernel().name() == kernel_) {
      gemm::testing::FaultCurrentDevice();
    }
#endif
    return inner().Execute(batch);
  }

 private:
  const std::string kernel_;
};

// The --testing-flip-* flags.
struct Flips {
  uint32_t first_run_m = 0;
  uint32_t every_run_m = 0;
  uint32_t lowest_bit_m = 0;
  int bit = 30;
  uint64_t element = 5;

  void Install(Executor& executor) const {
    if (first_run_m == 0 && every_run_m == 0 && lowest_bit_m == 0) return;
    executor.SetResultCorrupterForTesting(
        [flips = *this](const gemm::server::ResultSite& site) {
          const uint32_t m = site.job->problem().m;
          const bool lowest = m == flips.lowest_bit_m && site.run == 0;
          const bool flip = (m == flips.first_run_m && site.run == 0) ||
                            m == flips.every_run_m || lowest;
          if (!flip) return;
          const int bit = lowest ? 0 : flips.bit;
          float* value =
              site.c + flips.element % site.job->problem().c_elements();
          if (site.cuda_stream == nullptr) {
            uint32_t word;
            std::memcpy(&word, value, 4);
            word ^= 1u << bit;
            std::memcpy(value, &word, 4);
            return;
          }
#ifdef GEMM_HAVE_CUDA
          gemm::testing::FlipBitOnDevice(value, bit, site.cuda_stream);
#endif
        });
  }
};

}  // namespace

int main(int argc, char** argv) {
  using gemm::server::FaultInjectingExecutor;
  FaultInjectingExecutor::Options faults;
  double stuck_s = 600;
  std::string fault_device_kernel;
  gemm::server::ServerMainExtensions extensions;
  Flips flips;
  extensions.add_flags = [&faults, &stuck_s, &fault_device_kernel,
                          &flips](CLI::App& app) {
    app.add_option("--testing-flip-m", flips.first_run_m,
                   "jobs with this many rows get a bit of their result "
                   "flipped before the check, on their first run");
    app.add_option("--testing-flip-always-m", flips.every_run_m,
                   "jobs with this many rows get a bit of their result "
                   "flipped before the check, on every run");
    app.add_option("--testing-flip-lowest-bit-m", flips.lowest_bit_m,
                   "jobs with this many rows get the lowest mantissa bit of "
                   "their result flipped, on their first run");
    app.add_option("--testing-flip-bit", flips.bit, "the bit flipped (0-31)")
        ->check(CLI::Range(0, 31))
        ->capture_default_str();
    app.add_option("--testing-flip-element", flips.element,
                   "the element flipped (mod M*N)")
        ->capture_default_str();
    app.add_option("--testing-fail-kernel", faults.fail_kernel,
                   "jobs naming this kernel fail with INTERNAL");
    app.add_option("--testing-stuck-kernel", faults.stuck_kernel,
                   "jobs naming this kernel hold their worker for "
                   "--testing-stuck-s, deaf to cancellation, then fail with "
                   "INTERNAL");
    app.add_option("--testing-stuck-s", stuck_s, "see --testing-stuck-kernel")
        ->capture_default_str();
    app.add_option("--testing-fault-device-kernel", fault_device_kernel,
                   "a batch naming this kernel first faults the GPU for real "
                   "(a kernel writing to an invalid address), then runs");
  };
  extensions.decorate_executor = [&](std::unique_ptr<Executor> e) {
    flips.Install(*e);
    if (!fault_device_kernel.empty()) {
      e = std::make_unique<DeviceFaultingExecutor>(std::move(e),
                                                   fault_device_kernel);
    }
    if (faults.fail_kernel.empty() && faults.stuck_kernel.empty()) return e;
    faults.stuck_for = absl::Seconds(stuck_s);
    return FaultInjectingExecutor::Wrap(std::move(e), faults);
  };
  return gemm::server::RunServerMain(argc, argv, extensions);
}
