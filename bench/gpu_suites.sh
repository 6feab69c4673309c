#!/usr/bin/env bash
# The three GPU suites (kernels, CUDA engine, server on the GPU), logs into
# DIR, one summary line each on stdout. Sourced or run by the bench/run_h200_*
# scripts; binaries from a gpu-pack folder on PATH. SKIP_SUITES skips them.
#
#   bench/gpu_suites.sh "$OUT/suites" >"$OUT/suites.txt"
set -u
dir=$1
mkdir -p "$dir"
[ -z "${SKIP_SUITES:-}" ] || exit 0
export TEST_TMPDIR=${TEST_TMPDIR:-$(mktemp -d)}
for t in sgemm_gpu_test cuda_executor_test gpu_integration_test; do
  GEMM_SERVER_BINARY=$(command -v gemm-server) timeout 240 "$t" >"$dir/$t.log" 2>&1
  echo "$t rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$dir/$t.log" | tr '\n' ' ')"
done
