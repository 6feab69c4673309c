#!/usr/bin/env python3
"""gemmbench: gemm-service's benchmark driver, one program for every measurement.

Named scenarios, in the manner of cutlass_profiler. Each run writes one JSON
report per scenario into --out (logs under --out/logs/) and prints a short
table last; `tables` turns kept reports (bench/baselines/GPU/SCENARIO.json)
into the markdown tables of README.md and docs/*.md.

    gemmbench.py list
    gemmbench.py run --scenario all --out OUT              # on a GPU host
    gemmbench.py run --scenario e2e,tcp --cases s128-c64-x8,one4096 --out OUT
    gemmbench.py run --scenario e2e --server-flags='--cuda-blocking-sync=false' --out OUT
    gemmbench.py run --scenario soak --soak-s 600 --out OUT   # 10 minutes, 256 in flight
    gemmbench.py tables                                    # rewrite the marked regions
    gemmbench.py tables --check                            # fail if a region is stale
    gemmbench.py compare bench/baselines/h200/e2e.json OUT # gate: exit 1 if a case lost >10%
    gemmbench.py compare OLD NEW --cases one4096 --tolerance 5 --json RECORD.json
    gemmbench.py compare OLD RUN1 RUN2                     # each case by its best run

Binaries come from --bin-dir; by default from the bundle's bin/ when this
file sits in one (bazel build //:bundle), else from the repository's
bazel-bin/. Python 3 standard library only; charts need matplotlib.
"""

import argparse
import json
import os
import platform
import shlex
import shutil
import socket
import sys
import time

from gemmbench_compare import DEFAULT_TOLERANCE_PCT, command_compare
from gemmbench_e2e import E2E_CASES
from gemmbench_env import SCHEMA_VERSION, Environment, SkipScenario, commit_id, now_utc, repo_root
from gemmbench_scenarios import BATCHING_CASES, GPU_SUITES, SCENARIOS
from gemmbench_soak import SOAK_RSS_GROWTH_MAX_MB, SOAK_RSS_MAX_MB
from gemmbench_tables import command_tables


def command_list(_args):
    for name, (run, _) in SCENARIOS.items():
        print(f"{name:9} {run.__doc__}")
        cases = {"e2e": E2E_CASES, "batching": BATCHING_CASES}.get(name, [])
        for case in cases:
            flags = case.get("client", case.get("bench", []))
            print(f"          {case['name']:18} {' '.join(flags)}")
    return 0


def command_run(args):
    names = list(SCENARIOS) if args.scenario == "all" else args.scenario.split(",")
    for name in names:
        if name not in SCENARIOS:
            sys.exit(f"gemmbench: unknown scenario {name!r}; one of {', '.join(SCENARIOS)}, all")
    known = {c["name"] for c in E2E_CASES + BATCHING_CASES} | {"tcp1", "tcp4", "tcp8"} | set(GPU_SUITES)
    for case in args.cases:
        if case not in known:
            sys.exit(f"gemmbench: unknown case {case!r}; see `gemmbench.py list`")
    env = Environment(args)
    os.makedirs(env.out, exist_ok=True)
    base = {"schema_version": SCHEMA_VERSION, "host": {
        "name": socket.gethostname(), "cpus": os.cpu_count(), "os": platform.platform()},
        "gpu": env.gpus, "commit": commit_id(env), "backend": env.backend,
        "command": shlex.join([sys.argv[0]] + sys.argv[1:])}
    summary = []
    failed = False
    for name in names:
        run, summarize = SCENARIOS[name]
        print(f"gemmbench: {name} ...", file=sys.stderr, flush=True)
        start = time.monotonic()
        try:
            results = run(env)
        except SkipScenario as e:
            summary.append((name, [f"skipped: {e}"]))
            continue
        except (RuntimeError, OSError) as e:
            summary.append((name, [f"FAILED: {e}"]))
            failed = True
            continue
        report = dict(base, scenario=name, date=now_utc(),
                      seconds=round(time.monotonic() - start, 1), results=results)
        path = os.path.join(env.out, f"{name}.json")
        with open(path, "w") as f:
            json.dump(report, f, indent=1)
            f.write("\n")
        lines = summarize(results)
        failed |= has_failure(results)
        summary.append((name, [f"report: {path} ({report['seconds']} s)"] + lines))
    shutil.rmtree(env.work, ignore_errors=True)
    gpu = env.gpus[0]["name"] if env.gpus else "no GPU"
    print(f"\ngemmbench on {socket.gethostname()} ({gpu}, backend {env.backend}, commit {base['commit']})")
    for name, lines in summary:
        print(f"== {name}")
        for line in lines:
            print(f"   {line}")
    return 1 if failed else 0


def has_failure(results):
    """True when any part of a scenario's results says it failed: a verdict
    of "fail", or a program's non-zero exit code."""
    if isinstance(results, dict):
        if results.get("verdict") == "fail" or results.get("rc", 0) not in (0, None):
            return True
        return any(has_failure(v) for v in results.values())
    if isinstance(results, list):
        return any(has_failure(v) for v in results)
    return False


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(__doc__.splitlines()[1:]))
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the scenarios and their cases")
    run = sub.add_parser("run", help="run scenarios, one JSON report each")
    run.add_argument("--scenario", default="all",
                     help=f"comma-separated, from: {', '.join(SCENARIOS)}; or all (default)")
    run.add_argument("--out", default="gemmbench-out", help="reports and logs go here")
    run.add_argument("--bin-dir", help="the programs (default: the bundle's bin/, else bazel-bin)")
    run.add_argument("--backend", default="auto", choices=["auto", "cuda", "cpu"],
                     help="gemm-server's backend (auto: cuda where nvidia-smi sees a GPU)")
    run.add_argument("--cases", type=lambda s: s.split(","), default=[],
                     help="only these cases (names from `list`) of the scenarios that have cases")
    run.add_argument("--server-flags", type=shlex.split, default=[],
                     help="added to every gemm-server started (A/B runs)")
    run.add_argument("--client-flags", type=shlex.split, default=[],
                     help="added to every gemm-client load (A/B runs)")
    run.add_argument("--soak-s", type=float, default=60, help="measured seconds of the soak scenario")
    run.add_argument("--soak-concurrency", type=int, default=256,
                     help="jobs outstanding in the soak (closed loop; default 256)")
    run.add_argument("--soak-connections", type=int, default=4,
                     help="TCP connections of the soak's client (default 4)")
    run.add_argument("--soak-rss-max-mb", type=float, default=SOAK_RSS_MAX_MB,
                     help="the soak fails if the server's peak RSS passes this "
                          f"(default {SOAK_RSS_MAX_MB}; bench/gemmbench_soak.py says why)")
    run.add_argument("--soak-rss-growth-max-mb", type=float, default=SOAK_RSS_GROWTH_MAX_MB,
                     help="the soak fails if the server's RSS grows more than this over "
                          f"the second half of the run (default {SOAK_RSS_GROWTH_MAX_MB})")
    run.add_argument("--smoke", action="store_true",
                     help="tiny cases, seconds each: a test of the driver, not a measurement")
    tables = sub.add_parser("tables", help="rewrite the marked tables in README.md and docs/*.md")
    tables.add_argument("--root", default=repo_root(), help="the repository (default: this one)")
    tables.add_argument("--baselines", help="default ROOT/bench/baselines (GPU/SCENARIO.json)")
    tables.add_argument("--check", action="store_true", help="change nothing; exit 1 if a table is stale")
    tables.add_argument("--no-charts", action="store_true", help="skip the PNG charts")
    compare = sub.add_parser("compare", help="the regression gate: NEW's cases against OLD's",
                             description="Exit 0 when every case of OLD is in NEW, healthy, and "
                             "within the tolerance; 1 when not; 2 when a report cannot be used.")
    compare.add_argument("old", metavar="OLD", help="a scenario report (JSON), or a folder "
                         "holding e2e.json, such as bench/baselines/h200/e2e.json")
    compare.add_argument("new", metavar="NEW", nargs="+",
                         help="the same for the run to judge (a run's --out); several runs "
                              "of one code: each case judged by its best")
    compare.add_argument("--old-runs", nargs="+", metavar="OLD2", default=[],
                         help="more runs of OLD's code (a same-host A/B, bench/same_host_gate.sh): "
                              "OLD's cases by their best run too")
    compare.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE_PCT,
                         help="percent by which jobs/s may fall or p50 latency rise "
                              f"(default {DEFAULT_TOLERANCE_PCT:g})")
    compare.add_argument("--cases", type=lambda s: s.split(","), default=[],
                         help="only these of OLD's cases (comma-separated)")
    compare.add_argument("--json", metavar="PATH",
                         help="also write the comparison here (figures, verdicts, both reports' commits)")
    args = parser.parse_args()
    commands = {"list": command_list, "run": command_run, "tables": command_tables,
                "compare": command_compare}
    return commands[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
