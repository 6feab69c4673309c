#!/usr/bin/env bash
# Issue 6, session 2: A/B of the zero-copy client and the CUDA workers'
# blocking sync on one GPU host, every case through bench/run_e2e.sh (a
# fresh server per case, server CPU and RSS from /proc, client CPU from
# `time`). Binaries come from a gpu-pack folder on PATH; the previous client
# (commit 21e5e67, copies operands into protobuf messages) is on PATH as
# gemm-client-prev (and gemm-client-prev-tuned, the same with GLIBC_TUNABLES
# setting what server/large_allocations.h sets). GPU suites first. Everything lands under $OUT; the
# tables are printed last.
#
#   . .gpu/env.sh && bench/run_h200_ab.sh
set -u
OUT=${OUT:-./out}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
export TEST_TMPDIR=$(mktemp -d)
suites=$(bash "$here/gpu_suites.sh" "$OUT/suites")
big="m1024-c16-x4 one4096 four4096-x4"
run() { local label=$1; shift; env "$@" OUT="$OUT" bash "$here/run_e2e.sh" "$label" >"$OUT/$label.table" 2>&1; }
run tcp CASES="tcp1 tcp4"
run prev CLIENT=gemm-client-prev CASES="s128-c64-x8 $big"
# The previous client with the allocator setting of this change, through
# GLIBC_TUNABLES (a wrapper script in the pack): isolates the zero copy.
run prev-tuned CLIENT=gemm-client-prev-tuned CASES="s128-c64-x8 $big"
run new CASES="s128-c64-x8 $big"
run new-spin SERVER_FLAGS=--cuda-blocking-sync=false CASES="s128-c64-x8"
run new-whole CLIENT_FLAGS="--whole-job-bytes 1048576 --inline-result-bytes 1048576" CASES="s128-c64-x8"
run new-4m CLIENT_FLAGS="--chunk-bytes 4194304" SERVER_FLAGS="--result-chunk-bytes 4194304" CASES="$big"
for f in "$OUT"/*.table; do echo "== $(basename "$f" .table)"; cat "$f"; done
echo "$suites"
