#!/usr/bin/env python3
"""Charts of a `gemm-client load` JSON report, for `gemm-client load --plot`.

    python3 client/plot_load.py report.json PREFIX

writes PREFIX-latency.png (latency histogram of OK jobs, log scale) and
PREFIX-throughput.png (OK jobs/s and p50/p99 latency per second). Needs
matplotlib (Debian: apt-get install python3-matplotlib); without it, it says
so and exits with status 3.
"""
import json
import sys


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_load.py: matplotlib is not installed; "
              "apt-get install python3-matplotlib (the JSON report is "
              "written anyway)", file=sys.stderr)
        return 3
    with open(argv[1]) as f:
        report = json.load(f)
    prefix = argv[2]
    title = "%s, %s, %d connection(s)" % (
        report["shapes"], report["mode"] if report["mode"] == "rate"
        else "concurrency %d" % report["concurrency"], report["connections"])

    hist = report["histogram"]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    if hist["count"]:
        edges = [hist["upper_ms"][0] / (hist["upper_ms"][1] / hist["upper_ms"][0])
                 if len(hist["upper_ms"]) > 1 else 0] + hist["upper_ms"]
        ax.stairs(hist["count"], edges, fill=True)
        ax.set_xscale("log")
    lat = report["latency_ms"]
    for name in ("p50", "p99", "p999"):
        ax.axvline(lat[name], linestyle="--", linewidth=1, color="gray")
        ax.text(lat[name], ax.get_ylim()[1] * 0.95, " " + name, fontsize=8)
    ax.set_xlabel("client end-to-end latency (ms)")
    ax.set_ylabel("jobs")
    ax.set_title("Latency of %d OK jobs: %s" % (report["ok"], title), fontsize=9)
    fig.tight_layout()
    fig.savefig(prefix + "-latency.png", dpi=100)

    timeline = report["timeline"]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    t = [s["t_s"] for s in timeline]
    ax.plot(t, [s["ok"] for s in timeline], label="OK jobs/s")
    ax.plot(t, [s["errors"] for s in timeline], label="errors/s")
    ax.set_xlabel("second of the measured part")
    ax.set_ylabel("jobs per second")
    ax2 = ax.twinx()
    ax2.plot(t, [s["p50_ms"] for s in timeline], "g:", label="p50 ms")
    ax2.plot(t, [s["p99_ms"] for s in timeline], "r:", label="p99 ms")
    ax2.set_ylabel("latency (ms)")
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], loc="lower right")
    ax.set_title("Throughput over time: " + title, fontsize=9)
    fig.tight_layout()
    fig.savefig(prefix + "-throughput.png", dpi=100)
    print("wrote %s-latency.png and %s-throughput.png" % (prefix, prefix))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
