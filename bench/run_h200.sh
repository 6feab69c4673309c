#!/usr/bin/env bash
# Runs the CUDA engine's GPU tests and benchmarks on a GPU host, from
# binaries packed by /work/shared/tools/gpu-pack into $PACK (default
# .gpu-engine). Full logs and JSON go to $OUT (default ./out); a short
# summary is printed last.
#
#   . .gpu-engine/env.sh && bench/run_h200.sh
set -u
OUT=${OUT:-./out}
mkdir -p "$OUT"
export TEST_TMPDIR=$(mktemp -d)
CACHE=$TEST_TMPDIR/dispatch.tsv
summary=()
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv >"$OUT/gpu.txt" 2>&1

step() {  # step NAME TIMEOUT CMD...
  local name=$1 t=$2; shift 2
  timeout "$t" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  summary+=("$name rc=$rc")
  return $rc
}

step cuda_executor_test 120 cuda_executor_test
grep -E "^\[  (PASSED|FAILED|SKIPPED)" "$OUT/cuda_executor_test.log" | tail -5
GEMM_SERVER_BINARY=$(command -v gemm-server) step gpu_integration_test 120 gpu_integration_test
grep -E "^\[  (PASSED|FAILED|SKIPPED)" "$OUT/gpu_integration_test.log" | tail -5

step dispatch_bench 90 dispatch-bench --dispatch-cache "$CACHE" --out "$OUT/dispatch.json"
tail -3 "$OUT/dispatch_bench.log"

serve() {  # serve NAME SERVER-FLAGS... -- BENCH-FLAGS...
  local name=$1; shift
  local sflags=() bflags=()
  while [ "$1" != "--" ]; do sflags+=("$1"); shift; done; shift
  bflags=("$@")
  rm -f "$TEST_TMPDIR/port"
  gemm-server --listen 127.0.0.1:0 --port-file "$TEST_TMPDIR/port" --backend cuda \
      --dispatch-cache "$CACHE" "${sflags[@]}" >"$OUT/server-$name.log" 2>&1 &
  local pid=$!
  for _ in $(seq 100); do [ -s "$TEST_TMPDIR/port" ] && break; sleep 0.1; done
  step "bench-$name" 60 serve-bench --target "127.0.0.1:$(cat "$TEST_TMPDIR/port")" \
      --out "$OUT/$name.json" "${bflags[@]}"
  kill -TERM $pid; wait $pid
  tail -c 600 "$OUT/bench-$name.log"; echo
}

serve batching-on --max-batch-size 64 --max-queue-delay-us 500 -- \
    --mode batching --size 128 --streams 64 --seconds 8
serve batching-off --max-batch-size 1 -- \
    --mode batching --size 128 --streams 64 --seconds 8
serve single-4096 --max-message-bytes 268435456 -- \
    --mode single --size 4096 --reps 4
printf '%s\n' "${summary[@]}"
