// TestJob: one GEMM job for the end-to-end suites, with random (never zero)
// inputs, its float64 answer and a NaN-poisoned output buffer.
//
// Thread-safety: a plain value; one test thread owns it.
//
//   TestJob job(1000, 999, 777);
//   ASSERT_TRUE(client->Gemm(job.args, job.out.data()).ok());
//   EXPECT_LE(job.Error(), 1e-5);
#ifndef GEMM_TESTS_TEST_JOB_H_
#define GEMM_TESTS_TEST_JOB_H_

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "client/lib/gemm_client.h"
#include "common/reference_gemm.h"

namespace gemm::testing {

struct TestJob {
  client::GemmArgs args;
  std::vector<float> a, b, c, out;
  std::vector<double> want;

  TestJob(uint32_t m, uint32_t n, uint32_t k, bool ta = false, bool tb = false,
          float alpha = 1.0f, float beta = 0.0f, uint64_t seed = 1,
          const std::string& kernel = "auto") {
    a.resize(uint64_t{m} * k);
    b.resize(uint64_t{k} * n);
    FillRandom(a.data(), a.size(), seed);
    FillRandom(b.data(), b.size(), seed + 100);
    if (beta != 0.0f) {
      c.resize(uint64_t{m} * n);
      FillRandom(c.data(), c.size(), seed + 200);
    }
    args = client::GemmArgs{.problem = {m, n, k, ta, tb, alpha, beta},
                            .kernel = kernel,
                            .a = a.data(),
                            .b = b.data(),
                            .c = c.empty() ? nullptr : c.data()};
    want = ReferenceGemm(args.problem, a.data(), b.data(), args.c);
    out.assign(uint64_t{m} * n, std::numeric_limits<float>::quiet_NaN());
  }

  // Relative Frobenius error of `out` against the float64 answer.
  double Error() const { return RelativeFrobeniusError(out.data(), want); }
};

}  // namespace gemm::testing

#endif  // GEMM_TESTS_TEST_JOB_H_
