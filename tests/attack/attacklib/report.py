"""The report's descriptions of the host, binaries and commit, and the
table `attack.py run` prints.
"""

import datetime
import hashlib
import os
import platform
import resource
import socket
import subprocess

from .config import mib


def host_description():
    mem = {}
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                k, _, v = line.partition(":")
                mem[k] = int(v.split()[0]) * 1024
    except OSError:
        pass
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f
                        if l.startswith("model name")), cpu)
    except OSError:
        pass
    return {"hostname": socket.gethostname(), "kernel": platform.release(),
            "cpu": cpu, "cpus": os.cpu_count(),
            "mem_total_mib": mib(mem.get("MemTotal")),
            "mem_available_mib": mib(mem.get("MemAvailable")),
            "python": platform.python_version(),
            "attacker_nofile": resource.getrlimit(resource.RLIMIT_NOFILE)[0]}


def binary_description(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    try:
        version = subprocess.run([path, "--version"], capture_output=True,
                                 timeout=10, text=True).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        version = None
    return {"path": os.path.abspath(path), "sha256": digest.hexdigest()[:16],
            "mtime": datetime.datetime.fromtimestamp(
                os.path.getmtime(path)).isoformat(timespec="seconds"),
            "version": version}


def commit_of(explicit):
    if explicit:
        return explicit
    # This folder, tests/attack/, as attack.py's own.
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for where in (os.getcwd(), here):
        try:
            return subprocess.run(["git", "-C", where, "rev-parse", "HEAD"],
                                  capture_output=True, text=True, timeout=10,
                                  check=True).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            continue
    return None


def attacker_saw(s):
    """A few words per attack: what the server answered."""
    words = []
    for a, r in s["attack"].items():
        bits = []
        if r.get("error"):
            bits.append("error " + r["error"][:40])
        for key in ("grpc_status", "job_ends", "rst_stream_in", "goaway"):
            for k, v in (r.get(key) or {}).items():
                bits.append("%s%s x%d" % ("GOAWAY " if key == "goaway" else
                                          "RST " if key == "rst_stream_in"
                                          else "", k, v))
        if r.get("closed_by_server"):
            bits.append("closed %d" % r["closed_by_server"])
        words.append("%s: %s" % (a, ", ".join(bits[:4]) or "nothing"))
    return "; ".join(words)


def table(report):
    rows = [("scenario", "peak MiB", "after/idle MiB", "info d/a/f", "victim "
             "sent/ok/fail/lost", "p99 ms (x)", "log KiB", "targets")]
    base = report.get("baseline") or {}
    base_p99 = base.get("victim", {}).get("latency_ms", {}).get("p99")
    for s in ([base] if base else []) + report["scenarios"]:
        srv, v = s["server"], s["victim"]
        p99 = v.get("latency_ms", {}).get("p99")
        ratio = ("%.1f" % (p99 / base_p99)) if p99 and base_p99 else "-"
        targets = s.get("targets", {})
        passed = sum(1 for x in targets.values() if x["pass"])
        missed = [k for k, x in targets.items() if not x["pass"]]
        rows.append((
            s["scenario"] + (" CRASHED" if srv["crashed"] else ""),
            "%s" % max(x for x in (srv["peak_rss_mib"], srv["vm_hwm_mib"], 0)
                       if x is not None),
            "%s/%s" % (srv["rss_after_mib"], srv["idle_rss_mib"]),
            "/".join("ok" if s["probe_" + w_].get("info_from_ipv6",
                                                   {}).get("ok")
                     else "NO" for w_ in ("during", "after", "final")),
            "%s/%s/%s/%s" % (v.get("sent", "-"), v.get("ok", "-"),
                             v.get("failed", "-"), v.get("unanswered", "-")),
            "%s (%s)" % ("-" if p99 is None else "%.1f" % p99, ratio),
            "%.0f" % (srv["log_bytes_attack"] / 1024),
            "%d/%d%s" % (passed, len(targets),
                         (" miss: " + ",".join(m.replace("victim_", "v_")
                                               for m in missed))
                         if missed else "")))
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(str(c).ljust(wd) for c, wd in zip(r, widths)).rstrip()
             for r in rows]
    lines.insert(1, "  ".join("-" * wd for wd in widths))
    lines.append("")
    for s in report["scenarios"]:
        lines.append("%-17s %s" % (s["scenario"], attacker_saw(s)))
    return "\n".join(lines)
