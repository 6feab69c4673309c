"""gemmbench_tables_load: the markdown tables of the service under load: the
end-to-end cases, TCP, TLS, BLAS, the soak and the attack harness's
reports, each from its scenario's kept report (gemmbench_tables.TABLES).
"""

import re

from gemmbench_tables_common import num, provenance


def e2e_figures(case):
    r = case["report"]
    return r, r["latency_ms"], (r["mb_per_s_in"] + r["mb_per_s_out"]) / 1e3


def table_e2e(report, path):
    lines = ["| case | client flags | jobs/s | p50 / p99 ms | GB/s in+out | server CPU / job | "
             "server peak RSS | errors |", "|---|---|---:|---|---:|---:|---:|---:|"]
    for c in report["results"]["cases"]:
        if not c["report"]:
            continue
        r, lat, gbs = e2e_figures(c)
        flags = re.sub(r"--(duration-s|warmup-s|count) \S+ ?", "", " ".join(c["client_flags"])).strip()
        lines.append(f"| {c['name']} | `{flags}` | {r['requests_per_s']:,.1f} | "
                     f"{lat['p50']:.2f} / {lat['p99']:.2f} | {gbs:.1f} | "
                     f"{c['server']['cpu_ms_per_job']:.3g} ms | {c['server']['rss_peak_mb']:,} MB | {r['errors']} |")
    return lines + ["", provenance(report, path)]


def table_e2e_breakdown(report, path):
    lines = ["| case | latency mean | server total | queued | h2d | compute | d2h | mean batch | "
             "network + client |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for c in report["results"]["cases"]:
        if not c["report"]:
            continue
        r = c["report"]
        s = r["server_ms"]
        mean = r["latency_ms"]["mean"]
        lines.append(f"| {c['name']} | {mean:.2f} | {s['total']['mean']:.3f} | {s['queued']['mean']:.3f} | "
                     f"{s['h2d']['mean']:.3f} | {s['compute']['mean']:.3f} | {s['d2h']['mean']:.3f} | "
                     f"{s['mean_batch_size']:.1f} | {mean - s['total']['mean']:.2f} |")
    return lines + ["", "Milliseconds, means over the measured jobs; the server's figures are the "
                        "jobs' own `Timing`. " + provenance(report, path)]


def tcp_rate(tcp_report, connections):
    for c in (tcp_report or {}).get("results", {}).get("cases", []):
        if c.get("report", {}).get("connections") == connections:
            return c["report"]["aggregate_bytes_per_s"] / 1e9
    return None


def table_e2e_targets(report, path, tcp_report):
    cases = {c["name"]: c for c in report["results"]["cases"] if c["report"]}
    lines = ["| workload | gemm-server | target |", "|---|---|---|"]

    def row(workload, name, figure, target):
        if name in cases:
            lines.append(f"| {workload} | {figure(*e2e_figures(cases[name]))} | {target} |")

    row("128^3, 64 in flight, 8 connections", "s128-c64-x8",
        lambda r, lat, _: f"**{r['requests_per_s']:,.0f} jobs/s, p99 {lat['p99']:.1f} ms**",
        "50,000 jobs/s, p99 <= 5 ms")
    row("1024^3, 16 in flight, 4 connections", "m1024-c16-x4",
        lambda r, lat, _: f"**{r['requests_per_s']:,.0f} jobs/s**, p99 {lat['p99']:.1f} ms", "450 jobs/s")
    row("one 4096^3 job alone, 1 connection", "one4096",
        lambda r, lat, _: f"**{lat['p50']:.1f} ms** p50, {lat['p99']:.1f} ms p99", "80 ms")
    row("one 4096^3 job alone, `--split 4 --connections 4`", "one4096-x4-split4",
        lambda r, lat, _: f"**{lat['p50']:.1f} ms** p50, {lat['p99']:.1f} ms p99", "80 ms")
    tcp4 = tcp_rate(tcp_report, 4)
    row("4096^3, 4 in flight, 4 connections", "four4096-x4",
        lambda r, lat, gbs: f"**{r['requests_per_s']:.1f} jobs/s, {gbs:.1f} GB/s**" +
        (f" = {gbs / tcp4:.2f} of 4 TCP connections ({tcp4:.1f} GB/s)" if tcp4 else ""),
        "0.8 of 4 TCP connections")
    return lines + ["", provenance(report, path)]


def table_tcp(report, path):
    lines = ["| connections | GB/s (aggregate) | GB/s per connection |", "|---:|---:|---|"]
    for c in report["results"]["cases"]:
        r = c.get("report")
        if r:
            per = ", ".join(f"{x / 1e9:.1f}" for x in r["per_connection_bytes_per_s"])
            lines.append(f"| {r['connections']} | {r['aggregate_bytes_per_s'] / 1e9:.2f} | {per} |")
    return lines + ["", provenance(report, path)]


def table_tls(report, path):
    """Each case in plaintext and over TLS: both runs' figures, and the ratio of the means."""
    runs = report["results"]["runs"]
    lines = ["| case | security | jobs/s (runs) | p50 / p99 ms (runs) | GB/s in+out | "
             "server CPU / job | TLS / plaintext jobs/s |", "|---|---|---|---|---|---|---:|"]
    cases = list(dict.fromkeys(r["case"] for r in runs))
    for case in cases:
        mean = {}
        for security in ("plaintext", "tls"):
            mine = [r for r in runs if r["case"] == case and r["security"] == security and r["report"]]
            if not mine:
                continue
            mean[security] = sum(r["report"]["requests_per_s"] for r in mine) / len(mine)
            ratio = (f"{mean['tls'] / mean['plaintext']:.2f}"
                     if security == "tls" and "plaintext" in mean else "")
            lines.append(
                f"| {case} | {security} | "
                + " / ".join(f"{r['report']['requests_per_s']:,.0f}" for r in mine) + " | "
                + " / ".join(f"{r['report']['latency_ms']['p50']:.2f}, {r['report']['latency_ms']['p99']:.2f}"
                             for r in mine) + " | "
                + " / ".join(f"{e2e_figures(r)[2]:.1f}" for r in mine) + " | "
                + " / ".join(f"{r['server']['cpu_ms_per_job']:.3g} ms" for r in mine)
                + f" | {ratio} |")
    return lines + ["", provenance(report, path)]


def table_blas(report, path):
    """numpy float32 matmul: the host's BLAS against the drop-in and the service."""
    r = report["results"]
    lines = ["| n (n x n x n) | numpy with | median ms | TFLOP/s | rel. error (64 rows vs float64) | "
             "jobs the server computed |", "|---:|---|---:|---:|---:|---:|"]
    for run in r["runs"]:
        if run["report"] is None:
            lines.append(f"| {run['n']} | {run['way']} | failed | | |")
            continue
        times = run["report"]["ms"]
        ms = times[len(times) // 2]
        lines.append(f"| {run['n']} | {run['way']} | {ms:,.2f} | {2 * run['n'] ** 3 / ms / 1e9:.2f} | "
                     f"{run['report']['rel_error_first_64_rows']:.1e} | {run['server_jobs']} |")
    return lines + ["", f"Host BLAS: numpy's own, on {r['cpus']} cores. " + provenance(report, path)]


def table_soak(report, path):
    res = report["results"]
    r = res["report"]
    rss = res["rss_mb"]
    bound = res.get("bounds", {}).get("rss_growth_max_mb")
    verified = f"{r['verified']:,}"
    if "verified_fraction" in res:
        verified += f" = {100 * res['verified_fraction']:.0f}%"
    agree = res.get("server_counts_agree")
    lines = ["| in flight | measured | jobs | jobs/s | verified, warm-up too (wrong) | errors | lost | server counts | "
             "server RSS start -> end (peak) | second half (bound) | verdict |",
             "|---:|---:|---:|---:|---|---:|---:|---|---|---|---|",
             f"| {r['concurrency']} | {res['seconds']:g} s | {r['count']:,} | {r['requests_per_s']:,.0f} | "
             f"{verified} ({r['verify_failures']}) | {r['errors']} | {num(res.get('lost'))} | "
             f"{'agree' if agree else 'disagree'} | "
             f"{rss[0][1]:,.0f} -> {rss[-1][1]:,.0f} MB ({res['rss_peak_mb']:,.0f}) | "
             f"{res['rss_growth_second_half_mb']:+,.0f} MB"
             f"{f' ({bound:,.0f})' if bound is not None else ''} | {res['verdict']} |", ""]
    calls = ", ".join(f"{n:,} {call}" for call, n in r.get("sent_by_call", {}).items() if n)
    lines.append(f"Shapes `{r['shapes']}` over {r['connections']} connections"
                 + (f"; jobs sent by call: {calls}" if calls else "") + ". " + provenance(report, path))
    return lines


def table_attack(report, path):
    """tests/attack/attack.py's report: each attack against its targets."""
    lines = ["| attack | server peak MiB (bound) | after / idle MiB | new connections during, after | "
             "victim jobs ok / failed / lost | victim p99 ms (x unattacked) | targets missed |",
             "|---|---:|---:|---|---:|---:|---|"]
    for s in [report["baseline"]] + report["scenarios"]:
        server, victim, t = s["server"], s["victim"], s["targets"]
        yes = lambda probe: "yes" if (probe or {}).get("info_from_ipv6", {}).get("ok") else "**no**"
        p99 = victim["latency_ms"]["p99"]
        ratio = t.get("victim_p99_within_2x", {})
        factor = (f" ({p99 / (ratio['bound_ms'] / report['bounds']['p99_factor']):.1f})"
                  if ratio.get("bound_ms") else "")
        missed = [k for k, v in t.items() if not v.get("pass", True)]
        peak = server["peak_rss_mib"]
        bound = t.get("rss_peak_within_bound", {}).get("bound_mib")
        lines.append(
            f"| {s['scenario']} | {peak:,.0f}{f' ({bound:,.0f})' if bound else ''} | "
            f"{server['rss_after_mib']:,.0f} / {server['idle_rss_mib']:,.0f} | "
            f"{yes(s.get('probe_during'))}, {yes(s.get('probe_after'))} | "
            f"{victim['ok']:,} / {victim['failed']:,} / {victim.get('unanswered', 0):,} | "
            f"{p99:,.1f}{factor} | {', '.join(missed) if missed else '-'} |")
    lines += ["", f"Bound: {report['bounds']['rss_bound_rule']}; server flags "
              f"`{' '.join(a for a in report['server_flags'])}`; "
              f"{report['summary']['missed']} of {report['summary']['targets']} targets missed. "
              + provenance(report, path)]
    return lines
