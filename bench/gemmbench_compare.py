"""gemmbench_compare: the regression gate, one scenario report against another.

`gemmbench.py compare OLD NEW [NEW ...]` reads reports of a scenario whose
results.cases carry a load report (e2e, regions, batching), matches NEW's
cases to OLD's by name and fails when a case got slower by more than the
tolerance (jobs/s down, or p50 latency up) or NEW's run was unhealthy
(errors, a client's non-zero exit, server counts that disagree). OLD is
usually the kept report, bench/baselines/GPU/SCENARIO.json. Given several
NEW runs (of the same code), each case is judged by its best run (the
highest jobs/s, with that run's p50): a shared host's noise only slows a
run down, and one run of 8 jobs of 4096^3 spreads by 10% on the H200
host (bench/baselines/h200/ab/malloc-trim-idle). Every run's health counts.

Exit codes: 0 the gate passes, 1 it fails, 2 a report cannot be read or
compared (compare_reports raises CompareError; only command_compare prints).
"""

import json
import os
import shlex
import sys

from gemmbench_env import now_utc

DEFAULT_TOLERANCE_PCT = 10.0


class CompareError(Exception):
    """A report that cannot be read, or two that cannot be compared."""


def report_path(path, scenario="e2e"):
    """PATH itself, or PATH/SCENARIO.json when PATH is a folder (gemmbench run's --out)."""
    return os.path.join(path, f"{scenario}.json") if os.path.isdir(path) else path


def read_report(path):
    """The report at path, checked to hold results.cases; CompareError if not."""
    try:
        with open(path) as f:
            report = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CompareError(f"cannot read {path}: {e}") from e
    results = report.get("results") if isinstance(report, dict) else None
    cases = results.get("cases") if isinstance(results, dict) else None
    if not isinstance(cases, list) or not cases or not all(isinstance(c, dict) for c in cases):
        scenario = report.get("scenario", "?") if isinstance(report, dict) else "?"
        raise CompareError(f"{path}: no results.cases (scenario {scenario}); compare reads "
                           "the reports of scenarios with cases, such as e2e")
    return report


def read_pair(old_arg, new_arg):
    """(OLD's path, its report, NEW's path, its report). A folder stands for
    its e2e.json, or for the other side's scenario when that side is a file."""
    if os.path.isdir(old_arg) and not os.path.isdir(new_arg):
        new = read_report(new_arg)
        old_path = report_path(old_arg, new.get("scenario", "e2e"))
        return old_path, read_report(old_path), new_arg, new
    old_path = report_path(old_arg)
    old = read_report(old_path)
    new_path = report_path(new_arg, old.get("scenario", "e2e"))
    return old_path, old, new_path, read_report(new_path)


def read_runs(old_arg, new_args):
    """(OLD's path, its report, NEW's paths, their reports)."""
    if isinstance(new_args, str):
        new_args = [new_args]
    old_path, old, new_path, new = read_pair(old_arg, new_args[0])
    paths, reports = [new_path], [new]
    for arg in new_args[1:]:
        _, _, path, report = read_pair(old_path, arg)
        paths.append(path)
        reports.append(report)
    return old_path, old, paths, reports


def figures(case):
    """(jobs/s, p50 ms) of a case's load report, or None where it has neither
    (a failed run, or a case of another kind such as batching's single-4096)."""
    r = case.get("report")
    if not isinstance(r, dict):
        return None
    rate, p50 = r.get("requests_per_s"), (r.get("latency_ms") or {}).get("p50")
    if not isinstance(rate, (int, float)) or not isinstance(p50, (int, float)):
        return None
    return float(rate), float(p50)


def client_rc(case):
    """The load program's exit code: e2e and regions keep it in client.rc, batching in rc."""
    client = case.get("client")
    return client.get("rc") if isinstance(client, dict) else case.get("rc")


def health_problems(case):
    """What says a run of this case went wrong, whatever its speed."""
    problems = []
    rc = client_rc(case)
    if rc != 0:
        problems.append(f"client rc {rc}")
    if case.get("server_exit") not in (0, None):
        problems.append(f"server exit {case['server_exit']}")
    r = case.get("report")
    if not isinstance(r, dict):
        return problems + ["no report"]
    if r.get("errors"):
        problems.append(f"{r['errors']} errors")
    if r.get("verify_failures"):
        problems.append(f"{r['verify_failures']} wrong results")
    if r.get("server_counts_agree") is False:
        problems.append("server counts disagree")
    return problems


def change_pct(old, new):
    return None if old == 0 else 100.0 * (new - old) / old


def best_run(runs):
    """Of a case's NEW runs, the one with the highest jobs/s (the first when
    none has figures); None when there is none."""
    if not runs:
        return None
    measured = [r for r in runs if figures(r)]
    return max(measured, key=lambda r: figures(r)[0]) if measured else runs[0]


def compare_case(name, old_case, new_runs, tolerance_pct):
    """One case's figures and verdict ("ok", "WORSE", or "n/a" when OLD has no
    figures to hold NEW to: then only NEW's health counts). new_runs: the
    case in each NEW report that has it."""
    if isinstance(new_runs, dict):
        new_runs = [new_runs]
    new_runs = new_runs or []
    new_case = best_run(new_runs)
    old = figures(old_case)
    new = figures(new_case) if new_case else None
    entry = {"name": name, "old": None, "new": None, "change_pct": None, "reasons": [],
             "runs": len(new_runs)}
    if old:
        entry["old"] = {"jobs_per_s": old[0], "p50_ms": old[1]}
    if new:
        entry["new"] = {"jobs_per_s": new[0], "p50_ms": new[1]}
    if new_case is None:
        entry["reasons"].append("missing from NEW")
    for i, run in enumerate(new_runs):
        where = f" (run {i + 1})" if len(new_runs) > 1 else ""
        entry["reasons"] += [p + where for p in health_problems(run)]
    if old and new:
        rate, p50 = change_pct(old[0], new[0]), change_pct(old[1], new[1])
        entry["change_pct"] = {"jobs_per_s": rate, "p50_ms": p50}
        # A hair of slack so that exactly the tolerance passes despite rounding.
        limit = tolerance_pct + 1e-9
        if new[0] < old[0] and (rate is None or rate < -limit):
            entry["reasons"].append(f"jobs/s {rate:+.1f}% (more than {tolerance_pct:g}% lower)")
        if new[1] > old[1] and (p50 is None or p50 > limit):
            shown = "from 0" if p50 is None else f"{p50:+.1f}%"
            entry["reasons"].append(f"p50 {shown} (more than {tolerance_pct:g}% higher)")
    elif old and new_case is not None and isinstance(new_case.get("report"), dict):
        entry["reasons"].append("no jobs/s or p50 in NEW")  # (no report: said above)
    entry["verdict"] = "WORSE" if entry["reasons"] else ("ok" if old else "n/a")
    return entry


def provenance(report, path):
    """Where a report came from, for the comparison's record."""
    gpu = report.get("gpu") or []
    return {"path": path, "scenario": report.get("scenario"), "commit": report.get("commit"),
            "date": report.get("date"), "command": report.get("command"),
            "backend": report.get("backend"),
            "gpu": gpu[0].get("name") if gpu and isinstance(gpu[0], dict) else None}


def compare_reports(old, new, tolerance_pct=DEFAULT_TOLERANCE_PCT, cases=None, old_runs=()):
    """The comparison of two reports of one scenario (pure: prints nothing).

    new: a report, or a list of reports (runs of the same code; each case
    judged by its best run). cases: names of OLD's cases to compare (default
    all). old_runs: more runs of OLD's code (a same-host A/B), each of OLD's
    cases then held to its best run too. Raises CompareError when the
    scenarios differ, a named case is not in OLD, or no case of OLD has
    jobs/s and p50 figures."""
    news = new if isinstance(new, list) else [new]
    for n in news:
        if old.get("scenario") != n.get("scenario"):
            raise CompareError(f"the reports are of different scenarios: OLD "
                               f"{old.get('scenario')!r}, NEW {n.get('scenario')!r}")
    old_cases = {c.get("name"): c for c in old["results"]["cases"]}
    for extra in old_runs:
        if extra.get("scenario") != old.get("scenario"):
            raise CompareError(f"--old-runs: a report of scenario {extra.get('scenario')!r}, "
                               f"OLD is {old.get('scenario')!r}")
        for c in extra["results"]["cases"]:
            name = c.get("name")
            if name in old_cases:
                old_cases[name] = best_run([old_cases[name], c])
    new_cases = {}
    for n in news:
        for c in n["results"]["cases"]:
            new_cases.setdefault(c.get("name"), []).append(c)
    names = [c.get("name") for c in old["results"]["cases"]]
    if cases:
        unknown = [n for n in cases if n not in old_cases]
        if unknown:
            raise CompareError(f"no case {', '.join(unknown)} in OLD; it has {', '.join(map(str, names))}")
        names = [n for n in names if n in cases]
    if not any(figures(old_cases[n]) for n in names):
        raise CompareError(f"no case of OLD (scenario {old.get('scenario')}) has jobs/s and a p50 "
                           "latency to compare")
    entries = [compare_case(n, old_cases[n], new_cases.get(n), tolerance_pct) for n in names]
    worse = [e for e in entries if e["verdict"] == "WORSE"]
    return {
        "tolerance_pct": tolerance_pct,
        "cases": entries,
        "new_only": [n for n in new_cases if n not in old_cases],
        "compared": len(entries),
        "failed": len(worse),
        "verdict": "fail" if worse else "pass",
        "reasons": [f"{e['name']}: {r}" for e in worse for r in e["reasons"]],
    }


def cell(value, width, spec, suffix=""):
    """value formatted by spec, right-aligned in width; "-" where there is none."""
    return f"{'-' if value is None else format(value, spec) + suffix:>{width}}"


def format_comparison(comparison):
    """The printed table, one line per case, and the gate's verdict last."""
    lines = [f"{'case':20} {'old jobs/s':>11} {'new jobs/s':>11} {'change':>7}  "
             f"{'old p50 ms':>10} {'new p50 ms':>10} {'change':>7}  verdict"]
    for e in comparison["cases"]:
        old, new, change = e["old"] or {}, e["new"] or {}, e["change_pct"] or {}
        lines.append(
            f"{e['name']:20} {cell(old.get('jobs_per_s'), 11, '.1f')} "
            f"{cell(new.get('jobs_per_s'), 11, '.1f')} {cell(change.get('jobs_per_s'), 7, '+.1f', '%')}  "
            f"{cell(old.get('p50_ms'), 10, '.3f')} {cell(new.get('p50_ms'), 10, '.3f')} "
            f"{cell(change.get('p50_ms'), 7, '+.1f', '%')}  {e['verdict']}")
    if comparison["new_only"]:
        lines.append(f"(only in NEW, not compared: {', '.join(comparison['new_only'])})")
    if comparison["verdict"] == "pass":
        lines.append("gate: pass")
    else:
        lines.append(f"gate: FAIL ({comparison['failed']} of {comparison['compared']} cases)")
        lines += [f"  {reason}" for reason in comparison["reasons"]]
    return lines


def command_compare(args):
    """gemmbench.py compare OLD NEW: prints the table; 0 pass, 1 fail, 2 unusable input."""
    try:
        if args.tolerance < 0:
            raise CompareError(f"--tolerance {args.tolerance:g}: a percentage, 0 or more")
        old_path, old, new_paths, news = read_runs(args.old, args.new)
        old_runs = [read_report(report_path(p, old.get("scenario", "e2e")))
                    for p in getattr(args, "old_runs", None) or []]
        comparison = compare_reports(old, news, args.tolerance, args.cases, old_runs)
    except CompareError as e:
        print(f"gemmbench compare: {e}", file=sys.stderr)
        return 2
    print(f"OLD {old_path} (commit {old.get('commit')}, {old.get('date')})")
    for new_path, new in zip(new_paths, news):
        print(f"NEW {new_path} (commit {new.get('commit')}, {new.get('date')})")
    for path in getattr(args, "old_runs", None) or []:
        print(f"OLD {path} (another run of OLD's code)")
    if len(news) > 1 or getattr(args, "old_runs", None):
        print(f"each case judged by its best run on either side")
    print(f"tolerance {args.tolerance:g}%")
    for line in format_comparison(comparison):
        print(line)
    if args.json:
        # Not a scenario report (no schema_version), and not kept in the
        # tree: an A/B run keeps its notes in bench/baselines/GPU/ab/NAME/
        # (bench/baselines/RAW.md).
        record = dict(comparison, date=now_utc(),
                      command=shlex.join([sys.argv[0]] + sys.argv[1:]),
                      old=provenance(old, old_path),
                      new=[provenance(n, p) for n, p in zip(news, new_paths)])
        try:
            with open(args.json, "w") as f:
                json.dump(record, f, indent=1)
                f.write("\n")
        except OSError as e:
            print(f"gemmbench compare: cannot write {args.json}: {e}", file=sys.stderr)
            return 2
    return 0 if comparison["verdict"] == "pass" else 1
