#!/usr/bin/env bash
# On a host with two GPUs: the GPU test suites, a rerun of the kernel table
# (to compare with bench/results/h200-kernels-2026-11-30.json), and the
# server on both GPUs under load, with jobs counted per device. Binaries come
# from a gpu-pack folder already on PATH; logs and JSON go to $OUT as one
# tarball; a short summary is printed last.
#
#   . .gpu/env.sh && bench/run_h200_x2.sh
set -u
OUT=${OUT:-./out}
logs=$(mktemp -d)/x2
mkdir -p "$OUT" "$logs"
export TEST_TMPDIR=$(mktemp -d)
summary=()
nvidia-smi --query-gpu=index,name,memory.total,driver_version,clocks.sm \
  --format=csv >"$logs/gpu.txt" 2>&1

step() {  # step NAME TIMEOUT CMD...
  local name=$1 t=$2; shift 2
  timeout "$t" "$@" >"$logs/$name.log" 2>&1
  local rc=$?
  summary+=("$name rc=$rc $(grep -E '^\[  (PASSED|FAILED) ' "$logs/$name.log" | tr '\n' ' ')")
}

step sgemm_gpu_test 180 sgemm_gpu_test
step cuda_executor_test 180 cuda_executor_test
GEMM_SERVER_BINARY=$(command -v gemm-server) step gpu_integration_test 240 gpu_integration_test
if [ -z "${SKIP_BENCH:-}" ]; then
  step gemm_bench 300 gemm-bench --shapes 1024,2048,4096,8192,1000x999x777 \
    --kernels all --repeats 30 --json "$logs/kernels-rerun.json"
fi

gemm-server --listen 127.0.0.1:0 --port-file "$TEST_TMPDIR/port" --backend cuda \
  >"$logs/server-2gpu.log" 2>&1 &
pid=$!
for _ in $(seq 200); do [ -s "$TEST_TMPDIR/port" ] && break; sleep 0.1; done
addr=127.0.0.1:$(cat "$TEST_TMPDIR/port")
step info 30 gemm-client info -s "$addr"
step single_4096 120 gemm-client run -s "$addr" -m 4096 -n 4096 -k 4096 --repeat 3
# The chapter's table through the service, from the client's side.
step kernels_4096 180 gemm-client kernels -s "$addr" -m 4096 -n 4096 -k 4096 \
  --json "$logs/kernels-client-4096.json"
# Optional A/B of two gemm-client builds against this one server.
if [ -n "${PREV_CLIENT:-}" ]; then
  for who in prev new; do
    client=gemm-client
    [ "$who" = prev ] && client=$PREV_CLIENT
    step "ab_${who}_1024" 60 "$client" load -s "$addr" --shapes 1024x1024x1024 -c 16 \
      --connections 4 --duration-s 5 --warmup-s 1 -q --json "$logs/ab-$who-1024.json"
    step "ab_${who}_128" 60 "$client" load -s "$addr" --shapes 128x128x128 -c 64 \
      --connections 8 --duration-s 5 --warmup-s 1 -q --json "$logs/ab-$who-128.json"
  done
fi
step load_2gpu 60 gemm-client load -s "$addr" --shapes 512x512x512:0.5,2048x2048x2048:0.5 \
  -c 32 --connections 8 --duration-s 15 --warmup-s 3 --json "$logs/load-2gpu.json"
kill -TERM $pid
wait $pid
summary+=("server exit=$?")

tar -czf "$OUT/x2-results.tar.gz" -C "$(dirname "$logs")" x2
cat "$logs/gpu.txt"
grep -E "^(cublas|v[0-5]) " "$logs/gemm_bench.log" | head -40
grep -A12 "^Summary" "$logs/load_2gpu.log"
grep -A4 "^Per device" "$logs/load_2gpu.log"
grep "^run" "$logs/single_4096.log" | cut -c1-150
cat "$logs/kernels_4096.log"
for f in "$logs"/ab_*.log; do
  [ -e "$f" ] && echo "$(basename "$f"): $(grep -E "requests/s|p50" "$f" | tr -s ' ' | tr '\n' ' ')"
done
printf '%s\n' "${summary[@]}"
