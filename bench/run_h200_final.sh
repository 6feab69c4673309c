#!/usr/bin/env bash
# Issue 6, session 2: the GPU suites, then every end-to-end case of
# bench/run_e2e.sh with this build's defaults, then the large cases again
# with 4 MiB chunks and large HTTP/2 windows and frames. Binaries come from
# a gpu-pack folder on PATH; everything lands in $OUT/final.tar.gz and the
# tables are printed last.
#
#   . .gpu/env.sh && bench/run_h200_final.sh
set -u
OUT=${OUT:-./out}
here=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d)/final
mkdir -p "$W"
export TEST_TMPDIR=$(mktemp -d)
suites=$(bash "$here/gpu_suites.sh" "$W/suites")
run() { local label=$1; shift; env "$@" OUT="$W" bash "$here/run_e2e.sh" "$label" >"$W/$label.table" 2>&1; }
# FINAL_CASES (optional) restricts the first pass; SKIP_H2BIG skips the
# second.
run defaults "CASES=${FINAL_CASES:-}"
[ -n "${SKIP_H2BIG:-}" ] || {
h2="--chunk-bytes 4194304 --http2-stream-window-bytes 16777216 --http2-max-frame-bytes 4194304"
run h2big CLIENT_FLAGS="$h2" \
  SERVER_FLAGS="--result-chunk-bytes 4194304 --http2-stream-window-bytes 16777216 --http2-max-frame-bytes 4194304" \
  CASES="m1024-c16-x4 one4096 four4096-x4 one4096-x4-split4"
}
tar -czf "$OUT/final.tar.gz" -C "$(dirname "$W")" final
for f in "$W"/*.table; do echo "== $(basename "$f" .table)"; cat "$f"; done
echo "$suites"
