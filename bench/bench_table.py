#!/usr/bin/env python3
"""Turns gemm-bench JSON into the markdown tables of docs/kernels.md and a PNG chart.

    bench/bench_table.py bench/results/h200-kernels-2026-11-30.json \
        --png bench/results/h200-kernels-2026-11-30.png > table.md

Standard library only; the chart needs matplotlib and is skipped, with a
message on stderr, where it is missing.
"""

import argparse
import json
import sys


def shape_name(r):
    return f"{r['m']}x{r['n']}x{r['k']}"


def fmt(value, spec):
    return "-" if value is None else format(value, spec)


def markdown(data):
    results = data["results"]
    shapes = list(dict.fromkeys(shape_name(r) for r in results))
    kernels = list(dict.fromkeys(r["kernel"] for r in results))
    by_key = {(shape_name(r), r["kernel"]): r for r in results}
    dev = data["device"]
    lines = [
        f"{dev['name']} (sm_{dev['compute_capability'].replace('.', '')}, {dev['sm_count']} SMs), "
        f"CUDA runtime {dev['cuda_runtime']}, cuBLAS {dev['cublas']}; {data['date']}",
        "",
        f"Command: `{data['command']}`",
        "",
    ]
    # The chapter's "Record what you get" table, one per shape; cuBLAS first.
    order = ["cublas"] + [k for k in kernels if k != "cublas"]
    for shape in shapes:
        lines += [f"### M x N x K = {shape}", "",
                  "| version | key change | time (ms) | TFLOP/s | % of cuBLAS | rel. error |",
                  "|---|---|---:|---:|---:|---:|"]
        for kernel in order:
            r = by_key.get((shape, kernel))
            if r is None:
                continue
            if r["status"] == "skipped":
                lines.append(f"| {kernel} | {r.get('description', '')} | skipped | | | |")
                continue
            note = "" if r["status"] == "ok" else f" ({r['status']})"
            lines.append(
                f"| {kernel}{note} | {r.get('description', '')} | {fmt(r['median_ms'], '.3f')} | "
                f"{fmt(r['tflops'], '.2f')} | {fmt(r['pct_of_cublas'], '.1f')} | "
                f"{fmt(r['rel_error'], '.1e')} |")
        lines.append("")
    # TFLOP/s across shapes.
    lines += ["### TFLOP/s by shape", "",
              "| version | " + " | ".join(shapes) + " |",
              "|---|" + "---:|" * len(shapes)]
    for kernel in order:
        cells = []
        for shape in shapes:
            r = by_key.get((shape, kernel))
            cells.append("-" if r is None or r["status"] != "ok" else format(r["tflops"], ".2f"))
        lines.append(f"| {kernel} | " + " | ".join(cells) + " |")
    lines.append("")
    return "\n".join(lines)


def chart(data, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("bench_table: matplotlib not available, no chart written", file=sys.stderr)
        return False
    results = [r for r in data["results"] if r["status"] == "ok"]
    shapes = list(dict.fromkeys(shape_name(r) for r in data["results"]))
    kernels = list(dict.fromkeys(r["kernel"] for r in data["results"]))
    width = 0.8 / len(kernels)
    fig, ax = plt.subplots(figsize=(11, 5))
    for i, kernel in enumerate(kernels):
        xs, ys = [], []
        for j, shape in enumerate(shapes):
            for r in results:
                if r["kernel"] == kernel and shape_name(r) == shape:
                    xs.append(j + (i - (len(kernels) - 1) / 2) * width)
                    ys.append(r["tflops"])
        ax.bar(xs, ys, width, label=kernel)
    ax.set_xticks(range(len(shapes)))
    ax.set_xticklabels(shapes)
    ax.set_yscale("log")
    ax.set_ylabel("TFLOP/s (FP32, log scale)")
    ax.set_xlabel("M x N x K")
    ax.set_title(f"SGEMM v0..v5 and cuBLAS on {data['device']['name']} ({data['date'][:10]})")
    ax.legend(ncol=len(kernels), fontsize="small")
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", help="gemm-bench --json output")
    parser.add_argument("--png", help="write a bar chart here (needs matplotlib)")
    args = parser.parse_args()
    with open(args.json) as f:
        data = json.load(f)
    print(markdown(data))
    if args.png and chart(data, args.png):
        print(f"bench_table: wrote {args.png}", file=sys.stderr)


if __name__ == "__main__":
    main()
