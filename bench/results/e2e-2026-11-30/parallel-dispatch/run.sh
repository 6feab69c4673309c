#!/usr/bin/env bash
# Parallel-dispatch measurement on the H200 host (2026-11-30).
set -u
. .gpu-lg/env.sh
nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
rm -f /tmp/port
gemm-server --backend cuda --listen 127.0.0.1:0 --port-file /tmp/port >"$OUT/server.log" 2>&1 &
SP=$!
for _ in $(seq 600); do [ -s /tmp/port ] && break; sleep 0.05; done
PORT=$(cat /tmp/port); echo "port $PORT"
run() {  # name, flags...
  local name=$1; shift
  timeout 40 gemm-client load --server 127.0.0.1:$PORT "$@" \
      --duration-s 5 --warmup-s 1 -q --json "$OUT/$name.json" >"$OUT/$name.log" 2>&1
  echo "$name rc=$?"
}
run s128-c64-x8 --shapes 128x128x128 --concurrency 64 --connections 8
run s128-c64-x16 --shapes 128x128x128 --concurrency 64 --connections 16
run s1024-c16-x4 --shapes 1024x1024x1024 --concurrency 16 --connections 4
timeout 20 gemm-client info --server 127.0.0.1:$PORT >"$OUT/info.txt" 2>&1; echo "info rc=$?"
kill -TERM $SP; timeout 20 tail --pid=$SP -f /dev/null
python3 - "$OUT" <<'PY'
import json, sys, os
d = sys.argv[1]
print(f"{'case':14} {'jobs/s':>9} {'p50':>7} {'p99':>7} {'mean':>7} {'srv':>6} {'inflight':>8} {'batch':>5} {'err':>4} {'srv_cnt':>8}")
for n in ["s128-c64-x8", "s128-c64-x16", "s1024-c16-x4"]:
    try: r = json.load(open(os.path.join(d, n + ".json")))
    except Exception as e: print(n, "no json", e); continue
    l = r["latency_ms"]
    print(f"{n:14} {r['requests_per_s']:9.0f} {l['p50']:7.3f} {l['p99']:7.3f} {l['mean']:7.3f} "
          f"{r['server_ms']['total']['mean']:6.3f} {r['requests_per_s']*l['mean']/1000:8.1f} "
          f"{r['server_ms']['mean_batch_size']:5.2f} {r['errors']:4d} "
          f"{r.get('server_jobs_ok',-1)-r['count']-r['warmup_jobs']:8d}")
PY
