// libgemm_blas.so: SGEMM through gemm-server for programs that call BLAS.
//
// Exports sgemm_ (Fortran BLAS) and cblas_sgemm, with the cblas_sgemm of
// 64-bit-integer OpenBLAS builds (cblas_sgemm64_) and of numpy's and SciPy's
// wheels (scipy_cblas_sgemm64_, scipy_cblas_sgemm). Preloaded
// (LD_PRELOAD=libgemm_blas.so) or linked before the program's BLAS, it
// sends each SGEMM of at least GEMM_BLAS_MIN_SIZE multiply-adds (m*n*k) to
// the service, and hands everything else to the next BLAS (the next in the
// link order, else GEMM_BLAS_NEXT or the system's: NextBlas below): smaller
// calls, calls with arguments BLAS
// rejects (so its XERBLA reports them), and every call while the service
// cannot be reached or refuses the job. A BLAS call cannot fail, so it
// never does: the answer is the service's or the local BLAS's, and the
// first time each kind of fallback happens one line says so on stderr.
// Every other BLAS routine is untouched. Configuration, in the manner of
// NVBLAS, from the environment when the first SGEMM arrives:
//
//   GEMM_BLAS_SERVER      host:port, or several comma-separated (balanced
//                         round robin); default localhost:50051
//   GEMM_BLAS_MIN_SIZE    smallest m*n*k sent; default 16777216 (256^3);
//                         0 sends every call
//   GEMM_BLAS_KERNEL      the kernel to ask for; default auto
//   GEMM_BLAS_TIMEOUT_S   deadline of one call; default 600
//   GEMM_BLAS_RETRY_S     after a failed call, compute locally this long
//                         before asking the service again; default 10
//   GEMM_BLAS_TLS_CA, GEMM_BLAS_TLS_CERT, GEMM_BLAS_TLS_KEY,
//   GEMM_BLAS_TOKEN_FILE  TLS and the bearer token, as gemm-client's flags
//   GEMM_BLAS_LOG         off, warn (the default: each kind of fallback
//                         once) or info (also one line per call sent)
//   GEMM_BLAS_NEXT        the BLAS library for the calls not sent, when
//                         none follows this one in the link order; default
//                         libblas.so.3, then libopenblas.so.0
//
// Thread-safety: every entry point may be called from any thread.
#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/blas/blas_layout.h"
#include "client/lib/gemm_client.h"

namespace gemm::client {
namespace {

using FortranSgemm = void (*)(const char*, const char*, const int*, const int*,
                              const int*, const float*, const float*,
                              const int*, const float*, const int*,
                              const float*, float*, const int*, size_t, size_t);
template <typename Int>
using CblasSgemm = void (*)(int, int, int, Int, Int, Int, float, const float*,
                            Int, const float*, Int, float, float*, Int);

// CBLAS's enumerators.
constexpr int kCblasRowMajor = 101, kCblasColMajor = 102;
constexpr int kCblasNoTrans = 111, kCblasTrans = 112, kCblasConjTrans = 113;

enum class LogLevel { kOff, kWarn, kInfo };

struct Config {
  client::GemmClient::Options options;
  std::string servers;
  uint64_t min_size = uint64_t{256} * 256 * 256;
  std::string kernel = "auto";
  absl::Duration retry_after = absl::Seconds(10);
  LogLevel log = LogLevel::kWarn;
};

std::string Env(const char* name, const char* fallback = "") {
  const char* value = std::getenv(name);
  return value != nullptr ? value : fallback;
}

Config ReadConfig() {
  Config config;
  config.servers = Env("GEMM_BLAS_SERVER", "localhost:50051");
  std::vector<std::string> servers =
      absl::StrSplit(config.servers, ',', absl::SkipWhitespace());
  if (servers.size() > 1) {
    config.options.targets = servers;
  } else if (!servers.empty()) {
    config.options.target = servers.front();
  }
  uint64_t min_size = 0;
  if (absl::SimpleAtoi(Env("GEMM_BLAS_MIN_SIZE"), &min_size)) {
    config.min_size = min_size;
  }
  config.kernel = Env("GEMM_BLAS_KERNEL", "auto");
  double seconds = 600;
  absl::SimpleAtod(Env("GEMM_BLAS_TIMEOUT_S", "600"), &seconds);
  config.options.timeout = absl::Seconds(seconds);
  seconds = 10;
  absl::SimpleAtod(Env("GEMM_BLAS_RETRY_S", "10"), &seconds);
  config.retry_after = absl::Seconds(seconds);
  config.options.tls_ca_file = Env("GEMM_BLAS_TLS_CA");
  config.options.tls_cert_file = Env("GEMM_BLAS_TLS_CERT");
  config.options.tls_key_file = Env("GEMM_BLAS_TLS_KEY");
  config.options.token_file = Env("GEMM_BLAS_TOKEN_FILE");
  const std::string log = Env("GEMM_BLAS_LOG", "warn");
  config.log = log == "off"    ? LogLevel::kOff
               : log == "info" ? LogLevel::kInfo
                               : LogLevel::kWarn;
  return config;
}

// What the library keeps between calls. Never destroyed: a program may
// call BLAS from its exit handlers, and gRPC's threads must not be torn
// down under them.
class Offload {
 public:
  static Offload& Get() {
    static Offload* offload = new Offload();
    return *offload;
  }

  const Config& config() const { return config_; }

  // True when the service should get this call now (not right after a
  // failure).
  bool Ready() const {
    return absl::GetCurrentTimeNanos() >= next_try_ns_.load();
  }

  // Sends `g` to the service; false (with the reason logged once) when the
  // caller must compute it itself.
  bool Run(const StridedGemm& g) {
    absl::StatusOr<GemmClient*> client = Client();
    if (!client.ok()) return Fail(client.status());
    // Dense row-major operands: the caller's own memory where it already is.
    std::vector<float> a_dense, b_dense, c_dense, out;
    const float* a =
        Dense(g.a, g.lda, StoredRowsA(g), StoredColsA(g), &a_dense);
    const float* b =
        Dense(g.b, g.ldb, StoredRowsB(g), StoredColsB(g), &b_dense);
    const float* c = nullptr;
    if (g.beta != 0.0f) c = Dense(g.c, g.ldc, g.m, g.n, &c_dense);
    GemmArgs args;
    args.problem = GemmProblem{static_cast<uint32_t>(g.m),
                               static_cast<uint32_t>(g.n),
                               static_cast<uint32_t>(g.k),
                               g.trans_a,
                               g.trans_b,
                               g.alpha,
                               g.beta};
    args.kernel = config_.kernel;
    args.a = a;
    args.b = b;
    args.c = c;
    // The result lands in C itself when C is dense and not an input.
    float* result = g.c;
    if (g.ldc != g.n || c != nullptr) {
      out.resize(static_cast<size_t>(g.m * g.n));
      result = out.data();
    }
    absl::StatusOr<v1::Timing> timing = (*client)->Gemm(args, result);
    if (!timing.ok()) return Fail(timing.status());
    if (result != g.c) UnpackRows(result, g.m, g.n, g.c, g.ldc);
    if (config_.log == LogLevel::kInfo) {
      std::fprintf(stderr,
                   "gemm-blas: %lldx%lldx%lld on %s (%s, %s): server %.3f ms\n",
                   static_cast<long long>(g.m), static_cast<long long>(g.n),
                   static_cast<long long>(g.k), config_.servers.c_str(),
                   timing->kernel().c_str(), timing->device().c_str(),
                   timing->server_ms());
    }
    return true;
  }

  // Says once per kind of reason why a call is computed locally.
  void Note(const std::string& reason) {
    if (config_.log == LogLevel::kOff) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (!noted_.insert(reason).second) return;
    std::fprintf(stderr, "gemm-blas: %s\n", reason.c_str());
  }

 private:
  Offload() : config_(ReadConfig()) {}

  absl::StatusOr<GemmClient*> Client() {
    std::lock_guard<std::mutex> lock(mu_);
    // gRPC does not survive fork(): a child (numpy's multiprocessing, say)
    // computes locally rather than use its parent's channel.
    if (client_ != nullptr && client_pid_ != getpid()) {
      return absl::FailedPreconditionError(
          "a forked child process; gRPC channels do not survive fork()");
    }
    if (client_ == nullptr) {
      client_pid_ = getpid();
      absl::StatusOr<std::unique_ptr<GemmClient>> made =
          GemmClient::Create(config_.options);
      if (!made.ok()) return made.status();
      client_ = std::move(*made);
    }
    return client_.get();
  }

  static const float* Dense(const float* x, int64_t ld, int64_t rows,
                            int64_t cols, std::vector<float>* copy) {
    if (ld == cols) return x;
    copy->resize(static_cast<size_t>(rows * cols));
    PackRows(x, ld, rows, cols, copy->data());
    return copy->data();
  }

  bool Fail(const absl::Status& status) {
    next_try_ns_.store(absl::GetCurrentTimeNanos() +
                       absl::ToInt64Nanoseconds(config_.retry_after));
    Note(absl::StrCat("the service at ", config_.servers, " did not compute ",
                      "an SGEMM (", absl::StatusCodeToString(status.code()),
                      ": ", status.message(),
                      "); such calls are computed by the local BLAS, and the "
                      "service is asked again after GEMM_BLAS_RETRY_S"));
    return false;
  }

  const Config config_;
  std::mutex mu_;
  std::unique_ptr<GemmClient> client_;
  pid_t client_pid_ = 0;  // the process that made client_
  std::set<std::string> noted_;
  // When the service may be asked again (ns since the epoch).
  std::atomic<int64_t> next_try_ns_{0};
};

// Set while this thread is inside the next BLAS: a CBLAS that implements
// cblas_sgemm with sgemm_ must not have its inner call sent again.
thread_local bool in_next_blas = false;

// `symbol` in an object loaded now, other than this library: programs that
// load their BLAS with dlopen (Python's numpy) keep its symbols out of the
// global scope, where RTLD_NEXT cannot see them.
void* FindInLoadedObjects(const char* symbol, const void* self) {
  // The names first, dlopen after: dlopen inside dl_iterate_phdr's callback
  // takes the loader's locks in the opposite order to a dlopen elsewhere.
  std::vector<std::string> names;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0') {
          static_cast<std::vector<std::string>*>(data)->push_back(
              info->dlpi_name);
        }
        return 0;
      },
      &names);
  for (const std::string& name : names) {
    void* handle = dlopen(name.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    if (handle == nullptr) continue;
    void* found = dlsym(handle, symbol);
    dlclose(handle);  // RTLD_NOLOAD took a reference
    if (found != nullptr && found != self) return found;
  }
  return nullptr;
}

// The BLAS routine that calls go to when the service does not take them:
// the next definition in the link order (RTLD_NEXT), else one in any loaded
// object, else in the library GEMM_BLAS_NEXT names, else in the system's
// BLAS (Debian's libblas.so.3 alternative, OpenBLAS). `self` is this
// library's own definition, never the answer.
template <typename F>
F NextBlas(const char* symbol, F self) {
  const void* own = reinterpret_cast<const void*>(self);
  if (void* next = dlsym(RTLD_NEXT, symbol); next != nullptr && next != own) {
    return reinterpret_cast<F>(next);
  }
  if (void* next = FindInLoadedObjects(symbol, own)) {
    return reinterpret_cast<F>(next);
  }
  std::vector<std::string> libraries;
  if (const std::string named = Env("GEMM_BLAS_NEXT"); !named.empty()) {
    libraries.push_back(named);
  }
  for (const char* system : {"libblas.so.3", "libopenblas.so.0"}) {
    libraries.push_back(system);
  }
  for (const std::string& library : libraries) {
    void* handle = dlopen(library.c_str(), RTLD_LAZY | RTLD_LOCAL);
    if (handle == nullptr) continue;
    if (void* next = dlsym(handle, symbol); next != nullptr && next != own) {
      return reinterpret_cast<F>(next);
    }
  }
  return nullptr;
}

// Whether the service takes this call: valid (else BLAS reports it), work
// to do, big enough, and no recent failure.
bool ShouldOffload(const StridedGemm& g) {
  if (in_next_blas || !Valid(g) || g.m == 0 || g.n == 0 || g.k == 0 ||
      g.alpha == 0.0f) {
    return false;
  }
  // The service's dimensions are 32-bit.
  if (g.m > UINT32_MAX || g.n > UINT32_MAX || g.k > UINT32_MAX) return false;
  Offload& offload = Offload::Get();
  const uint64_t size = static_cast<uint64_t>(g.m) *
                        static_cast<uint64_t>(g.n) * static_cast<uint64_t>(g.k);
  return size >= offload.config().min_size && offload.Ready();
}

// Computes `g` with the next BLAS (call_next), or here when there is none.
template <typename CallNext>
void ComputeElsewhere(const StridedGemm& g, bool have_next,
                      CallNext&& call_next) {
  if (have_next) {
    const bool outer = in_next_blas;
    in_next_blas = true;
    call_next();
    in_next_blas = outer;
    return;
  }
  if (!Valid(g)) {
    Offload::Get().Note(
        "an SGEMM with invalid arguments and no BLAS after this library to "
        "report them; ignored");
    return;
  }
  Offload::Get().Note(
      "no BLAS to hand calls to (none after this library in the link order, "
      "none at GEMM_BLAS_NEXT, libblas.so.3 or libopenblas.so.0); calls the "
      "service does not take are computed by its own reference loops");
  ComputeLocally(g);
}

// One cblas_sgemm call: to the service, else to `next` (or here).
template <typename Int>
void Cblas(CblasSgemm<Int> next, int order, int trans_a, int trans_b, Int m,
           Int n, Int k, float alpha, const float* a, Int lda, const float* b,
           Int ldb, float beta, float* c, Int ldc) {
  auto letter = [](int t) {
    return t == kCblasNoTrans                           ? 'N'
           : (t == kCblasTrans || t == kCblasConjTrans) ? 'T'
                                                        : '?';
  };
  StridedGemm g;
  if (order == kCblasColMajor) {
    g = FromColumnMajor(letter(trans_a), letter(trans_b), m, n, k, alpha, a,
                        lda, b, ldb, beta, c, ldc);
  } else {
    g = FromRowMajor(letter(trans_a) == 'T', letter(trans_b) == 'T', m, n, k,
                     alpha, a, lda, b, ldb, beta, c, ldc);
    g.known_transposes = order == kCblasRowMajor && letter(trans_a) != '?' &&
                         letter(trans_b) != '?';
  }
  if (ShouldOffload(g) && Offload::Get().Run(g)) return;
  ComputeElsewhere(g, next != nullptr, [&] {
    next(order, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  });
}

}  // namespace
}  // namespace gemm::client

extern "C" {

__attribute__((visibility("default"))) void sgemm_(
    const char* transa, const char* transb, const int* m, const int* n,
    const int* k, const float* alpha, const float* a, const int* lda,
    const float* b, const int* ldb, const float* beta, float* c, const int* ldc,
    size_t transa_len, size_t transb_len) {
  using gemm::client::FortranSgemm;
  const gemm::client::StridedGemm g = gemm::client::FromColumnMajor(
      *transa, *transb, *m, *n, *k, *alpha, a, *lda, b, *ldb, *beta, c, *ldc);
  if (gemm::client::ShouldOffload(g) && gemm::client::Offload::Get().Run(g)) {
    return;
  }
  static const FortranSgemm next =
      gemm::client::NextBlas<FortranSgemm>("sgemm_", &sgemm_);
  gemm::client::ComputeElsewhere(g, next != nullptr, [&] {
    next(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
         transa_len, transb_len);
  });
}

// cblas_sgemm, the LP64 (int) and ILP64 (int64) variants alike.
#define GEMM_BLAS_CBLAS_SGEMM(symbol, Int)                                     \
  __attribute__((visibility("default"))) void symbol(                          \
      int order, int trans_a, int trans_b, Int m, Int n, Int k, float alpha,   \
      const float* a, Int lda, const float* b, Int ldb, float beta, float* c,  \
      Int ldc) {                                                               \
    using Next = gemm::client::CblasSgemm<Int>;                                \
    static const Next next = gemm::client::NextBlas<Next>(#symbol, &symbol);   \
    gemm::client::Cblas<Int>(next, order, trans_a, trans_b, m, n, k, alpha, a, \
                             lda, b, ldb, beta, c, ldc);                       \
  }

GEMM_BLAS_CBLAS_SGEMM(cblas_sgemm, int)
// OpenBLAS built with 64-bit integers and a symbol suffix (INTERFACE64,
// SYMBOLSUFFIX=64_).
GEMM_BLAS_CBLAS_SGEMM(cblas_sgemm64_, int64_t)
// The OpenBLAS of numpy's and SciPy's wheels (scipy-openblas64 and
// scipy-openblas32), whose symbols carry a scipy_ prefix.
GEMM_BLAS_CBLAS_SGEMM(scipy_cblas_sgemm64_, int64_t)
GEMM_BLAS_CBLAS_SGEMM(scipy_cblas_sgemm, int)

#undef GEMM_BLAS_CBLAS_SGEMM

}  // extern "C"
