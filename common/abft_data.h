// The kinds of operand data the result check (common/abft.h) is tested
// and soaked on: the ranges and cancellations that make float32 rounding
// errors large against the result, and constant data, whose rounding
// errors repeat in every element. Shared by //common:abft_test and
// check-bench --soak.
//
// Thread-safety: plain functions.
//
//   std::mt19937_64 rng(7);
//   FillCheckData(v.data(), v.size(), CheckData::kWideRange, rng);
#ifndef GEMM_COMMON_ABFT_DATA_H_
#define GEMM_COMMON_ABFT_DATA_H_

#include <cmath>
#include <cstdint>
#include <random>

namespace gemm::abft {

enum class CheckData { kUniform, kWideRange, kCancelling, kConstant };
inline constexpr const char* kCheckDataNames[] = {"uniform", "wide-range",
                                                  "cancelling", "constant"};

// Fills x[0, count) with data of `kind`: uniform in [-1, 1]; wide range
// (uniform times 2^-20..2^20, both signs); cancelling (+-1000 with small
// differences); constant (0.1).
inline void FillCheckData(float* x, uint64_t count, CheckData kind,
                          std::mt19937_64& rng) {
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  for (uint64_t i = 0; i < count; ++i) {
    switch (kind) {
      case CheckData::kUniform:
        x[i] = unit(rng);
        break;
      case CheckData::kWideRange:
        x[i] = std::ldexp(unit(rng), exponent(rng));
        break;
      case CheckData::kCancelling:
        x[i] = (rng() & 1 ? 1.0f : -1.0f) * (1000.0f + unit(rng));
        break;
      case CheckData::kConstant:
        x[i] = 0.1f;
        break;
    }
  }
}

}  // namespace gemm::abft

#endif  // GEMM_COMMON_ABFT_DATA_H_
