#!/usr/bin/env bash
# Where the time of large and small jobs goes on a GPU host: one-way
# transfers (upload only, download only), one 4096^3 job with transport
# variants, and perf profiles (by thread and symbol) of gemm-server and
# gemm-client under a single 4096^3 stream and under 128^3 load. Binaries
# (unstripped, for symbols) and perf come from a gpu-pack folder on PATH.
# Everything lands in $OUT (one tarball); a summary is printed last.
#
#   . .gpu/env.sh && bench/profile_h200.sh
set -u
OUT=${OUT:-./out}
L=$(mktemp -d)/profile
mkdir -p "$OUT" "$L"
T=$(mktemp -d)
summary() {  # summary NAME JSON
  python3 - "$1" "$2" <<'PY'
import json, sys
n, f = sys.argv[1:]
try:
    r = json.load(open(f))
except Exception as e:
    print(f"{n:28} failed: {e}"); sys.exit()
L, S = r["latency_ms"], r["server_ms"]
mb = r["mb_per_s_in"] + r["mb_per_s_out"]
print(f"{n:28} jobs/s {r['requests_per_s']:9.1f}  p50 {L['p50']:7.2f}  mean {L['mean']:7.2f}  p99 {L['p99']:7.2f} ms"
      f"  srv {S['total']['mean']:6.2f} ms  {mb:7.0f} MB/s  err {r['errors']}")
PY
}
start_server() {  # start_server FLAGS...
  rm -f "$T/port"
  gemm-server --listen 127.0.0.1:0 --port-file "$T/port" --backend cuda \
    --dispatch-cache "$T/cache" "$@" >>"$L/server.log" 2>&1 &
  pid=$!
  for _ in $(seq 300); do [ -s "$T/port" ] && break; sleep 0.05; done
  addr=127.0.0.1:$(cat "$T/port")
}
load() {  # load NAME FLAGS...
  local name=$1; shift
  timeout 60 gemm-client load -s "$addr" -q --json "$L/$name.json" "$@" >"$L/$name.log" 2>&1
  summary "$name" "$L/$name.json" >>"$L/summary.txt"
}
threads() { ps -L -p "$1" -o tid=,comm=,time= | sort -k3 -r | head -40; }

start_server
load up128MB --shapes 4096x1x8192 -c 1 --count 8 --warmup-s 1
load down64MB --shapes 4096x4096x1 -c 1 --count 8 --warmup-s 1
load one4096 --shapes 4096x4096x4096 -c 1 --count 8 --warmup-s 1
load one4096-chunk4m --shapes 4096x4096x4096 -c 1 --count 8 --warmup-s 1 --chunk-bytes 4194304
load one4096-chunk16m --shapes 4096x4096x4096 -c 1 --count 8 --warmup-s 1 --chunk-bytes 16777216
load one4096-x2-c1 --shapes 4096x4096x4096 -c 1 --count 8 --warmup-s 1 --connections 2
# Server-side profile of a stream of 4096^3 jobs, one at a time.
threads $pid >"$L/threads-before.txt"
perf record -F 499 -g -p $pid -o "$L/srv-4096.data" -- sleep 6 >/dev/null 2>&1 &
perf_pid=$!
perf record -F 499 -g -o "$L/cli-4096.data" -- gemm-client load -s "$addr" -q \
  --shapes 4096x4096x4096 -c 1 --duration-s 5 --warmup-s 0.5 --json "$L/prof4096.json" >/dev/null 2>&1
wait $perf_pid
threads $pid >"$L/threads-after-4096.txt"
summary prof4096 "$L/prof4096.json" >>"$L/summary.txt"
perf record -F 499 -g -p $pid -o "$L/srv-128.data" -- sleep 5 >/dev/null 2>&1 &
perf_pid=$!
perf record -F 499 -g -o "$L/cli-128.data" -- gemm-client load -s "$addr" -q \
  --shapes 128x128x128 -c 64 --connections 8 --duration-s 4 --warmup-s 0.5 \
  --whole-job-bytes 1048576 --inline-result-bytes 1048576 --json "$L/prof128.json" >/dev/null 2>&1
wait $perf_pid
threads $pid >"$L/threads-after-128.txt"
summary prof128 "$L/prof128.json" >>"$L/summary.txt"
kill -TERM $pid; wait $pid
# Larger HTTP/2 windows and frames on both sides, with 4 MiB chunks.
start_server --http2-stream-window-bytes 16777216 --http2-max-frame-bytes 4194304 --result-chunk-bytes 4194304
load one4096-h2big --shapes 4096x4096x4096 -c 1 --count 8 --warmup-s 1 --chunk-bytes 4194304 \
  --http2-stream-window-bytes 16777216 --http2-max-frame-bytes 4194304
load four4096-h2big --shapes 4096x4096x4096 -c 4 --connections 4 --duration-s 5 --warmup-s 1 \
  --chunk-bytes 4194304 --http2-stream-window-bytes 16777216 --http2-max-frame-bytes 4194304
kill -TERM $pid; wait $pid
for d in "$L"/*.data; do
  b=${d%.data}
  perf report -i "$d" --no-children --sort comm -g none --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' | head -25 >"$b.comm.txt"
  perf report -i "$d" --no-children --sort comm,dso,sym -g none --stdio --percent-limit 0.4 2>/dev/null | grep -v '^#' | grep -v '^$' | head -70 >"$b.sym.txt"
  perf report -i "$d" --children --sort sym -g none --stdio --percent-limit 2 2>/dev/null | grep -v '^#' | grep -v '^$' | head -60 >"$b.children.txt"
  rm -f "$d"
done
nproc >"$L/nproc.txt"
tar -czf "$OUT/profile.tar.gz" -C "$(dirname "$L")" profile
cat "$L/summary.txt"
for b in srv-4096 cli-4096 srv-128 cli-128; do echo "== $b by thread"; head -12 "$L/$b.comm.txt"; done
