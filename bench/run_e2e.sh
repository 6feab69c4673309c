#!/usr/bin/env bash
# End-to-end benchmarks of issue 6 on a GPU host: gemm-server --backend cuda
# and gemm-client load over loopback, plus the plain-TCP yardstick
# (bench/tcp_blast.py). Binaries come from a gpu-pack directory on PATH.
#
#   . .gpu-e2e/env.sh && bench/run_e2e.sh LABEL
#
# Each case starts a fresh server, reads its CPU time (utime+stime from
# /proc/PID/stat) and resident size (VmRSS, VmHWM) before and after the
# load, and times the client with bash's `time`. Everything lands under
# $OUT/LABEL (logs, JSON, server.tsv); a table is printed last.
# CASES (optional) selects cases by name, e.g. CASES="s128-c64-x8 one4096".
# For A/B runs: SERVER and CLIENT (the binaries, default gemm-server and
# gemm-client),
# CLIENT_FLAGS and SERVER_FLAGS (added to every case), BACKEND (default
# cuda; cpu for a dry run on a machine without a GPU).
set -u
LABEL=${1:-run}
OUT=${OUT:-./out}
D="$OUT/$LABEL"
mkdir -p "$D"
T=$(mktemp -d)
CACHE=$T/dispatch.tsv
TCK=$(getconf CLK_TCK)
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv >"$D/gpu.txt" 2>&1
nproc >"$D/nproc.txt"
printf 'case\tserver_cpu_s\tjobs\tserver_cpu_ms_per_job\trss_idle_mb\trss_end_mb\thwm_mb\tclient_real_s\tclient_user_s\tclient_sys_s\n' >"$D/server.tsv"

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
kb() { awk -v k="$2" '$1 == k":" {print $2}' "/proc/$1/status"; }

# run_case NAME "SERVER FLAGS" CLIENT-FLAGS...
run_case() {
  local name=$1 sflags=$2; shift 2
  if [ -n "${CASES:-}" ] && ! [[ " $CASES " == *" $name "* ]]; then return; fi
  rm -f "$T/port"
  # shellcheck disable=SC2086
  "${SERVER:-gemm-server}" --listen 127.0.0.1:0 --port-file "$T/port" --backend "${BACKEND:-cuda}" \
      --dispatch-cache "$CACHE" $sflags ${SERVER_FLAGS:-} >"$D/server-$name.log" 2>&1 &
  local pid=$!
  for _ in $(seq 300); do [ -s "$T/port" ] && break; sleep 0.05; done
  local port; port=$(cat "$T/port")
  local c0 r0; c0=$(cpu_ticks $pid); r0=$(kb $pid VmRSS)
  local tf="$T/time"
  # shellcheck disable=SC2086
  { TIMEFORMAT='%R %U %S'; time timeout 60 "${CLIENT:-gemm-client}" load --server "127.0.0.1:$port" \
      --json "$D/$name.json" -q "$@" ${CLIENT_FLAGS:-} >"$D/client-$name.log" 2>&1; } 2>"$tf"
  local c1 r1 h1; c1=$(cpu_ticks $pid); r1=$(kb $pid VmRSS); h1=$(kb $pid VmHWM)
  kill -TERM $pid; wait $pid
  local jobs; jobs=$(python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(r['warmup_jobs']+r['count'])" "$D/$name.json" 2>/dev/null || echo 0)
  read -r creal cuser csys <"$tf"
  python3 - "$name" "$c0" "$c1" "$TCK" "$jobs" "$r0" "$r1" "$h1" "$creal" "$cuser" "$csys" >>"$D/server.tsv" <<'PY'
import sys
n, c0, c1, tck, jobs, r0, r1, h1, cr, cu, cs = sys.argv[1:]
cpu = (int(c1) - int(c0)) / int(tck)
jobs = int(jobs)
print("\t".join([n, f"{cpu:.2f}", str(jobs), f"{1e3*cpu/max(jobs,1):.4f}",
                 f"{int(r0)/1024:.0f}", f"{int(r1)/1024:.0f}", f"{int(h1)/1024:.0f}", cr, cu, cs]))
PY
}

# Targets (issue 6): 128^3 x 64 in flight; 1024^3 x 16; one 4096^3 alone;
# 4096^3 x 4 in flight.
run_case s128-c64-x1 "${S128:-}" --shapes 128x128x128 --concurrency 64 --duration-s 5 --warmup-s 1 --connections 1
run_case s128-c64-x8 "${S128:-}" --shapes 128x128x128 --concurrency 64 --duration-s 5 --warmup-s 1 --connections 8
run_case s128-c64-x16 "${S128:-}" --shapes 128x128x128 --concurrency 64 --duration-s 5 --warmup-s 1 --connections 16
run_case m1024-c16-x1 "${S1024:-}" --shapes 1024x1024x1024 --concurrency 16 --duration-s 5 --warmup-s 1 --connections 1
run_case m1024-c16-x4 "${S1024:-}" --shapes 1024x1024x1024 --concurrency 16 --duration-s 5 --warmup-s 1 --connections 4
run_case one4096 "${S4096:-}" --shapes 4096x4096x4096 --concurrency 1 --count 8 --warmup-s 1.5 --connections 1 ${C4096:-}
run_case four4096-x4 "${S4096:-}" --shapes 4096x4096x4096 --concurrency 4 --duration-s 6 --warmup-s 2 --connections 4 ${C4096:-}
# Several streams on one connection, and one job over several streams
# (--split: row blocks of C, B with every part): per stream or per
# connection, where is the limit?
run_case four4096-x1-s4 "${S4096:-}" --shapes 4096x4096x4096 --concurrency 4 --duration-s 6 --warmup-s 2 --connections 1 --streams-per-connection 4 ${C4096:-}
run_case one4096-x1-split4 "${S4096:-}" --shapes 4096x4096x4096 --concurrency 1 --count 8 --warmup-s 1.5 --connections 1 --split 4 ${C4096:-}
run_case one4096-x2-split2 "${S4096:-}" --shapes 4096x4096x4096 --concurrency 1 --count 8 --warmup-s 1.5 --connections 2 --split 2 ${C4096:-}
run_case one4096-x4-split4 "${S4096:-}" --shapes 4096x4096x4096 --concurrency 1 --count 8 --warmup-s 1.5 --connections 4 --split 4 ${C4096:-}

for n in 1 4 8; do
  if [ -n "${CASES:-}" ] && ! [[ " $CASES " == *" tcp$n "* ]]; then continue; fi
  timeout 30 python3 "$(dirname "$0")/tcp_blast.py" --connections $n --seconds 3 \
      --out "$D/tcp$n.json" >/dev/null 2>"$D/tcp$n.err"
done

python3 - "$D" <<'PY'
import glob, json, os, sys
d = sys.argv[1]
print(f"{'case':16} {'jobs/s':>9} {'p50ms':>8} {'p99ms':>8} {'MB/s in+out':>11} {'batch':>6} {'srv_ms':>7} {'err':>4}")
for f in sorted(glob.glob(os.path.join(d, "*.json"))):
    n = os.path.basename(f)[:-5]
    r = json.load(open(f))
    if n.startswith("tcp"):
        print(f"{n:16} aggregate {r['aggregate_bytes_per_s']/1e6:.0f} MB/s over {r['connections']} conn")
        continue
    L = r["latency_ms"]
    print(f"{n:16} {r['requests_per_s']:9.1f} {L['p50']:8.2f} {L['p99']:8.2f} {r['mb_per_s_in']+r['mb_per_s_out']:11.0f} "
          f"{r['server_ms']['mean_batch_size']:6.1f} {r['server_ms']['total']['mean']:7.2f} {r['errors']:4d}")
print(open(os.path.join(d, "server.tsv")).read())
PY
