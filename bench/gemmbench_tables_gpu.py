"""gemmbench_tables_gpu: the markdown tables of the kernels, the dispatch
table, batching, the GPU suites, the result check (abft) and the same-host
regions, each from its scenario's kept report (gemmbench_tables.TABLES).
"""

from gemmbench_tables_common import provenance


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
    "v10-packed": "v10 with K slices of 32, 2 stages; A (or B^T) transposed first into a workspace",
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
    # Reports since the shape tuner also name the first job's choice.
    tuned = "auto_first" in r["shapes"][0] if r["shapes"] else False
    ms = lambda x: f"{x:.4f}" if x >= 0 else "-"
    lines = ["| M x N x K | " + " | ".join(f"{label(c)} (ms)" for c in candidates)
             + (" | first job | first / best" if tuned else "")
             + " | auto picks | best | auto / best |",
             "|---|" + "---:|" * len(candidates) + ("---|---:|" if tuned else "")
             + "---|---|---:|"]
    for s in r["shapes"]:
        t = times(s)
        first = f" | {s['auto_first']} | {s['first_over_best']:.3f}" if tuned else ""
        lines.append(f"| {s['m']}x{s['n']}x{s['k']} | "
                     + " | ".join(ms(t[c]) for c in candidates) + first
                     + f" | {s['auto']} | {s['best']} | {s['auto_over_best']:.3f} |")
    own = r.get("own_kernel_chosen")
    chosen = (f"auto sends {own} of {len(r['shapes'])} shapes to the project's own kernel; "
              if own is not None else "")
    at_first = (f" (at a shape's first job {r['worst_first_over_best']:.3f})"
                if "worst_first_over_best" in r else "")
    return lines + ["", f"Worst auto/best {r['worst_auto_over_best']:.3f}{at_first}; {chosen}table of "
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


def table_suites(report, path):
    lines = ["| suite | verdict | tests passed | failed |", "|---|---|---:|---:|"]
    for s in report["results"]["suites"]:
        lines.append(f"| `{s['name']}` | {s['verdict']} | {s['passed']} | {s['failed']} |")
    return lines + ["", provenance(report, path)]


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


def table_check_detect(report, path):
    """check-bench --detect: sign, exponent and mantissa flips caught, by bit, size and kernel."""
    lines = []
    for d in report["results"]["detect"]:
        r = d["report"]
        sizes = [s["size"] for s in r["bits"][0]["sizes"]]
        lines += [f"**{r['kernel']}**: caught / flipped (by the line bound alone); "
                  f"clean results failing: {r['false_positives']}", "",
                  "| bit | " + " | ".join(f"{n}^3" for n in sizes) + " |",
                  "|---|" + "---:|" * len(sizes)]
        for b in r["bits"]:
            bit = b["bit"]
            what = "sign" if bit == 31 else ("exponent" if bit >= 23 else "mantissa")
            lines.append(f"| {bit} ({what}) | " + " | ".join(
                f"{s['caught']}/{s['tried']} ({s['caught_by_lines']})" for s in b["sizes"]) + " |")
        lines.append("")
    return lines + [provenance(report, path)]


def table_check_cost(report, path):
    """What judging one result costs on the device, with and without verifying suspect lines."""
    r = report["results"]["detect"][0]["report"]
    lines = [f"| n^3 ({r['kernel']}) | random data: judge ms | lines only | "
             "constant data: judge ms | lines only | lines verified |",
             "|---|---:|---:|---:|---:|---:|"]
    for c in r["cost"]:
        lines.append(f"| {c['size']} | {c['judge_ms']:.3f} | {c['judge_lines_only_ms']:.3f} | "
                     f"{c['constant_judge_ms']:.3f} | {c['constant_lines_only_ms']:.3f} | "
                     f"{c['constant_verified_lines']:.0f} |")
    return lines + ["", provenance(report, path)]


def table_check_soak(report, path):
    """check-bench --soak: checked clean jobs and false positives by kernel and kind of data."""
    s = report["results"]["soak"]["report"]
    kinds = list(dict.fromkeys(c["data"] for c in s["cells"]))
    kernels = list(dict.fromkeys(c["kernel"] for c in s["cells"]))
    cell = {(c["kernel"], c["data"]): c for c in s["cells"]}
    lines = ["| kernel | " + " | ".join(kinds) + " | lines verified |",
             "|---|" + "---:|" * (len(kinds) + 1)]
    for k in kernels:
        row = [cell[(k, d)] for d in kinds if (k, d) in cell]
        lines.append(f"| {k} | " + " | ".join(
            f"{c['jobs']:,} ({c['false_positives']})" for c in row)
            + f" | {sum(c['verified_lines'] for c in row):,} |")
    return lines + ["", f"Checked jobs (false positives) per cell; in all {s['jobs']:,} checked "
                    f"jobs, {s['false_positives']} false positives.", "", provenance(report, path)]
