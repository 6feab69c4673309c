"""gemmbench_tables: kept reports -> the markdown tables of README.md and docs/.

A document marks a generated table with
<!-- gemmbench:GPU/TABLE:begin --> and <!-- gemmbench:GPU/TABLE:end -->;
command_tables rewrites what lies between from bench/baselines/GPU/SCENARIO.json
(TABLES names the tables and their scenarios), and draws the kernels chart.
"""

import glob
import json
import os
import re
import sys

from gemmbench_env import SCHEMA_VERSION, repo_root

def load_reports(baselines, root):
    """{(gpu, scenario): (report, path from root)} from baselines/GPU/SCENARIO.json."""
    reports = {}
    for path in sorted(glob.glob(os.path.join(baselines, "*", "*.json"))):
        gpu = os.path.basename(os.path.dirname(path))
        with open(path) as f:
            report = json.load(f)
        if report.get("schema_version") != SCHEMA_VERSION:
            sys.exit(f"gemmbench: {path}: schema_version {report.get('schema_version')}, "
                     f"this driver reads {SCHEMA_VERSION}")
        reports[(gpu, report["scenario"])] = (report, os.path.relpath(path, root))
    return reports


def num(value, spec=",.0f"):
    return "-" if value is None else format(value, spec)


def provenance(report, path):
    gpu = report["gpu"][0] if report.get("gpu") else None
    where = (f"{len(report['gpu'])} x {gpu['name']}, driver {gpu['driver']}" if gpu
             else f"{report['backend']} backend")
    cores = f", {report['host']['cpus']} host cores" if report["host"].get("cpus") else ""
    link = os.path.relpath(os.path.join(LINKS["root"], path), LINKS["doc_dir"])
    return (f"*{where}{cores}; {report['date'][:10]}, commit {report['commit']}; "
            f"report [`{path}`]({link})*")


# The repository and the folder of the document being rewritten: links in a
# document are relative to its folder.
LINKS = {"root": repo_root(), "doc_dir": repo_root()}


# The chapter's names for each version's idea, then the road past v5.
KEY_CHANGE = {
    "cublas": "baseline", "v0": "naive (threadIdx.x on rows)", "v1": "coalescing",
    "v2": "shared-memory tiling, 32x32", "v3": "1-D register tiling, 64x64, BK 8, TM 8",
    "v4": "2-D register tiling, 128x128, BK 8, 8x8", "v5": "vectorized (A^T in shared memory, float4)",
    "v6": "warp tiling (64x32 warp tiles, 4x4 per thread)",
    "v7": "double buffering (two shared-memory stages, next slice prefetched)",
    "v7-64x64": "v7 with 64x64 block tiles (4 warps): more blocks for mid-sized shapes",
    "v8": "split-K (K ranges in blocks of their own, added into C)",
    "v9": "3xTF32 on Tensor Cores (mma.sync; float32-accurate, fp32-tensor)",
    "v10": "cp.async pipeline (3 stages, K slices of 16, padded rows)",
    "v10-64x64": "v10 with 64x64 block tiles (4 warps, 4 stages)",
    "v11": "split-K on v10's pipeline, tile by shape, deterministic sum",
    "v12": "3xTF32 on wgmma (Hopper; operands split once into a K-major workspace; fp32-tensor)",
}


def table_kernels(report, path, shape="4096x4096x4096"):
    rows = {(f"{r['m']}x{r['n']}x{r['k']}", r["kernel"]): r for r in report["results"]["rows"]
            if not (r.get("trans_a") or r.get("trans_b"))}
    lines = ["| version | key change | time (ms) | TFLOP/s | % of cuBLAS |", "|---|---|---:|---:|---:|"]
    for kernel in KEY_CHANGE:
        r = rows.get((shape, kernel))
        if r and r["status"] == "ok":
            lines.append(f"| {'cuBLAS' if kernel == 'cublas' else kernel} | {KEY_CHANGE[kernel]} | "
                         f"{r['median_ms']:.3f} | {r['tflops']:.2f} | {r['pct_of_cublas']:.1f} |")
    return lines + ["", provenance(report, path)]


def table_kernels_by_shape(report, path):
    results = [r for r in report["results"]["rows"] if not (r.get("trans_a") or r.get("trans_b"))]
    shapes = list(dict.fromkeys(f"{r['m']}x{r['n']}x{r['k']}" for r in results))
    label = lambda s: f"{s.split('x')[0]}^3" if len(set(s.split("x"))) == 1 else s
    by = {(f"{r['m']}x{r['n']}x{r['k']}", r["kernel"]): r for r in results}
    lines = ["| version | " + " | ".join(label(s) for s in shapes) + " |",
             "|---|" + "---:|" * len(shapes)]
    for kernel in KEY_CHANGE:
        if not any(k == kernel for _, k in by):
            continue
        cells = []
        for s in shapes:
            r = by.get((s, kernel))
            cells.append("-" if r is None else (f"{r['tflops']:.2f} ({r['median_ms']:.3f} ms)"
                                                if r["status"] == "ok" else r["status"]))
        lines.append(f"| {'cuBLAS' if kernel == 'cublas' else kernel} | " + " | ".join(cells) + " |")
    return lines + ["", "TFLOP/s (median time). " + provenance(report, path)]


def table_dispatch(report, path):
    r = report["results"]
    # Reports before the candidates were listed timed v5 and cuBLAS.
    candidates = r.get("candidates", ["v5", "cublas"])
    times = lambda s: s.get("times_ms") or {"v5": s["v5_ms"], "cublas": s["cublas_ms"]}
    label = lambda name: "cuBLAS" if name == "cublas" else name
    lines = ["| M x N x K | " + " | ".join(f"{label(c)} (ms)" for c in candidates)
             + " | auto picks | best | auto / best |",
             "|---|" + "---:|" * len(candidates) + "---|---|---:|"]
    for s in r["shapes"]:
        t = times(s)
        lines.append(f"| {s['m']}x{s['n']}x{s['k']} | "
                     + " | ".join(f"{t[c]:.4f}" for c in candidates)
                     + f" | {s['auto']} | {s['best']} | {s['auto_over_best']:.3f} |")
    own = r.get("own_kernel_chosen")
    chosen = (f"auto sends {own} of {len(r['shapes'])} shapes to the project's own kernel; "
              if own is not None else "")
    return lines + ["", f"Worst auto/best {r['worst_auto_over_best']:.3f}; {chosen}table of "
                        f"{r['table_shapes']} shapes. " + provenance(report, path)]


def table_batching(report, path):
    lines = ["| case | server flags | mean batch | kernel time / batch | GPU-side jobs/s | "
             "end-to-end req/s | p50 / p99 ms |", "|---|---|---:|---:|---:|---:|---|"]
    for c in report["results"]["cases"]:
        r = c.get("report")
        if not r or r.get("mode") != "batching":
            continue
        flags, skip = [], False
        for f in c["server_flags"]:
            if skip or f in ("--listen", "--backend", "--dispatch-cache", "--port-file"):
                skip = not skip
                continue
            flags.append(f)
        lines.append(f"| {c['name']} | `{' '.join(flags)}` | {r['mean_batch_size']:.1f} | "
                     f"{1e3 * r['mean_compute_ms']:.1f} us | {r['gpu_jobs_per_s']:,.0f} | "
                     f"{r['requests_per_s']:,.0f} | {r['latency_ms']['p50']:.1f} / {r['latency_ms']['p99']:.1f} |")
    return lines + ["", provenance(report, path)]


def table_single(report, path):
    case = next(c for c in report["results"]["cases"] if c["name"] == "single-4096")
    lines = ["| run | client wall (ms) | server | queue | h2d | compute | d2h |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for i, r in enumerate(case["report"]["runs"], 1):
        lines.append(f"| {i}{' (cold)' if i == 1 else ''} | {r['client_ms']:.1f} | {r['server_ms']:.2f} | "
                     f"{r['queue_ms']:.2f} | {r['h2d_ms']:.2f} | {r['compute_ms']:.2f} | {r['d2h_ms']:.2f} |")
    return lines + ["", provenance(report, path)]


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


def table_abft(report, path):
    """The result check's cost per shape and kernel (runs alternate off and on), and the soak."""
    r = report["results"]
    lines = ["| shape | kernel | compute p50 ms (off / on) | check p50 ms | added / compute | "
             "end to end p50 ms (off / on) |", "|---|---|---|---:|---:|---|"]
    for case in dict.fromkeys(c["case"] for c in r["cost"]):
        runs = [c for c in r["cost"] if c["case"] == case and c["report"]]
        off = [c["report"] for c in runs if c["check"] == "off"]
        on = [c["report"] for c in runs if c["check"] == "abft"]
        if not off or not on:
            continue
        mean = lambda rs, f: sum(f(x) for x in rs) / len(rs)
        compute_on = mean(on, lambda x: x["server_ms"]["compute"]["p50"])
        compute_off = mean(off, lambda x: x["server_ms"]["compute"]["p50"])
        check = mean(on, lambda x: x["check_ms"]["p50"])
        # What the check adds to the GPU's time for the job: its own time on
        # the job's path, and any slowing of the kernel beside it.
        added = check + compute_on - compute_off
        lines.append(
            f"| {runs[0]['n']}^3 | {runs[0]['kernel']} | "
            f"{compute_off:.3f} / {compute_on:.3f} | "
            f"{check:.3f} | {100 * added / compute_off:.1f}% | "
            f"{mean(off, lambda x: x['latency_ms']['p50']):.2f} / "
            f"{mean(on, lambda x: x['latency_ms']['p50']):.2f} |")
    soak = [s for s in r["soak"] if s["report"]]
    checked = sum(s["report"]["checked"] for s in soak)
    mismatches = sum(s["report"]["check_mismatches"] for s in soak)
    server_mismatches = sum(s["report"].get("server_check_mismatches", 0) for s in soak)
    verified = sum(s["report"]["verified"] for s in soak)
    wrong = sum(s["report"]["verify_failures"] for s in soak)
    errors = sum(s["report"]["errors"] for s in soak)
    lines += ["", f"False-positive soak: {checked:,} checked jobs of {len(abft_shapes(soak))} shapes "
              f"on kernels {', '.join(s['kernel'] for s in soak)}: {mismatches} mismatches in the "
              f"results' records, {server_mismatches} in the server's count, {errors} errors; "
              f"{verified:,} results also verified against float64, {wrong} wrong.",
              "", provenance(report, path)]
    return lines


def abft_shapes(soak):
    return {shape for s in soak for shape in s["report"]["count_by_shape"]}


def table_suites(report, path):
    lines = ["| suite | verdict | tests passed | failed |", "|---|---|---:|---:|"]
    for s in report["results"]["suites"]:
        lines.append(f"| `{s['name']}` | {s['verdict']} | {s['passed']} | {s['failed']} |")
    return lines + ["", provenance(report, path)]


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


def table_regions(report, path):
    """Same-host callers: each workload over the socket, shared memory and CUDA IPC, with targets."""
    r = report["results"]
    cases = {c["name"]: c["report"] for c in r["cases"] if c["report"]}
    copy = r.get("copy") or {}
    pinned_h2d = copy.get("pinned", {}).get("h2d", {}).get("median_gbps")

    # A and B of one 4096^3 job, in GB.
    ab_gb = 4 * 2 * 4096 ** 2 / 1e9
    rows = [
        ("one 4096^3 job alone, 1 connection: latency p50", "one4096",
         lambda x, m: f"{x['latency_ms']['p50']:.2f} ms", "shared memory <= 12 ms, CUDA IPC <= 5 ms"),
        ("4096^3, 4 in flight, 4 connections: jobs/s, A and B moved to the kernel", "four4096",
         lambda x, m: f"{x['requests_per_s']:,.1f} jobs/s, {x['requests_per_s'] * ab_gb:.1f} GB/s"
                      + (f" = {x['requests_per_s'] * ab_gb / pinned_h2d:.2f} of pinned"
                         if pinned_h2d and m != "cuda-ipc" else ""),
         "shared memory >= 0.8 of cudaMemcpy from pinned memory"),
        ("128^3, 64 in flight, 8 connections", "s128-c64",
         lambda x, m: f"{x['requests_per_s']:,.0f} jobs/s, p99 {x['latency_ms']['p99']:.1f} ms",
         "shared memory >= the socket"),
    ]
    lines = ["| workload | socket | system shared memory | CUDA IPC | target |", "|---|---|---|---|---|"]
    for label, prefix, cell, target in rows:
        memories = ("socket", "shm", "cuda-ipc")
        got = [(cases.get(f"{prefix}-{m}"), m) for m in memories]
        lines.append(f"| {label} | " + " | ".join(cell(x, m) if x else "-" for x, m in got)
                     + f" | {target} |")
    if copy:
        lines += ["", "The yardstick, cudaMemcpy of 128 MiB in the same run (`copy-bench`, median): "
                  + "; ".join(f"{label} {copy[key]['h2d']['median_gbps']:.1f} GB/s to the GPU, "
                              f"{copy[key]['d2h']['median_gbps']:.1f} back"
                              for key, label in (("pinned", "pinned (cudaMallocHost)"),
                                                 ("registered_shm", "shared memory registered with the driver"),
                                                 ("pageable_shm", "shared memory unregistered")))
                  + "."]
    return lines + ["", provenance(report, path)]


# region name -> (scenario, table)
TABLES = {
    "kernels": ("kernels", table_kernels),
    "kernels-by-shape": ("kernels", table_kernels_by_shape),
    "dispatch": ("dispatch", table_dispatch),
    "batching": ("batching", table_batching),
    "single-4096": ("batching", table_single),
    "e2e": ("e2e", table_e2e),
    "e2e-breakdown": ("e2e", table_e2e_breakdown),
    "e2e-targets": ("e2e", None),
    "tcp": ("tcp", table_tcp),
    "suites": ("suites", table_suites),
    "tls": ("tls", table_tls),
    "blas": ("blas", table_blas),
    "soak": ("soak", table_soak),
    "abft": ("abft", table_abft),
    "regions": ("regions", table_regions),
    "attack": ("attack", table_attack),
    "attack-full": ("attack-full", table_attack),
    "attack-full-2": ("attack-full-2", table_attack),
    "attack-bdp-off": ("attack-bdp-off", table_attack),
    "attack-full-together": ("attack-full-together", table_attack),
    "attack-no-rapid-reset": ("attack-no-rapid-reset", table_attack),
    "attack-full-no-rapid-reset": ("attack-full-no-rapid-reset", table_attack),
}
REGION = re.compile(r"(<!-- gemmbench:(?P<gpu>[\w-]+)/(?P<name>[\w-]+):begin -->\n)(?P<body>.*?)"
                    r"(<!-- gemmbench:(?P=gpu)/(?P=name):end -->)", re.S)


def render_region(reports, gpu, name):
    if name not in TABLES:
        raise KeyError(f"unknown table {name!r}; one of {', '.join(TABLES)}")
    scenario, table = TABLES[name]
    if (gpu, scenario) not in reports:
        raise KeyError(f"no report bench/baselines/{gpu}/{scenario}.json")
    report, path = reports[(gpu, scenario)]
    if name == "e2e-targets":
        return table_e2e_targets(report, path, reports.get((gpu, "tcp"), (None,))[0])
    return table(report, path)


def kernels_chart(report, png):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("gemmbench: matplotlib not available, no chart written", file=sys.stderr)
        return
    rows = report["results"]["rows"]
    shapes = list(dict.fromkeys(f"{r['m']}x{r['n']}x{r['k']}" for r in rows))
    kernels = list(dict.fromkeys(r["kernel"] for r in rows))
    width = 0.8 / len(kernels)
    fig, ax = plt.subplots(figsize=(11, 5))
    for i, kernel in enumerate(kernels):
        xs, ys = [], []
        for j, shape in enumerate(shapes):
            for r in rows:
                if r["kernel"] == kernel and f"{r['m']}x{r['n']}x{r['k']}" == shape and r["status"] == "ok":
                    xs.append(j + (i - (len(kernels) - 1) / 2) * width)
                    ys.append(r["tflops"])
        ax.bar(xs, ys, width, label=kernel)
    ax.set_xticks(range(len(shapes)))
    ax.set_xticklabels(shapes)
    ax.set_yscale("log")
    ax.set_ylabel("TFLOP/s (FP32, log scale)")
    ax.set_xlabel("M x N x K")
    ax.set_title(f"SGEMM kernels and cuBLAS on {report['results']['device']['name']} ({report['date'][:10]})")
    ax.legend(ncol=len(kernels), fontsize="small")
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(png, dpi=120, metadata={"Software": None})
    plt.close(fig)


def command_tables(args):
    root = os.path.abspath(args.root)
    baselines = args.baselines or os.path.join(root, "bench", "baselines")
    reports = load_reports(baselines, root)
    LINKS["root"] = root
    stale = []
    docs = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    for doc in docs:
        with open(doc) as f:
            text = f.read()
        LINKS["doc_dir"] = os.path.dirname(doc)

        def replace(m):
            body = "\n".join(render_region(reports, m["gpu"], m["name"])) + "\n"
            return m.group(1) + body + m.group(5)

        try:
            new = REGION.sub(replace, text)
        except KeyError as e:
            sys.exit(f"gemmbench: {os.path.relpath(doc, root)}: {e.args[0]}")
        if new != text:
            stale.append(os.path.relpath(doc, root))
            if not args.check:
                with open(doc, "w") as f:
                    f.write(new)
    if args.check:
        if stale:
            print("gemmbench: tables out of date in " + ", ".join(stale) +
                  "; run bench/gemmbench.py tables", file=sys.stderr)
            return 1
        return 0
    for (gpu, scenario), (report, _) in reports.items():
        if scenario == "kernels" and not args.no_charts:
            kernels_chart(report, os.path.join(baselines, gpu, "kernels.png"))
    print("gemmbench: rewrote " + (", ".join(stale) if stale else "nothing (tables were current)"))
    return 0
