#!/usr/bin/env bash
# gemmbench.py against the real gemm-server and gemm-client on the CPU
# backend: the e2e, soak, abft and regions scenarios with their tiny --smoke cases write
# reports that `tables` can render and `compare` can gate, a soak with a
# memory bound too tight fails, and the tables in README.md and docs/ are the ones the kept
# baselines give (tables --check).
#
#   gemmbench_test.sh GEMMBENCH GEMM_SERVER GEMM_CLIENT
set -euo pipefail
gemmbench=$1 server=$2 client=$3
tmp=${TEST_TMPDIR:-$(mktemp -d)}
bin=$tmp/bin
mkdir -p "$bin"
ln -sf "$PWD/$server" "$bin/gemm-server"
ln -sf "$PWD/$client" "$bin/gemm-client"

python3 "$gemmbench" run --scenario e2e,soak,abft,regions --smoke --backend cpu --bin-dir "$bin" \
  --out "$tmp/out" | tee "$tmp/run.txt"
python3 - "$tmp/out" <<'PY'
import json, sys
e2e = json.load(open(f"{sys.argv[1]}/e2e.json"))
assert e2e["scenario"] == "e2e" and e2e["schema_version"] == 1 and e2e["backend"] == "cpu", e2e
for key in ("date", "host", "gpu", "commit", "command"):
    assert key in e2e, key
(case,) = e2e["results"]["cases"]
r = case["report"]
assert case["client"]["rc"] == 0 and case["server_exit"] == 0, case
assert r["errors"] == 0 and r["verify_failures"] == 0 and r["verified"] > 0, r
assert r["server_side_jobs"] == r["warmup_jobs"] + r["count"], r
soak = json.load(open(f"{sys.argv[1]}/soak.json"))["results"]
assert soak["verdict"] == "pass", soak["checks"]
assert soak["failed_checks"] == [] and len(soak["checks"]) == 7, soak["checks"]
assert len(soak["rss_mb"]) >= 2
assert soak["verified_fraction"] == 1.0 and soak["lost"] == 0 and soak["server_counts_agree"]
calls = soak["report"]["sent_by_call"]
assert calls["stream"] > 0 and calls["unary"] + calls["own_stream"] > 0, calls
assert "20011x14x41" in soak["report"]["count_by_shape"], soak["report"]["count_by_shape"]
abft = json.load(open(f"{sys.argv[1]}/abft.json"))["results"]
for c in abft["cost"]:
    r = c["report"]
    assert r["errors"] == 0 and (r["checked"] == r["count"]) == (c["check"] == "abft"), c
(s,) = abft["soak"]
r = s["report"]
assert r["checked"] == r["count"] == 200 and r["check_mismatches"] == 0, r
assert r["server_check_mismatches"] == 0 and r["verify_failures"] == 0 and r["verified"] > 0, r
regions = json.load(open(f"{sys.argv[1]}/regions.json"))["results"]
assert [c["name"] for c in regions["cases"]] == ["smoke-socket", "smoke-shm"], regions["cases"]
for c in regions["cases"]:
    r = c["report"]
    assert c["client"]["rc"] == 0 and r["errors"] == 0, c
    assert r["verify_failures"] == 0 and r["verified"] > 0 and r["count"] == 200, r
PY

# compare: a fresh e2e report passes the gate against itself, and the kept
# H200 baseline's cases are all missing from the smoke run.
python3 "$gemmbench" compare "$tmp/out" "$tmp/out/e2e.json" --json "$tmp/compare.json"
grep -q '"verdict": "pass"' "$tmp/compare.json"
rc=0
python3 "$gemmbench" compare bench/baselines/h200/e2e.json "$tmp/out" >"$tmp/compare.txt" || rc=$?
if [[ $rc != 1 ]]; then
  echo "compare exited $rc, not 1, on a run without the baseline's cases" >&2
  exit 1
fi
grep -q "one4096: missing from NEW" "$tmp/compare.txt"

# A memory bound the server cannot keep fails the soak, and gemmbench with
# it, the check named.
if python3 "$gemmbench" run --scenario soak --smoke --backend cpu --bin-dir "$bin" \
  --soak-rss-max-mb 1 --out "$tmp/tight" >"$tmp/tight.txt"; then
  echo "gemmbench passed a soak with a 1 MB bound" >&2
  exit 1
fi
grep -q "FAIL rss_max" "$tmp/tight.txt"
python3 - "$tmp/tight" <<'PY'
import json, sys
soak = json.load(open(f"{sys.argv[1]}/soak.json"))["results"]
assert soak["verdict"] == "fail" and soak["failed_checks"] == ["rss_max"], soak["checks"]
PY

# The same-host gate: two "bundles" (here both this build) in turn, twice,
# each case by its best run on either side (a wide tolerance: two runs of
# one build on two shared cores are not a measurement).
for side in old new; do
  mkdir -p "$tmp/$side/bin"
  ln -sf "$PWD/$server" "$tmp/$side/bin/gemm-server"
  ln -sf "$PWD/$client" "$tmp/$side/bin/gemm-client"
  for f in "$(dirname "$gemmbench")"/*.py; do ln -sf "$PWD/$f" "$tmp/$side/bin/"; done
done
GATE_TOLERANCE=1000 "$(dirname "$gemmbench")/same_host_gate.sh" "$tmp/old" "$tmp/new" "$tmp/gate" 2 -- \
  --smoke --backend cpu | tee "$tmp/gate.txt"
grep -q "each case judged by its best run on either side" "$tmp/gate.txt"
python3 - "$tmp/gate/gate.json" <<'PY'
import json, sys
gate = json.load(open(sys.argv[1]))
assert gate["compared"] == 1 and len(gate["new"]) == 2, gate
assert gate["cases"][0]["runs"] == 2, gate["cases"]
PY

# tables: the committed documents match the kept baselines ...
python3 "$gemmbench" tables --check --root .
# ... and a fresh report renders into a marked region of a copy.
root=$tmp/root
mkdir -p "$root/docs" "$root/bench/baselines/cpu"
echo '# copy' >"$root/README.md"
cp "$tmp/out/e2e.json" "$tmp/out/soak.json" "$root/bench/baselines/cpu/"
printf '# t\n<!-- gemmbench:cpu/e2e:begin -->\nstale\n<!-- gemmbench:cpu/e2e:end -->\n<!-- gemmbench:cpu/soak:begin -->\n<!-- gemmbench:cpu/soak:end -->\n' \
  >"$root/docs/t.md"
python3 "$gemmbench" tables --root "$root" --no-charts
grep -q '^| smoke | `--shapes 64x64x64' "$root/docs/t.md"
grep -q 'cpu backend' "$root/docs/t.md"
! grep -q stale "$root/docs/t.md"
python3 "$gemmbench" tables --check --root "$root"
echo PASS
