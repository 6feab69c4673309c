// CudaExecutor on a real GPU (the suite: cuda_executor_test.cc): the result
// check on the device against every bit flip above its slack.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "common/abft.h"
#include "common/reference_gemm.h"
#include "gtest/gtest.h"
#include "kernels/cuda_presence.h"
#include "kernels/sgemm.h"
#include "server/cuda/cuda_executor.h"
#include "server/cuda/cuda_executor_test_fixture.h"
#include "server/cuda/dispatch_calibration.h"
#include "server/cuda/pinned_host_pool.h"

namespace gemm::server::cuda_test {
namespace {

// Flips bit `bit` of the float at device address `value` in `stream`,
// waiting for the kernel before it and for the flip.
void FlipOnDevice(float* value, int bit, cudaStream_t stream) {
  uint32_t word = 0;
  ASSERT_EQ(cudaMemcpyAsync(&word, value, 4, cudaMemcpyDeviceToHost, stream),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  word ^= 1u << bit;
  ASSERT_EQ(cudaMemcpyAsync(value, &word, 4, cudaMemcpyHostToDevice, stream),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
}

// How far a line (row `i`, or column `i - m`) of the clean result `c` may
// honestly be off its prediction, plus its tolerance: a flip that moves the
// line's sum further must be caught.
double Slack(const GemmProblem& p, const float* a, const float* b,
             const float* c_in, const float* c, uint64_t line) {
  std::vector<double> s(abft::Layout(p).slots(), 0.0);
  for (const abft::Pass& pass : abft::OperandPasses(p, a, b, s.data())) {
    abft::Reduce2DOnHost(pass);
  }
  if (p.beta != 0.0f) abft::Reduce2DOnHost(abft::InputCPass(p, c_in, s.data()));
  abft::Reduce2DOnHost(abft::OutputCPass(p, c, s.data()));
  return abft::Slack(p, s.data(), line);
}

// The check on the device catches every bit flip whose effect exceeds what
// the line may honestly be off by; the batch's other job is untouched; a
// caught result is re-run on another kernel and comes back right.
TEST_F(CudaExecutorTest, TheCheckCatchesEveryFlipAboveItsSlack) {
  HostAllocator* pinned = executor_->host_allocator();
  int caught = 0, flips = 0;
  for (const GemmProblem shape :
       {Shape(97, 61, 203, true, false), Shape(256, 256, 256),
        Shape(130, 77, 64, false, true)}) {
    for (int bit = 0; bit < 32; ++bit) {
      const float beta = bit % 3 == 0 ? 0.5f : 0.0f;
      std::vector<TestJob> jobs;
      jobs.push_back(MakeJob(pinned, shape, executor_->FindKernel("cublas"),
                             1.0f, beta, 7 * bit));
      jobs.push_back(MakeJob(pinned, shape, executor_->FindKernel("cublas"),
                             1.0f, beta, 7 * bit));
      for (TestJob& t : jobs) {
        t.job = std::make_shared<GemmJob>(
            JobSpec{t.job->problem(), executor_->FindKernel("cublas"),
                    absl::ZeroDuration(), true},
            InflightBudget::Reservation(), pinned);
        FillRandom(t.job->a(), shape.a_elements(), 7 * bit);
        FillRandom(t.job->b(), shape.b_elements(), 7 * bit + 1);
        if (beta != 0.0f)
          FillRandom(t.job->c(), shape.c_elements(), 7 * bit + 2);
      }
      const std::vector<float> c_in(jobs[1].job->c(),
                                    jobs[1].job->c() + shape.c_elements());
      // The clean result, from the same kernel.
      TestJob clean = MakeJob(pinned, shape, executor_->FindKernel("cublas"),
                              1.0f, beta, 7 * bit);
      ASSERT_TRUE(executor_->Execute({clean.job}).ok());
      const uint64_t at = (bit * 2654435761u) % shape.c_elements();
      GemmJob* victim = jobs[1].job.get();
      executor_->SetResultCorrupterForTesting([&](const ResultSite& site) {
        if (site.job == victim && site.run == 0) {
          FlipOnDevice(site.c + at, bit,
                       static_cast<cudaStream_t>(site.cuda_stream));
        }
      });
      ASSERT_TRUE(executor_->Execute({jobs[0].job, jobs[1].job}).ok());
      executor_->SetResultCorrupterForTesting(nullptr);
      // The untouched job, and a caught one after its re-run, are right; an
      // uncaught flip stays within what float32 rounding could explain,
      // which may exceed the 1e-5 of a typical result.
      EXPECT_LE(RelativeFrobeniusError(jobs[0].job->c(), jobs[0].want),
                kTolerance);
      float flipped = clean.job->c()[at];
      uint32_t word;
      std::memcpy(&word, &flipped, 4);
      word ^= 1u << bit;
      std::memcpy(&flipped, &word, 4);
      const double effect = std::fabs(double{flipped} - clean.job->c()[at]);
      const double slack =
          std::min(Slack(shape, victim->a(), victim->b(), c_in.data(),
                         clean.job->c(), at / shape.n),
                   Slack(shape, victim->a(), victim->b(), c_in.data(),
                         clean.job->c(), shape.m + at % shape.n));
      const JobCheck& check = victim->timing().check;
      EXPECT_TRUE(check.ran);
      EXPECT_EQ(jobs[0].job->timing().check.mismatches, 0u);
      ++flips;
      if (check.mismatches > 0) ++caught;
      if (effect > slack || std::isnan(flipped)) {
        EXPECT_EQ(check.mismatches, 1u)
            << shape.ToString() << " bit " << bit << " effect " << effect
            << " slack " << slack;
        EXPECT_TRUE(check.rerun_kernel.valid()) << check.detail;
        EXPECT_NE(check.rerun_kernel.name(), "cublas") << check.detail;
      }
      if (check.mismatches > 0) {
        EXPECT_LE(RelativeFrobeniusError(victim->c(), jobs[1].want),
                  kTolerance);
      } else {
        EXPECT_LE(effect, 2 * slack) << shape.ToString() << " bit " << bit;
      }
    }
  }
  std::printf("caught %d of %d flips\n", caught, flips);
}

}  // namespace
}  // namespace gemm::server::cuda_test
