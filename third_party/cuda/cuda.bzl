"""cuda_library: compiles .cu files with nvcc into a cc_library.

Each .cu file becomes one position-independent object through a genrule (the
toolchain-free way that works with Bazel 4.2.3); the objects and the headers
form an ordinary cc_library that C++ targets depend on. Only usable where
@local_cuda//:defs.bzl says CUDA_AVAILABLE; wrap uses in if_cuda().
"""

load("@local_cuda//:defs.bzl", "CUDA_ARCHS", "NVCC")

def _gencode_flags():
    flags = []
    for arch in CUDA_ARCHS:
        flags.append("-gencode=arch=compute_%s,code=sm_%s" % (arch, arch))
    if CUDA_ARCHS:
        top = CUDA_ARCHS[-1]
        flags.append("-gencode=arch=compute_%s,code=compute_%s" % (top, top))
    return flags

def cuda_library(name, srcs, hdrs = [], nvcc_hdrs = [], deps = [], copts = [], gencode = None, visibility = None, **kwargs):
    """A cc_library whose .cu sources are compiled by nvcc.

    Args:
      name: target name.
      srcs: .cu files (plus any .cc files, compiled by the C++ toolchain).
      hdrs: public headers.
      deps: cc_library deps; their headers must be listed in hdrs of targets
        in this repository (nvcc sees the workspace root as an include path).
      nvcc_hdrs: headers of other packages that the .cu files include
        (exported files, e.g. "//common:abft.h"); their libraries go in deps.
      copts: extra nvcc flags.
      gencode: nvcc -gencode flags that replace those of CUDA_ARCHS (for code
        that only one architecture runs, e.g. sm_90a's wgmma).
      visibility: as for cc_library.
      **kwargs: passed to the cc_library.
    """
    objs = []
    cc_srcs = []
    for src in srcs:
        if not src.endswith(".cu"):
            cc_srcs.append(src)
            continue
        obj = "_objs_cuda/%s/%s.pic.o" % (name, src[:-3])
        native.genrule(
            name = "%s_%s_nvcc" % (name, src[:-3].replace("/", "_")),
            srcs = [src] + hdrs + nvcc_hdrs + [
                h
                for h in native.glob(["*.h", "*.cuh"])
                if h not in hdrs and h != src
            ] + ["@local_cuda//:cuda_headers"],
            outs = [obj],
            cmd = " ".join([
                NVCC,
                "-std=c++17",
                "-O3",
                "--expt-relaxed-constexpr",
                "-Xcompiler",
                "-fPIC",
                "-I.",
                "-I$(GENDIR)",
                "-c",
            ] + (_gencode_flags() if gencode == None else gencode) + copts + [
                "$(location %s)" % src,
                "-o",
                "$@",
            ]),
            message = "nvcc %s" % src,
        )
        objs.append(obj)
    # nvcc's objects call into the static CUDA runtime, so they must be
    # linked statically into each binary and test, never into a shared
    # library of their own.
    kwargs.setdefault("linkstatic", True)
    native.cc_library(
        name = name,
        srcs = objs + cc_srcs,
        hdrs = hdrs,
        deps = deps + ["@local_cuda//:cudart"],
        visibility = visibility,
        **kwargs
    )
