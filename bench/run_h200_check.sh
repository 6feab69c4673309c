#!/usr/bin/env bash
# A short check of a build on a GPU host: the three GPU suites, then
# gemm-server --backend cuda under short loads (128^3 at 64 in flight,
# 1024^3 at 16, 4096^3 at 4) with the server's counters compared, and one
# 4096^3 job alone, five times. Logs go to $OUT as one
# tarball; a summary is printed last.
#
#   . .gpu/env.sh && bench/run_h200_check.sh
set -u
OUT=${OUT:-./out}
logs=$(mktemp -d)/check
mkdir -p "$OUT" "$logs"
export TEST_TMPDIR=$(mktemp -d)
summary=()
nvidia-smi --query-gpu=index,name,driver_version --format=csv >"$logs/gpu.txt" 2>&1
step() {  # step NAME TIMEOUT CMD...
  local name=$1 t=$2; shift 2
  timeout "$t" "$@" >"$logs/$name.log" 2>&1
  local rc=$?
  summary+=("$name rc=$rc $(grep -E '^\[  (PASSED|FAILED) ' "$logs/$name.log" | tr '\n' ' ')")
}
step sgemm_gpu_test 180 sgemm_gpu_test
step cuda_executor_test 180 cuda_executor_test
GEMM_SERVER_BINARY=$(command -v gemm-server) step gpu_integration_test 240 gpu_integration_test
gemm-server --listen 127.0.0.1:0 --port-file "$TEST_TMPDIR/port" --backend cuda \
  >"$logs/server.log" 2>&1 &
pid=$!
for _ in $(seq 200); do [ -s "$TEST_TMPDIR/port" ] && break; sleep 0.1; done
addr=127.0.0.1:$(cat "$TEST_TMPDIR/port")
step load_128 60 gemm-client load -s "$addr" --shapes 128x128x128 -c 64 --connections 8 \
  --duration-s 5 --warmup-s 1 -q --verify-every 1000 --json "$logs/load-128.json"
step load_1024 60 gemm-client load -s "$addr" --shapes 1024x1024x1024 -c 16 --connections 4 \
  --duration-s 5 --warmup-s 1 -q --verify-every 100 --json "$logs/load-1024.json"
step single_4096 120 gemm-client run -s "$addr" -m 4096 -n 4096 -k 4096 --repeat 5
step load_4096 90 gemm-client load -s "$addr" --shapes 4096x4096x4096 -c 4 --connections 4 \
  --duration-s 8 --warmup-s 2 -q --json "$logs/load-4096.json"
kill -TERM $pid
wait $pid
summary+=("server exit=$?")
tar -czf "$OUT/check-results.tar.gz" -C "$(dirname "$logs")" check
cat "$logs/gpu.txt"
for f in "$logs"/load_*.log; do
  echo "$(basename "$f"): $(grep -E 'count  |requests/s|MB/s|p50|server counts|Verified' "$f" | tr -s ' ' | tr '\n' ' ')"
done
grep "^run" "$logs/single_4096.log" | cut -c1-110
printf '%s\n' "${summary[@]}"
