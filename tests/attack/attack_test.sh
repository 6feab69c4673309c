#!/bin/bash
# The attack harness in the suite: its encoders' unit tests, then a short run
# of three attacks against the real gemm-server, checking what does not
# depend on the machine's speed: the server survives, accepts connections
# during and after each attack, and the second client loses no job; and
# under partial-unary, that the server took no more of the unfinished
# messages than one client's reads and its connections' windows allow.
#
# Usage: attack_test.sh GEMM_SERVER GEMM_CLIENT
set -euo pipefail
here=$(dirname "$0")
python3 "$here/attack_selftest.py"
out="${TEST_TMPDIR:-$(mktemp -d)}/attack.json"
python3 "$here/attack.py" run --server "$1" --client "$2" \
    --attacks fd-flood,open-jobs,partial-unary --no-together --commit test \
    --hold-s 2 --settle-s 1 --idle-s 0.5 --victim-rate 50 \
    --set open-jobs.count=5000 --out "$out" >/dev/null
python3 - "$out" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
scenarios = {s["scenario"]: s for s in report["scenarios"]}
assert set(scenarios) == {"fd-flood", "open-jobs", "partial-unary"}, \
    list(scenarios)
for name, s in scenarios.items():
    t = s["targets"]
    for target in ("server_survives", "accepts_connections_during",
                   "accepts_connections_after", "victim_loses_no_job"):
        assert t[target]["pass"], (name, target, t[target])
    assert s["victim"]["ok"] > 0, (name, s["victim"])
# gemm-server reads one client's unary messages a few at a time (one at a
# time here: a quarter of the 256 MiB quota in 64 MiB messages); its other
# calls wait unread, each connection's together holding about one HTTP/2
# connection window (at most 16 MiB with BDP probing, the default). Without
# the gate, gRPC read every message it was sent (440 MB of 1.3 GB on the
# 2-core machine), and the quota then cancelled streams at random.
s = scenarios["partial-unary"]
attack = s["attack"]["partial-unary"]
message = s["server"]["info"]["max_message_bytes"]
bound = 1 * message + attack["connections"] * (16 << 20)
assert attack["bytes_sent"] <= bound, (attack["bytes_sent"], bound, attack)
print("attack harness: fd-flood, open-jobs and partial-unary pass their "
      "fixed targets")
PY
