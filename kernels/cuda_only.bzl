"""Macros that declare a target only where the CUDA toolkit was found.

BUILD files cannot hold `if` statements; these wrap the usual rules so that
`bazel build --config=cpu //...` (or a machine without CUDA) simply has no
such targets. Dependents outside this package use if_cuda() from
@local_cuda//:defs.bzl.
"""

load("@local_cuda//:defs.bzl", "CUDA_AVAILABLE")
load("@rules_cc//cc:defs.bzl", "cc_binary", "cc_library", "cc_test")
load("//third_party/cuda:cuda.bzl", "cuda_library")

def cuda_only_library(**kwargs):
    """cuda_library (nvcc for .cu sources) where CUDA is available."""
    if CUDA_AVAILABLE:
        cuda_library(**kwargs)

def cuda_only_cc_library(**kwargs):
    """cc_library where CUDA is available."""
    if CUDA_AVAILABLE:
        cc_library(**kwargs)

def cuda_only_cc_binary(**kwargs):
    """cc_binary where CUDA is available."""
    if CUDA_AVAILABLE:
        cc_binary(**kwargs)

def cuda_only_cc_test(**kwargs):
    """cc_test where CUDA is available."""
    if CUDA_AVAILABLE:
        cc_test(**kwargs)
