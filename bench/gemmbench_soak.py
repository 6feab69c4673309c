"""gemmbench_soak: the soak scenario of gemmbench.py.

One gemm-server under a verified mixed load (`gemm-client load`) for
--soak-s seconds, its resident size sampled once a second. The verdict is
"fail", with the failing checks named, when a result is wrong, a job is
lost or failed, the server's own counters disagree with the client's, or
the server's memory passes either bound (soak_checks).
"""

import os
import shlex
import subprocess
import time

from gemmbench_env import Server, read_json

# The mix: small jobs that the server batches, odd shapes (no dimension a
# multiple of 8), and two whose operands (A + B: over 3 MiB, so not one
# unary message; over 1 MiB, so not one stream message) and results (over
# 1 MiB, so not inline) go in 1 MiB chunks over GemmStream: 1000x999x777
# (6.2 MB in, 4.0 MB out; most of the compute) and the tall, thin
# 20011x14x41 (3.3 MB in, 1.1 MB out, cheap). Weights are shares of the
# jobs.
SOAK_SHAPES = ("64x64x64:0.3,128x128x128:0.2,33x17x9:0.15,200x100x300:0.13,"
               "257x255x129:0.15,20011x14x41:0.05,1000x999x777:0.02")
# --smoke: the same kinds of job in seconds, the chunked one the cheap one.
SOAK_SMOKE_SHAPES = "64x64x64:0.5,33x17x9:0.3,20011x14x41:0.2"
# A quarter of the jobs go each on a call of its own (a unary Gemm call, or
# for the chunked shape a GemmStream call of its own); the rest are
# pipelined on the client's streams.
SOAK_UNARY_SHARE = 0.25

# Memory bounds. The server's resident size rises while its pools fill and
# then levels off: common/process_tuning.h keeps glibc from returning freed
# blocks, so the peak of jobs in flight stays resident, and on CUDA the
# pinned host pool (--pinned-pool-bytes, 2 GiB) is resident from the start.
# Measured: the H200 e2e cases peak at 0.45-1.7 GB, the earlier H200 soak
# (32 in flight, 10% of jobs 1024^3, 60 s) at 1.5 GB; the CPU backend's
# 10-minute soak here (256 in flight, bench/baselines/cpu/soak.json) at
# 603 MB, growing 43 MB over its second half.
#
# A ceiling on the peak (VmHWM): a healthy server stays under the 2 GiB
# pinned pool + the largest set of jobs the soak can have in flight (256 x
# 10 MB of 1000x999x777, 2.6 GB, partly inside the pool) + the process
# itself (~0.3 GB), under 5 GB.
# It catches what grows without bound; slow leaks are the growth bound's.
SOAK_RSS_MAX_MB = 8192
# Growth over the second half of the run (RSS at the end minus RSS at the
# middle), when the pools have filled: a leak grows with the jobs served.
# 256 MB over the last 5 minutes of a 10-minute run is a leak of 1.6 KB
# per job on the CPU backend here (524 jobs/s at 256 in flight), ~200 bytes
# at the earlier H200 soak's ~4,000 jobs/s.
SOAK_RSS_GROWTH_MAX_MB = 256


def soak_flags(env):
    """The gemm-client load flags of the soak, without --server and --json."""
    a = env.args
    return ["--shapes", SOAK_SMOKE_SHAPES if env.smoke else SOAK_SHAPES,
            "--concurrency", str(8 if env.smoke else a.soak_concurrency),
            "--connections", str(2 if env.smoke else a.soak_connections),
            "--unary-share", str(SOAK_UNARY_SHARE),
            "--duration-s", str(soak_seconds(env)), "--warmup-s", "1",
            # Each shape's reference is computed once, so a check costs one
            # pass over C (with the NaN fill before it) and one over the
            # job's own scaled copy of A or B: cheap enough for all.
            "--verify-every", "1"]


def soak_seconds(env):
    return 3 if env.smoke else env.args.soak_s


def scenario_soak(env):
    """A verified mixed load for --soak-s s; fails on a wrong result, a lost or failed job, disagreeing counts, or RSS past its bounds."""
    logs = env.logs("soak")
    seconds = soak_seconds(env)
    samples = []
    with Server(env, [], os.path.join(logs, "server.log")) as server:
        json_path = os.path.join(logs, "soak.json")
        cmd = [env.program("gemm-client"), "load", "--server", server.address, "-q",
               "--json", json_path] + soak_flags(env) + list(env.args.client_flags)
        start = time.monotonic()
        with open(os.path.join(logs, "client.log"), "w") as log:
            client = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
            while client.poll() is None:
                samples.append([round(time.monotonic() - start, 1),
                                round(server.memory_kb("VmRSS") / 1024, 1)])
                try:
                    client.wait(timeout=1.0)
                except subprocess.TimeoutExpired:
                    pass
                if time.monotonic() - start > seconds + 120:
                    client.kill()
        samples.append([round(time.monotonic() - start, 1), round(server.memory_kb("VmRSS") / 1024, 1)])
        peak = round(server.memory_kb("VmHWM") / 1024, 1)
    report = read_json(json_path)
    if report:
        report.pop("histogram", None)
    bounds = {"rss_max_mb": env.args.soak_rss_max_mb,
              "rss_growth_max_mb": env.args.soak_rss_growth_max_mb}
    results = {"command": shlex.join(cmd), "seconds": seconds,
               "concurrency": 8 if env.smoke else env.args.soak_concurrency,
               "connections": 2 if env.smoke else env.args.soak_connections,
               "client_rc": client.returncode, "server_exit": server.exit_code, "report": report,
               "rss_mb": samples, "rss_peak_mb": peak,
               "rss_growth_second_half_mb": second_half_growth(samples), "bounds": bounds}
    results.update(soak_checks(results))
    return results


def second_half_growth(samples):
    """RSS at the end minus RSS at the middle of the sampled time, in MB."""
    if len(samples) < 2:
        return 0.0
    half = [mb for t, mb in samples if t >= samples[-1][0] / 2]
    return round(half[-1] - half[0], 1)


def soak_checks(results):
    """The checks of a soak and its verdict: {"checks": [{"name", "ok", "detail"}],
    "failed_checks": [names], "verdict": "pass" | "fail", ...}. A pure function of
    the results, so that each check can be shown to fail (gemmbench_soak_test.py)."""
    r = results["report"] or {}
    bounds = results["bounds"]
    checks = []

    def check(name, ok, detail):
        checks.append({"name": name, "ok": bool(ok), "detail": detail})

    # The client's exit code is 2 when a result was wrong and 4 when jobs
    # failed, were lost or the counts disagree (the checks below say which);
    # anything else but 0 means no trustworthy report.
    check("ran", results["report"] is not None and results["client_rc"] in (0, 2, 4)
          and results["server_exit"] == 0,
          f"client exit {results['client_rc']}, server exit {results['server_exit']}"
          + ("" if results["report"] is not None else ", no client report"))
    answered_ok = r.get("answered_ok", 0)
    answered_errors = r.get("answered_errors", 0)
    verified = r.get("verified", 0)
    wrong = r.get("verify_failures", 0)
    check("results", verified > 0 and wrong == 0,
          f"{verified:,} of {answered_ok:,} answered OK verified against float64, {wrong} wrong")
    sent = r.get("sent", 0)
    lost = sent - answered_ok - answered_errors
    check("lost", sent > 0 and lost == 0,
          f"sent {sent:,}, answered {answered_ok + answered_errors:,}, lost {lost}")
    codes = ", ".join(f"{k} {v}" for k, v in r.get("errors_by_code", {}).items())
    check("errors", answered_errors == 0,
          f"{answered_errors:,} failed" + (f" (measured: {codes})" if codes else ""))
    server_ok = r.get("server_jobs_ok")
    server_not_ok = (r.get("server_jobs_failed", 0) + r.get("server_jobs_rejected", 0)
                     if server_ok is not None else None)
    if r.get("server_side_jobs", sent) != sent:
        # --split in --client-flags: the server counts each part.
        agree = server_ok is not None and server_ok + server_not_ok == r["server_side_jobs"]
    else:
        agree = server_ok == answered_ok and server_not_ok == answered_errors
    check("server_counts", agree,
          "no server counts" if server_ok is None else
          f"server ok {server_ok:,}, failed+rejected {server_not_ok}; "
          f"client ok {answered_ok:,}, errors {answered_errors}")
    peak = results["rss_peak_mb"]
    check("rss_max", peak <= bounds["rss_max_mb"],
          f"peak {peak:,.0f} MB, bound {bounds['rss_max_mb']:,.0f} MB")
    growth = results["rss_growth_second_half_mb"]
    check("rss_growth", growth <= bounds["rss_growth_max_mb"],
          f"second half {growth:+,.0f} MB, bound {bounds['rss_growth_max_mb']:,.0f} MB")
    failed = [c["name"] for c in checks if not c["ok"]]
    return {"verified_fraction": round(verified / answered_ok, 4) if answered_ok else 0.0,
            "lost": lost, "server_counts_agree": "server_counts" not in failed,
            "checks": checks, "failed_checks": failed, "verdict": "fail" if failed else "pass"}


def summarize_soak(results):
    r = results["report"] or {}
    rss = results["rss_mb"]
    lines = [f"{results['verdict']}: {r.get('count', 0):,} jobs in {results['seconds']} s "
             f"({r.get('requests_per_s', 0):,.0f}/s) at concurrency {results['concurrency']}; "
             f"RSS {rss[0][1]:,.0f} -> {rss[-1][1]:,.0f} MB (peak {results['rss_peak_mb']:,.0f}, "
             f"second half {results['rss_growth_second_half_mb']:+,.0f})"]
    for c in results["checks"]:
        lines.append(f"  {'ok  ' if c['ok'] else 'FAIL'} {c['name']:13} {c['detail']}")
    return lines
