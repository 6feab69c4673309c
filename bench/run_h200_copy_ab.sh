#!/usr/bin/env bash
# A/B of two builds on one GPU host: the server and client of a previous
# commit (gemm-server-prev, gemm-client-prev on PATH) against this build's,
# in every pairing, the pure pairs twice, on the large cases of
# bench/run_e2e.sh. Tables printed last; everything
# in $OUT/copy-ab.tar.gz. Used 2026-11-30 for "copies off the transport's
# path" (commit 1e276a9 against 78bde01; no gain, reverted:
# docs/performance.md).
#
#   . .gpu/env.sh && bench/run_h200_copy_ab.sh
set -u
OUT=${OUT:-./out}
here=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d)/copy-ab
mkdir -p "$W"
cases="m1024-c16-x4 one4096 four4096-x4"
run() { local label=$1; shift; env "$@" OUT="$W" bash "$here/run_e2e.sh" "$label" >"$W/$label.table" 2>&1; }
run tcp CASES="tcp1 tcp4"
run 1-prev-prev SERVER=gemm-server-prev CLIENT=gemm-client-prev CASES="$cases"
run 2-new-new CASES="$cases"
run 3-new-server-prev-client CLIENT=gemm-client-prev CASES="$cases"
run 4-prev-server-new-client SERVER=gemm-server-prev CASES="$cases"
run 5-prev-prev SERVER=gemm-server-prev CLIENT=gemm-client-prev CASES="$cases"
run 6-new-new CASES="$cases"
tar -czf "$OUT/copy-ab.tar.gz" -C "$(dirname "$W")" copy-ab
for f in "$W"/*.table; do echo "== $(basename "$f" .table)"; grep -vE '^(case|$)' "$f" | cut -c1-80; done
