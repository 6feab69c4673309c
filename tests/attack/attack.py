#!/usr/bin/python3
"""Hostile clients against gemm-server, and a driver that measures the damage.

Issue 12 ("one client cannot take the server down"): under each attack below,
alone and all together, the server's resident memory stays under a bound
stated from its flags (the in-flight budget plus a fixed overhead), it keeps
accepting connections, and a second client's verified load loses no job and
keeps its p99 within 2x of its unattacked p99; after the attack, memory comes
back to within a stated bound of its idle size.

The attacks speak HTTP/2 and gRPC themselves (h2wire.py: frames, HPACK,
protobuf), since a well-behaved library would not send what they send:

  budget-fill       GemmStream calls that each declare a huge job (params
                    only) until the jobs would hold the whole in-flight
                    budget; streams held open, expired jobs declared again
  partial-unary     Gemm calls announcing a max-size message and sending 15/16
                    of it, then holding
  big-unary-unread  large valid Gemm calls whose results are never read (tiny
                    HTTP/2 window, no WINDOW_UPDATE)
  open-jobs         one stream, very many 1x1x1 jobs opened and never ended
  unread-results    one stream, very many tiny whole jobs, results unread
  k0                jobs of M=N=big, K=0, beta=0: a few bytes asking for a
                    C of up to max-job-bytes (stream, plus unary calls)
  fd-flood          many plain TCP connections held open, then released
  rapid-reset       HEADERS immediately followed by RST_STREAM, as fast as
                    possible over 2 connections
  continuation      HEADERS without END_HEADERS, then endless CONTINUATION
  idle-conns        many connections that send the preface and SETTINGS,
                    then nothing (not even acknowledgements)
  bad-utf8          many small Gemm calls with invalid UTF-8 in params.kernel

Usage:
  attack.py run --server BIN --client BIN --attacks all --out report.json
                [--scale ci|full] [--check] [--set ATTACK.PARAM=VALUE ...]
  attack.py ATTACK --target 127.0.0.1:PORT [--scale ci|full] [--hold-s S]
  attack.py params            # every attack parameter, ci and full values

`run` starts a fresh gemm-server per scenario (baseline, each attack alone,
all together), runs `gemm-client load` against [::1] as the victim while the
attackers use 127.0.0.1, samples the server's VmRSS every 100 ms and writes a
JSON report. It exits non-zero on a missed target only with --check.
Python 3 standard library only.

The attacks and the driver's parts are in attacklib/: config (the attacks'
names and parameters), h2conn and context (the HTTP/2 connection and what
every attack shares), memory, jobs and connections (the attacks, by what
they attack), registry, procfs and server (the server process and what it
does), scenario (one scenario and its targets) and report.
"""

import argparse
import asyncio
import datetime
import json
import os
import shlex
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# bench/'s GPU description, so that a kept report reads like gemmbench's.
sys.path.insert(1, os.path.join(HERE, "..", "..", "bench"))
# pylint: disable=wrong-import-position
from gemmbench_env import query_gpus  # noqa: E402
from attacklib.config import (  # noqa: E402
    ATTACKS, GiB, MiB, PARAMS, SCALES, attack_params, mib, parse_set)
from attacklib.context import AttackContext, raw_info  # noqa: E402
from attacklib.registry import ATTACK_FUNCTIONS, run_attack  # noqa: E402
from attacklib.report import (  # noqa: E402
    binary_description, commit_of, host_description, table)
from attacklib.scenario import run_scenario  # noqa: E402
from attacklib.server import lower_own_priority, raise_own_nofile  # noqa: E402
# pylint: enable=wrong-import-position


# --- command line ---------------------------------------------------------

def add_scale_flags(p):
    p.add_argument("--scale", choices=["ci", "full"], default="ci",
                   help="attack sizes and driver timings (see `params`)")
    p.add_argument("--set", action="append", metavar="ATTACK.PARAM=VALUE",
                   help="override an attack parameter (repeatable)")


def main_run(args):
    scale = SCALES[args.scale]
    for k, v in scale.items():
        if getattr(args, k, None) is None:
            setattr(args, k, v)
    overrides = parse_set(args.set)
    attacks = ATTACKS if args.attacks == "all" else args.attacks.split(",")
    for a in attacks:
        if a not in ATTACK_FUNCTIONS:
            raise SystemExit("unknown attack %r; known: %s" %
                             (a, ", ".join(ATTACKS)))
    raise_own_nofile()
    lower_own_priority(args.attacker_nice)
    # The server's own connection caps (--max-client-connections 1024, at
    # most half of what the server can hold): fd-flood's server has 256
    # descriptors (192 for connections), so one address holds at most 96 and
    # the rest of its flood is refused; idle-conns' 500 connections are all
    # admitted.
    defaults = {"--shutdown-grace-s": "3", "--drain-delay-s": "0"}
    if args.max_inflight_bytes:
        defaults["--max-inflight-bytes"] = str(args.max_inflight_bytes)
        # The largest job a quarter of the budget, as the defaults are (2 of
        # 8 GiB), so that one client's share is a quarter too.
        defaults["--max-job-bytes"] = str(min(2 * GiB,
                                              args.max_inflight_bytes // 4))
    if args.grpc_memory_bytes:
        defaults["--grpc-memory-bytes"] = str(args.grpc_memory_bytes)
    extra = []
    for item in args.server_arg or []:
        extra += shlex.split(item)
    given = {a.split("=", 1)[0] for a in extra if a.startswith("--")}
    args.server_flags = [x for k, v in defaults.items() if k not in given
                         for x in (k, v)] + extra
    args.victim_arg = [x for item in args.victim_arg or []
                       for x in shlex.split(item)]
    args.rss_safety_bytes = args.rss_safety_mib * MiB
    if not args.rss_safety_bytes:
        args.rss_safety_bytes = int(host_description()["mem_total_mib"] *
                                    0.6 * MiB)
    args.workdir = args.workdir or tempfile.mkdtemp(prefix="gemm-attack-")
    os.makedirs(args.workdir, exist_ok=True)

    async def everything():
        say = (lambda *a: print(*a, file=sys.stderr, flush=True))
        say("baseline (no attack)...")
        args.rss_bound = None  # known once a server has said its budget
        baseline = await run_scenario("baseline", [], args, overrides, None)
        info = baseline["server"]["info"]
        # gRPC's buffers are bounded by its resource quota
        # (--grpc-memory-bytes; the server's default is 2 GiB).
        grpc_memory = args.grpc_memory_bytes or 2 * GiB
        args.rss_bound = (info["max_inflight_bytes"] + grpc_memory +
                          args.rss_overhead_mib * MiB)
        report = {
            # The header of bench/gemmbench.py's reports, so that a report
            # kept as bench/baselines/GPU/attack.json gets its table.
            "schema_version": 1,
            "scenario": "attack" if args.scale == "ci" else "attack-full",
            "backend": info.get("backend"),
            "gpu": query_gpus(),
            "tool": "tests/attack/attack.py",
            "date": datetime.datetime.now().astimezone().isoformat(
                timespec="seconds"),
            "commit": commit_of(args.commit),
            "host": host_description(),
            "server_binary": binary_description(args.server),
            "client_binary": binary_description(args.client),
            "scale": args.scale,
            "server_flags": args.server_flags,
            "settings": {k: getattr(args, k) for k in (
                "hold_s", "settle_s", "idle_s", "lead_s", "victim_warmup_s",
                "victim_rate", "victim_concurrency", "victim_shapes",
                "victim_unary_share", "victim_arg", "attacker_nice")},
            "bounds": {"rss_bound_mib": mib(args.rss_bound),
                       "rss_bound_rule": "max_inflight_bytes (%d MiB) + "
                       "grpc_memory_bytes (%d MiB) + --rss-overhead-mib %d" % (
                           mib(info["max_inflight_bytes"]), mib(grpc_memory),
                           args.rss_overhead_mib),
                       "rss_return_mib": args.rss_return_mib,
                       "p99_factor": args.p99_factor,
                       "log_bytes_per_bad_request":
                           args.log_bytes_per_request,
                       "rss_safety_mib": mib(args.rss_safety_bytes)},
            "attack_params": {a: attack_params(a, args.scale, overrides)
                              for a in attacks},
            "workdir": args.workdir,
        }
        report["baseline"] = baseline
        scenarios = [] if args.only_together else [[a] for a in attacks]
        if len(attacks) > 1 and not args.no_together:
            scenarios.append(list(attacks))
        report["scenarios"] = []
        for group in scenarios:
            name = group[0] if len(group) == 1 else "together"
            say("%s..." % name)
            s = await run_scenario(name, group, args, overrides,
                                   report["baseline"])
            report["scenarios"].append(s)
            say("  %s" % table({"baseline": report["baseline"],
                                "scenarios": [s]}).splitlines()[3])
            with open(args.out, "w") as f:
                json.dump(report, f, indent=1)
        missed = {s["scenario"]: [k for k, t in s["targets"].items()
                                  if not t["pass"]]
                  for s in report["scenarios"]}
        report["summary"] = {
            "targets": sum(len(s["targets"]) for s in report["scenarios"]),
            "missed": sum(len(v) for v in missed.values()),
            "missed_by_scenario": {k: v for k, v in missed.items() if v}}
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
        return report

    report = asyncio.run(everything())
    print(table(report))
    print("\nreport: %s (%d of %d targets missed)" % (
        args.out, report["summary"]["missed"], report["summary"]["targets"]))
    return 1 if args.check and report["summary"]["missed"] else 0


def main_attack(args):
    raise_own_nofile()
    host, _, port = args.target.rpartition(":")
    host, port = host.strip("[]"), int(port)
    overrides = parse_set(args.set)
    params = attack_params(args.attack, args.scale, overrides)
    hold = args.hold_s if args.hold_s is not None else \
        SCALES[args.scale]["hold_s"]

    async def go():
        got = await raw_info(host, port)
        if not got["ok"]:
            raise SystemExit("Info failed: %s" % got.get("error"))
        info = got["info"]
        stop = asyncio.Event()
        ctx = AttackContext(host, port, info, params, stop,
                            info["max_inflight_bytes"] +
                            args.rss_overhead_mib * MiB)
        task = asyncio.ensure_future(run_attack(args.attack, ctx))
        try:
            await asyncio.wait_for(asyncio.shield(task), hold)
        except asyncio.TimeoutError:
            pass
        stop.set()
        return await task
    print(json.dumps(asyncio.run(go()), indent=1))
    return 0


def main_params(_):
    for attack, params in PARAMS.items():
        print(attack)
        for k, (ci, full, text) in params.items():
            print("  %-15s ci %-8s full %-8s %s" % (k, ci, full, text))
    print("\ndriver (run) settings per scale:")
    for k in SCALES["ci"]:
        print("  --%-20s ci %-10s full %s" % (k.replace("_", "-"),
                                              SCALES["ci"][k],
                                              SCALES["full"][k]))
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="start servers, attack, measure, report")
    run.add_argument("--server", required=True, help="gemm-server binary")
    run.add_argument("--client", required=True, help="gemm-client binary")
    run.add_argument("--attacks", default="all",
                     help="comma-separated attacks, or all")
    run.add_argument("--out", default="attack-report.json")
    add_scale_flags(run)
    run.add_argument("--commit", help="commit the binaries were built from "
                     "(default: git rev-parse HEAD here)")
    run.add_argument("--server-arg", action="append", metavar="FLAGS",
                     help="extra gemm-server flags (repeatable, shell words)")
    run.add_argument("--victim-arg", action="append", metavar="FLAGS",
                     help="extra gemm-client load flags")
    run.add_argument("--max-inflight-bytes", type=int,
                     help="the server's budget (ci 256 MiB; full: the "
                     "server's default)")
    run.add_argument("--grpc-memory-bytes", type=int,
                     help="the server's --grpc-memory-bytes (ci: 256 MiB; "
                     "full: the server's default, 2 GiB)")
    run.add_argument("--rss-overhead-mib", type=int, default=512,
                     help="rss_bound = max_inflight_bytes + "
                     "grpc_memory_bytes + this")
    run.add_argument("--rss-return-mib", type=int, default=128,
                     help="after the attack RSS must be within idle + this")
    run.add_argument("--p99-factor", type=float, default=2.0)
    run.add_argument("--log-bytes-per-request", type=float, default=1.0,
                     help="bad-utf8: log bytes per bad request allowed")
    run.add_argument("--rss-safety-mib", type=int,
                     help="stop an attack when the server's RSS passes this, "
                     "to protect the machine (0: 60%% of its memory)")
    for k in ("hold_s", "settle_s", "idle_s", "lead_s", "victim_warmup_s",
              "victim_rate"):
        run.add_argument("--" + k.replace("_", "-"), type=float)
    run.add_argument("--victim-concurrency", type=int, default=32,
                     help="cap on the victim's jobs outstanding")
    run.add_argument("--victim-shapes", default="64x64x64:0.9,256x256x256:0.1")
    run.add_argument("--victim-unary-share", type=float, default=0.25)
    run.add_argument("--attacker-nice", type=int, default=0,
                     help="lower the attacks' CPU priority by this much "
                     "(gemm-server and the victim keep theirs): on a small "
                     "host, what the victim then loses is the server's "
                     "doing, not the attacker's own CPU")
    run.add_argument("--no-together", action="store_true",
                     help="skip the all-attacks-at-once scenario")
    run.add_argument("--only-together", action="store_true")
    run.add_argument("--dump-stacks", action="store_true",
                     help="halfway through each attack, write the server's "
                     "thread stacks (gdb, which pauses the server meanwhile) "
                     "to WORKDIR/SCENARIO.stacks.txt")
    run.add_argument("--workdir", help="server logs, victim reports "
                     "(default: a new temporary folder)")
    run.add_argument("--check", action="store_true",
                     help="exit 1 when a target is missed")
    run.set_defaults(func=main_run)
    sub.add_parser("params", help="list attack parameters").set_defaults(
        func=main_params)
    for name in ATTACKS:
        p = sub.add_parser(name, help="run this attack against a server")
        p.add_argument("--target", required=True, help="HOST:PORT")
        p.add_argument("--hold-s", type=float)
        p.add_argument("--rss-overhead-mib", type=int, default=512)
        add_scale_flags(p)
        p.set_defaults(func=main_attack, attack=name)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
