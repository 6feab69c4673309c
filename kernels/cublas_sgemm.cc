#include "kernels/cublas_sgemm.h"

#include <cublas_v2.h>  // types only: every function is reached through dlsym
#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gemm::kernels {
namespace {

// The few cuBLAS entry points used, with the types cublas_api.h gives them.
struct CublasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
  decltype(&cublasSgemmStridedBatched) sgemm_strided_batched = nullptr;
  // cublas_api.h also has C++ overloads of these (with a cudaDataType
  // compute type); the pointers name the C entry points' types.
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t,
                            cublasOperation_t, int, int, int, const void*,
                            const void*, cudaDataType, int, const void*,
                            cudaDataType, int, const void*, void*, cudaDataType,
                            int, cublasComputeType_t,
                            cublasGemmAlgo_t) = nullptr;
  cublasStatus_t (*gemm_strided_batched_ex)(
      cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
      const void*, const void*, cudaDataType, int, long long, const void*,
      cudaDataType, int, long long, const void*, void*, cudaDataType, int,
      long long, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
  decltype(&cublasGetProperty) get_property = nullptr;
};

template <typename Fn>
absl::Status Resolve(void* library, const char* symbol, Fn* fn) {
  *fn = reinterpret_cast<Fn>(dlsym(library, symbol));
  if (*fn == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cuBLAS lacks ", symbol, ": ", dlerror()));
  }
  return absl::OkStatus();
}

absl::StatusOr<CublasApi> OpenCublas() {
  // The loader's search path first, then the toolkit folders.
  std::vector<std::string> candidates = {"libcublas.so.13"};
  if (const char* cuda_path = std::getenv("CUDA_PATH"); cuda_path != nullptr) {
    candidates.push_back(absl::StrCat(cuda_path, "/lib64/libcublas.so.13"));
  }
  candidates.push_back("/usr/local/cuda/lib64/libcublas.so.13");
  void* library = nullptr;
  std::vector<std::string> errors;
  for (const std::string& path : candidates) {
    library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library != nullptr) break;
    const char* error = dlerror();
    errors.push_back(error != nullptr ? error : path);
  }
  if (library == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cuBLAS is not available: ", absl::StrJoin(errors, "; ")));
  }
  // Never dlclose'd: handles and function pointers live until the process
  // exits.
  CublasApi api;
  for (absl::Status status : {
           Resolve(library, "cublasCreate_v2", &api.create),
           Resolve(library, "cublasDestroy_v2", &api.destroy),
           Resolve(library, "cublasSetStream_v2", &api.set_stream),
           Resolve(library, "cublasSetMathMode", &api.set_math_mode),
           Resolve(library, "cublasSgemm_v2", &api.sgemm),
           Resolve(library, "cublasSgemmStridedBatched",
                   &api.sgemm_strided_batched),
           Resolve(library, "cublasGemmEx", &api.gemm_ex),
           Resolve(library, "cublasGemmStridedBatchedEx",
                   &api.gemm_strided_batched_ex),
           Resolve(library, "cublasGetStatusString", &api.status_string),
           Resolve(library, "cublasGetProperty", &api.get_property),
       }) {
    if (!status.ok()) return status;
  }
  return api;
}

// Loaded once, on first use; the outcome (library or error) is kept.
const absl::StatusOr<CublasApi>& Cublas() {
  static const absl::StatusOr<CublasApi>* const api =
      new absl::StatusOr<CublasApi>(OpenCublas());
  return *api;
}

absl::Status CublasStatus(const CublasApi& api, cublasStatus_t status,
                          std::string_view what) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(std::string(what), ": ", api.status_string(status)));
}

// This thread's cuBLAS handles, one per device, destroyed when the thread ends.
class ThreadHandles {
 public:
  ThreadHandles() = default;
  ThreadHandles(const ThreadHandles&) = delete;
  ThreadHandles& operator=(const ThreadHandles&) = delete;
  ~ThreadHandles() {
    for (auto& [device, handle] : handles_) api_->destroy(handle);
  }

  absl::StatusOr<cublasHandle_t> ForCurrentDevice(const CublasApi& api) {
    int device = 0;
    if (absl::Status status =
            CudaStatus(cudaGetDevice(&device), "cudaGetDevice");
        !status.ok()) {
      return status;
    }
    for (const auto& [d, handle] : handles_) {
      if (d == device) return handle;
    }
    cublasHandle_t handle = nullptr;
    if (absl::Status s = CublasStatus(api, api.create(&handle), "cublasCreate");
        !s.ok())
      return s;
    if (absl::Status s =
            CublasStatus(api, api.set_math_mode(handle, CUBLAS_DEFAULT_MATH),
                         "cublasSetMathMode");
        !s.ok()) {
      api.destroy(handle);
      return s;
    }
    api_ = &api;
    handles_.emplace_back(device, handle);
    return handle;
  }

 private:
  const CublasApi* api_ = nullptr;
  std::vector<std::pair<int, cublasHandle_t>> handles_;
};

cublasOperation_t Op(bool transposed) {
  return transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
}

// cuBLAS in one of its compute types: CUBLAS_COMPUTE_32F through
// cublasSgemm (pure FP32), or the Tensor Core types that round float32
// inputs (CUBLAS_COMPUTE_32F_FAST_TF32, _FAST_16BF) through cublasGemmEx.
// The operands stay float32 in memory either way.
class CublasSgemmKernel final : public SgemmKernel {
 public:
  CublasSgemmKernel(std::string name, std::string description,
                    Precision precision, cublasComputeType_t compute)
      : name_(std::move(name)),
        description_(std::move(description)),
        precision_(precision),
        compute_(compute) {}

  std::string_view name() const override { return name_; }
  std::string_view description() const override { return description_; }
  Precision precision() const override { return precision_; }

  absl::Status CanImplement(const SgemmArgs& args) const override {
    if (absl::Status status = ValidateSgemmArgs(args); !status.ok())
      return status;
    if (std::max({args.lda, args.ldb, args.ldc}) > INT_MAX) {
      return absl::UnimplementedError(
          "cublas: leading dimensions must fit in int");
    }
    return absl::OkStatus();
  }

  absl::Status Launch(const SgemmArgs& args,
                      cudaStream_t stream) const override {
    if (absl::Status status = CanImplement(args); !status.ok()) return status;
    if (absl::Status status = ValidateStream(stream); !status.ok())
      return status;
    if (args.m == 0 || args.n == 0) return absl::OkStatus();
    const absl::StatusOr<CublasApi>& api = Cublas();
    if (!api.ok()) return api.status();
    thread_local ThreadHandles handles;
    absl::StatusOr<cublasHandle_t> handle = handles.ForCurrentDevice(*api);
    if (!handle.ok()) return handle.status();
    if (absl::Status s = CublasStatus(*api, api->set_stream(*handle, stream),
                                      "cublasSetStream");
        !s.ok()) {
      return s;
    }
    // Column-major view: C^T (n x m) = op(B)^T (n x k) * op(A)^T (k x m). The
    // stored row-major B is column-major B^T, so op(B)^T needs a transpose
    // exactly when op(B) did not; likewise A.
    // With k == 0 cuBLAS still checks the leading dimensions against rows it
    // will not read; give it the smallest legal ones.
    const int ldb = static_cast<int>(
        args.k > 0
            ? args.ldb
            : std::max<int64_t>({args.ldb, 1, args.trans_b ? args.k : args.n}));
    const int lda = static_cast<int>(
        args.k > 0
            ? args.lda
            : std::max<int64_t>({args.lda, 1, args.trans_a ? args.m : args.k}));
    const int ldc = static_cast<int>(args.ldc);
    cublasStatus_t status;
    if (compute_ != CUBLAS_COMPUTE_32F) {
      // float32 in and out; cuBLAS rounds the inputs for the Tensor Cores.
      if (args.batch_count == 1) {
        status = api->gemm_ex(
            *handle, Op(args.trans_b), Op(args.trans_a), args.n, args.m, args.k,
            &args.alpha, args.b, CUDA_R_32F, ldb, args.a, CUDA_R_32F, lda,
            &args.beta, args.c, CUDA_R_32F, ldc, compute_, CUBLAS_GEMM_DEFAULT);
      } else {
        status = api->gemm_strided_batched_ex(
            *handle, Op(args.trans_b), Op(args.trans_a), args.n, args.m, args.k,
            &args.alpha, args.b, CUDA_R_32F, ldb, args.stride_b, args.a,
            CUDA_R_32F, lda, args.stride_a, &args.beta, args.c, CUDA_R_32F, ldc,
            args.stride_c, args.batch_count, compute_, CUBLAS_GEMM_DEFAULT);
      }
    } else if (args.batch_count == 1) {
      status = api->sgemm(*handle, Op(args.trans_b), Op(args.trans_a), args.n,
                          args.m, args.k, &args.alpha, args.b, ldb, args.a, lda,
                          &args.beta, args.c, ldc);
    } else {
      status = api->sgemm_strided_batched(
          *handle, Op(args.trans_b), Op(args.trans_a), args.n, args.m, args.k,
          &args.alpha, args.b, ldb, args.stride_b, args.a, lda, args.stride_a,
          &args.beta, args.c, ldc, args.stride_c, args.batch_count);
    }
    if (absl::Status s = CublasStatus(*api, status, "cublasSgemm"); !s.ok())
      return s;
    return CudaStatus(cudaGetLastError(), "cublasSgemm launch");
  }

 private:
  const std::string name_;
  const std::string description_;
  const Precision precision_;
  const cublasComputeType_t compute_;
};

}  // namespace

std::unique_ptr<SgemmKernel> MakeCublasSgemmKernel() {
  return std::make_unique<CublasSgemmKernel>(
      "cublas",
      "cuBLAS SGEMM (pure FP32, CUBLAS_DEFAULT_MATH), strided-batched for "
      "batches",
      Precision::kFp32, CUBLAS_COMPUTE_32F);
}

std::vector<std::unique_ptr<SgemmKernel>> MakeCublasTensorCoreKernels() {
  std::vector<std::unique_ptr<SgemmKernel>> kernels;
  kernels.push_back(std::make_unique<CublasSgemmKernel>(
      "cublas-tf32",
      "cuBLAS GEMM, float32 in and out, inputs rounded to TF32 on Tensor "
      "Cores (CUBLAS_COMPUTE_32F_FAST_TF32)",
      Precision::kTf32, CUBLAS_COMPUTE_32F_FAST_TF32));
  kernels.push_back(std::make_unique<CublasSgemmKernel>(
      "cublas-bf16",
      "cuBLAS GEMM, float32 in and out, inputs rounded to BF16 or finer on "
      "Tensor Cores (CUBLAS_COMPUTE_32F_FAST_16BF: cuBLAS may use TF32)",
      Precision::kBf16, CUBLAS_COMPUTE_32F_FAST_16BF));
  return kernels;
}

absl::StatusOr<std::string> CublasVersion() {
  const absl::StatusOr<CublasApi>& api = Cublas();
  if (!api.ok()) return api.status();
  int major = 0, minor = 0, patch = 0;
  api->get_property(MAJOR_VERSION, &major);
  api->get_property(MINOR_VERSION, &minor);
  api->get_property(PATCH_LEVEL, &patch);
  return absl::StrCat(major, ".", minor, ".", patch);
}

}  // namespace gemm::kernels
