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

from gemmbench_env import SCHEMA_VERSION
from gemmbench_tables_common import LINKS
from gemmbench_tables_gpu import (table_abft, table_batching, table_check_cost,
                                  table_check_detect, table_check_soak, table_dispatch,
                                  table_kernels, table_kernels_by_shape, table_regions,
                                  table_single, table_suites)
from gemmbench_tables_load import (table_attack, table_blas, table_e2e, table_e2e_breakdown,
                                   table_e2e_targets, table_soak, table_tcp, table_tls)


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
    "check-detect": ("check", table_check_detect),
    "check-cost": ("check", table_check_cost),
    "check-soak": ("check", table_check_soak),
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
    docs = [os.path.join(root, "README.md")] + sorted(
        glob.glob(os.path.join(root, "docs", "**", "*.md"), recursive=True))
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
