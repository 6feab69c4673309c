// Precision: the arithmetic a job may be computed in, the caller's choice
// (proto/gemm.proto's GemmParams.precision). Strict float32 unless the
// caller opts in to something else.
//
// Thread-safety: a plain enum and pure functions.
//
//   if (KernelMayServe(kernel_precision, requested)) ...;
//   printf("%s", PrecisionName(Precision::kTf32));  // "tf32"
#ifndef GEMM_COMMON_PRECISION_H_
#define GEMM_COMMON_PRECISION_H_

#include <cstddef>
#include <string_view>

namespace gemm {

enum class Precision {
  // IEEE float32 products and sums (CUDA cores, OpenBLAS): SGEMM.
  kFp32,
  // As accurate as float32, Tensor Cores allowed (3xTF32: each operand
  // split into a TF32 part and a TF32 residual). Float32 kernels serve it
  // too, being at least as accurate.
  kFp32Tensor,
  // Inputs rounded to TF32 (10-bit mantissa), float32 accumulation.
  kTf32,
  // Inputs rounded to BF16 (8-bit mantissa) or finer, float32
  // accumulation.
  kBf16,
};

// Every precision, in the enum's order.
inline constexpr Precision kAllPrecisions[] = {
    Precision::kFp32, Precision::kFp32Tensor, Precision::kTf32,
    Precision::kBf16};
static_assert(sizeof(kAllPrecisions) / sizeof(kAllPrecisions[0]) ==
                  static_cast<size_t>(Precision::kBf16) + 1,
              "kAllPrecisions lists every Precision");

// "fp32", "fp32-tensor", "tf32", "bf16".
constexpr std::string_view PrecisionName(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kFp32Tensor:
      return "fp32-tensor";
    case Precision::kTf32:
      return "tf32";
    case Precision::kBf16:
      return "bf16";
  }
  return "?";
}

// The precision named `name` (PrecisionName's inverse); float32 for any
// other name.
constexpr Precision PrecisionNamed(std::string_view name) {
  if (name == "fp32-tensor") return Precision::kFp32Tensor;
  if (name == "tf32") return Precision::kTf32;
  if (name == "bf16") return Precision::kBf16;
  return Precision::kFp32;
}

// The relative Frobenius error a result of random operands (the tests',
// `gemm-client --verify`'s) may have against float64, by the arithmetic
// that computed it.
constexpr double VerifyTolerance(Precision p) {
  switch (p) {
    case Precision::kTf32:
      return 5e-3;
    case Precision::kBf16:
      return 3e-2;
    default:
      return 1e-5;
  }
}

// Whether a kernel computing in `kernel` may run a job that asked for
// `requested`: the same precision, or float32 for the float32-accurate
// Tensor Core mode.
constexpr bool KernelMayServe(Precision kernel, Precision requested) {
  return kernel == requested ||
         (requested == Precision::kFp32Tensor && kernel == Precision::kFp32);
}

// The largest relative error of converting one float32 input to the
// precision (0 for float32): what each product may lose before the float32
// accumulation, which the result check's tolerance adds (common/abft.h). A
// whole unit in the last place, since Tensor Cores may truncate rather than
// round. For 3xTF32, the residual's own rounding and the dropped
// residual-by-residual product.
constexpr double InputUnitRoundoff(Precision p) {
  switch (p) {
    case Precision::kFp32Tensor:
      return 1.0 / (1 << 21);
    case Precision::kTf32:
      return 1.0 / (1 << 10);
    case Precision::kBf16:
      return 1.0 / (1 << 7);
    default:
      return 0.0;
  }
}

}  // namespace gemm

#endif  // GEMM_COMMON_PRECISION_H_
