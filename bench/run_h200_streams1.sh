#!/usr/bin/env bash
# Batching on vs off with one stream per device, so that each batch's CUDA
# events time its kernel alone (with several streams, kernels of other
# batches run inside a batch's event interval). Also times a cold start's
# calibration. Same environment as run_h200.sh.
set -u
OUT=${OUT:-./out}
mkdir -p "$OUT"
T=$(mktemp -d)
serve() {  # serve NAME SERVER-FLAGS... -- BENCH-FLAGS...
  local name=$1; shift
  local sflags=(); while [ "$1" != "--" ]; do sflags+=("$1"); shift; done; shift
  rm -f "$T/port"
  gemm-server --listen 127.0.0.1:0 --port-file "$T/port" --backend cuda \
      --dispatch-cache "$T/dispatch.tsv" "${sflags[@]}" >"$T/server-$name.log" 2>&1 &
  local pid=$!
  for _ in $(seq 300); do [ -s "$T/port" ] && break; sleep 0.1; done
  timeout 60 serve-bench --target "127.0.0.1:$(cat "$T/port")" --out "$OUT/$name.json" "$@" >"$T/bench-$name.log" 2>&1
  echo "$name rc=$?"
  kill -TERM $pid; wait $pid
  grep -h "dispatch table\|CUDA backend" "$T/server-$name.log" >>"$OUT/server.log"
}
serve s1-batching-on --streams-per-device 1 --max-batch-size 64 --max-queue-delay-us 500 -- \
    --mode batching --size 128 --streams 64 --seconds 8
serve s1-batching-off --streams-per-device 1 --max-batch-size 1 -- \
    --mode batching --size 128 --streams 64 --seconds 8
serve s4-batching-on-depth4 --max-batch-size 64 --max-queue-delay-us 500 -- \
    --mode batching --size 128 --streams 64 --depth 4 --seconds 8
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv >"$OUT/gpu.txt" 2>&1
cat "$OUT/server.log" "$OUT/gpu.txt"
for f in "$OUT"/s*.json; do echo "$f"; cat "$f"; done
