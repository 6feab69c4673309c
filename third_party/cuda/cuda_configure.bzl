"""Finds the CUDA toolkit and exposes it as the @local_cuda repository.

The toolkit is looked up in $CUDA_PATH, then /usr/local/cuda. Where it is
missing (or GEMM_DISABLE_CUDA=1), the repository still exists, with
CUDA_AVAILABLE = False, and every CUDA target drops out of the build: the
server then serves on the CPU backend. The build prints which case it is in.

Environment:
  CUDA_PATH          toolkit root (default /usr/local/cuda)
  GEMM_CUDA_ARCHS    compute capabilities to build, ';'-separated (default
                     "80;90"); each gets SASS, and the highest also PTX.
  GEMM_DISABLE_CUDA  "1" builds without CUDA even where the toolkit exists.
"""

_DEFAULT_ARCHS = "80;90"

def _cuda_configure_impl(ctx):
    cuda_path = ctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    disabled = ctx.os.environ.get("GEMM_DISABLE_CUDA", "0") == "1"
    archs = ctx.os.environ.get("GEMM_CUDA_ARCHS", _DEFAULT_ARCHS)
    archs = [a.strip() for a in archs.split(";") if a.strip()]
    nvcc = ctx.path(cuda_path + "/bin/nvcc")
    found = (not disabled) and nvcc.exists and ctx.path(cuda_path + "/include/cuda_runtime.h").exists

    if found:
        ctx.symlink(cuda_path + "/include", "include")
        ctx.symlink(cuda_path + "/lib64", "lib64")
        # buildifier: disable=print
        print("CUDA found at %s (nvcc, archs %s): building the CUDA engine." % (cuda_path, ",".join(archs)))
        build = """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "cuda_headers",
    hdrs = glob(["include/**"]),
    includes = ["include"],
)

# The CUDA runtime, linked statically so that binaries need no libcudart.
# cuBLAS is opened at run time (kernels/cublas_loader), so a machine without
# it gets a clear error instead of a loader failure.
cc_library(
    name = "cudart",
    srcs = ["lib64/libcudart_static.a"],
    linkopts = ["-ldl", "-lrt", "-lpthread"],
    deps = [":cuda_headers"],
)
"""
    else:
        why = "disabled by GEMM_DISABLE_CUDA=1" if disabled else "no nvcc at " + str(nvcc)
        # buildifier: disable=print
        print("CUDA not found (%s): building without the CUDA engine; the server will serve on the CPU backend." % why)
        build = """
package(default_visibility = ["//visibility:public"])

cc_library(name = "cuda_headers")

cc_library(name = "cudart")
"""
    ctx.file("BUILD.bazel", build)
    ctx.file("defs.bzl", """
CUDA_AVAILABLE = {found}
CUDA_PATH = "{path}"
NVCC = "{path}/bin/nvcc"
CUDA_ARCHS = {archs}

def if_cuda(if_true, if_false = []):
    \"\"\"Returns if_true where the CUDA toolkit was found, else if_false.\"\"\"
    return if_true if CUDA_AVAILABLE else if_false
""".format(found = found, path = cuda_path, archs = archs))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH", "GEMM_CUDA_ARCHS", "GEMM_DISABLE_CUDA"],
    local = True,
)
