"""gemm_fuzz_target: a fuzz target, its regression test and its corpus.

    gemm_fuzz_target(
        name = "wire_codec_fuzzer",
        srcs = ["wire_codec_fuzzer.cc"],
        corpus = glob(["corpus/wire_codec/*"]),
        deps = [":wire_codec"],
    )

makes
  - <name>: the target. Under `--config=fuzz` (clang, libFuzzer, ASan and
    UBSan) it is a libFuzzer binary; otherwise it replays the corpus and
    mutations of it (common/fuzz_main.cc).
  - <name>_test: a test that replays the corpus and `mutations` deterministic
    mutations of it, under whatever config the suite runs with.
"""

def gemm_fuzz_target(name, srcs, corpus, deps = [], mutations = 20000, **kwargs):
    native.cc_library(
        name = name + "_lib",
        testonly = True,
        srcs = srcs,
        deps = deps,
        alwayslink = True,
        **kwargs
    )
    native.cc_binary(
        name = name,
        testonly = True,
        deps = [":" + name + "_lib"] + select({
            "//common:fuzzing": [],
            "//conditions:default": ["//common:fuzz_main"],
        }),
        linkopts = select({
            "//common:fuzzing": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
    )
    native.cc_test(
        name = name + "_test",
        size = "small",
        deps = [
            ":" + name + "_lib",
            "//common:fuzz_main",
        ],
        data = corpus,
        args = ["$(location %s)" % c for c in corpus] +
               ["--mutations=%d" % mutations],
    )
