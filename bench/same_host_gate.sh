#!/usr/bin/env bash
# The regression gate on one host, in one lease: the kept baseline's
# bundle and the new one run the e2e scenario in turn, ROUNDS times each
# (OLD first), and gemmbench.py compare holds each of NEW's cases, by its
# best run, to OLD's best. Two H200 hosts of one kind differ by more than
# the gate's 10% (docs/decisions/0058-the-e2e-regression-gate-and-a-gate-on-the-same.md), so a kept report from another
# day and host is a guide, not a gate.
#
#   bench/same_host_gate.sh OLD_BUNDLE NEW_BUNDLE OUT [ROUNDS] [-- gemmbench run flags]
#
# OLD_BUNDLE and NEW_BUNDLE are unpacked bundles (bazel build //:bundle;
# the folder holding bin/ and lib/), OLD built from the kept baseline's
# commit (bench/baselines/GPU/e2e.json names it). GATE_TOLERANCE sets the
# percent (default 10). Exit: the gate's (0 pass, 1 fail, 2 unusable
# reports). Writes OUT/old-R/, OUT/new-R/ and OUT/gate.json.
set -euo pipefail
if [ $# -lt 3 ]; then
  sed -n '2,14p' "$0" >&2
  exit 2
fi
old=$1 new=$2 out=$3
rounds=${4:-2}
shift $(($# >= 4 ? 4 : 3))
[ "${1:-}" = "--" ] && shift
driver=(python3 "$new/bin/gemmbench.py")
mkdir -p "$out"
olds=() news=()
for round in $(seq 1 "$rounds"); do
  for side in old new; do
    bundle=$old
    [ "$side" = new ] && bundle=$new
    echo "same_host_gate: round $round, $side ($bundle)" >&2
    "${driver[@]}" run --scenario e2e --bin-dir "$bundle/bin" \
      --out "$out/$side-$round" "$@" >"$out/$side-$round.log" 2>&1 || true
    if [ "$side" = old ]; then olds+=("$out/old-$round/e2e.json");
    else news+=("$out/new-$round/e2e.json"); fi
  done
done
more=()
[ "${#olds[@]}" -gt 1 ] && more=(--old-runs "${olds[@]:1}")
"${driver[@]}" compare "${olds[0]}" "${news[@]}" "${more[@]}" \
  --tolerance "${GATE_TOLERANCE:-10}" --json "$out/gate.json"
