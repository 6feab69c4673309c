"""gemmbench_e2e: the scenarios of gemmbench.py that load gemm-server with
gemm-client load: e2e, tls, abft and regions (gemmbench_scenarios.py holds
the registry of all the scenarios).

Each scenario is a function of the Environment that returns its results
(the body of one report) and a summarize function that turns them into the
lines of the table printed at the end of a run.
"""

import os
import subprocess

from gemmbench_env import Server, load, read_json, run_program, selected


def e2e_case(name, goal, *flags):
    return {"name": name, "goal": goal, "client": list(flags)}


LOAD_5S = ("--duration-s", "5", "--warmup-s", "1")
ONE_4096 = ("--shapes", "4096x4096x4096", "--concurrency", "1", "--count", "8", "--warmup-s", "1.5")
FOUR_4096 = ("--shapes", "4096x4096x4096", "--concurrency", "4", "--duration-s", "6", "--warmup-s", "2")
# The end-to-end cases: the targets of issue 6, and the per-stream and
# per-connection variants that locate the limit.
E2E_CASES = [
    e2e_case("s128-c64-x1", "", "--shapes", "128x128x128", "--concurrency", "64", *LOAD_5S, "--connections", "1"),
    e2e_case("s128-c64-x8", "50,000 jobs/s, p99 <= 5 ms",
             "--shapes", "128x128x128", "--concurrency", "64", *LOAD_5S, "--connections", "8"),
    e2e_case("s128-c64-x16", "", "--shapes", "128x128x128", "--concurrency", "64", *LOAD_5S, "--connections", "16"),
    e2e_case("m1024-c16-x1", "", "--shapes", "1024x1024x1024", "--concurrency", "16", *LOAD_5S, "--connections", "1"),
    e2e_case("m1024-c16-x4", "450 jobs/s",
             "--shapes", "1024x1024x1024", "--concurrency", "16", *LOAD_5S, "--connections", "4"),
    e2e_case("one4096", "80 ms", *ONE_4096, "--connections", "1"),
    e2e_case("four4096-x4", "0.8 of 4 TCP connections", *FOUR_4096, "--connections", "4"),
    e2e_case("four4096-x1-s4", "", *FOUR_4096, "--connections", "1", "--streams-per-connection", "4"),
    e2e_case("one4096-x1-split4", "", *ONE_4096, "--connections", "1", "--split", "4"),
    e2e_case("one4096-x2-split2", "", *ONE_4096, "--connections", "2", "--split", "2"),
    e2e_case("one4096-x4-split4", "80 ms", *ONE_4096, "--connections", "4", "--split", "4"),
]
E2E_SMOKE = [e2e_case("smoke", "", "--shapes", "64x64x64:0.8,33x17x9:0.2", "--concurrency", "4",
                      "--count", "200", "--warmup-s", "0.2", "--verify-every", "10")]


def scenario_e2e(env):
    """gemm-client load against a fresh gemm-server per case, with the server's CPU and memory."""
    logs = env.logs("e2e")
    cases = E2E_SMOKE if env.smoke else selected(E2E_CASES, env.args.cases)
    results = []
    for case in cases:
        name = case["name"]
        with Server(env, [], os.path.join(logs, f"server-{name}.log")) as server:
            cpu0, rss0 = server.cpu_seconds(), server.memory_kb("VmRSS")
            report, client = load(env, server, name, case["client"], logs)
            cpu1, rss1, hwm = server.cpu_seconds(), server.memory_kb("VmRSS"), server.memory_kb("VmHWM")
        jobs = (report["warmup_jobs"] + report["count"]) if report else 0
        results.append({
            "name": name, "goal": case["goal"], "server_flags": server.cmd[1:],
            "client_flags": case["client"] + list(env.args.client_flags), "client": client, "server_exit": server.exit_code, "report": report,
            "server": {"cpu_s": round(cpu1 - cpu0, 3), "jobs": jobs,
                       "cpu_ms_per_job": round(1e3 * (cpu1 - cpu0) / max(jobs, 1), 4),
                       "rss_idle_mb": round(rss0 / 1024), "rss_end_mb": round(rss1 / 1024),
                       "rss_peak_mb": round(hwm / 1024)}})
    return {"cases": results}


LOAD_HEADER = (f"{'jobs/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'GB/s':>6}")


def load_row(r):
    """A load report's throughput, latency and bandwidth, as LOAD_HEADER."""
    return (f"{r['requests_per_s']:9.1f} {r['latency_ms']['p50']:8.2f} "
            f"{r['latency_ms']['p99']:8.2f} {(r['mb_per_s_in'] + r['mb_per_s_out']) / 1e3:6.2f}")


def summarize_e2e(results):
    lines = [f"{'case':18} {LOAD_HEADER} {'batch':>6} {'srv ms':>7} {'srv CPU/job':>11} {'err':>4}"]
    for c in results["cases"]:
        r = c["report"]
        if r is None:
            lines.append(f"{c['name']:18} failed (rc {c['client']['rc']})")
            continue
        lines.append(
            f"{c['name']:18} {load_row(r)} "
            f"{r['server_ms']['mean_batch_size']:6.1f} {r['server_ms']['total']['mean']:7.2f} "
            f"{c['server']['cpu_ms_per_job']:9.3f}ms {r['errors']:4d}")
    return lines


# What TLS costs: the load test's 128^3 and 1024^3 cases in plaintext and
# over TLS (a P-256 certificate), alternating, twice each, on fresh servers.
TLS_CASES = [c for c in E2E_CASES if c["name"] in ("s128-c64-x8", "m1024-c16-x4")]


def make_certificates(directory):
    """A CA and a server certificate for 127.0.0.1 (openssl), as in tests/tls_test.cc."""
    os.makedirs(directory, exist_ok=True)
    path = lambda name: os.path.join(directory, name)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    with open(path("server.ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    steps = [
        ["openssl", "req", "-x509", *ec, "-days", "1", "-subj", "/CN=gemmbench-ca",
         "-keyout", path("ca.key"), "-out", path("ca.pem")],
        ["openssl", "req", "-new", *ec, "-subj", "/CN=gemm-server",
         "-keyout", path("server.key"), "-out", path("server.csr")],
        ["openssl", "x509", "-req", "-days", "1", "-in", path("server.csr"),
         "-CA", path("ca.pem"), "-CAkey", path("ca.key"), "-CAcreateserial",
         "-out", path("server.pem"), "-extfile", path("server.ext")],
    ]
    for step in steps:
        subprocess.run(step, check=True, capture_output=True)
    return path("server.pem"), path("server.key"), path("ca.pem")


def scenario_tls(env):
    """The load test's 128^3 and 1024^3 cases in plaintext and over TLS (needs openssl)."""
    logs = env.logs("tls")
    cert, key, ca = make_certificates(os.path.join(logs, "certs"))
    cases = E2E_SMOKE if env.smoke else selected(TLS_CASES, env.args.cases)
    results = []
    for case in cases:
        for run in (1, 2):
            for security in ("plaintext", "tls"):
                name = f"{case['name']}-{security}-{run}"
                server_flags = ["--tls-cert", cert, "--tls-key", key] if security == "tls" else []
                client_flags = ["--tls-ca", ca] if security == "tls" else []
                with Server(env, server_flags, os.path.join(logs, f"server-{name}.log")) as server:
                    cpu0 = server.cpu_seconds()
                    report, client = load(env, server, name, case["client"] + client_flags, logs)
                    cpu1 = server.cpu_seconds()
                jobs = (report["warmup_jobs"] + report["count"]) if report else 0
                results.append({
                    "name": name, "case": case["name"], "security": security, "run": run,
                    "server_flags": server.cmd[1:], "client": client, "report": report,
                    "server": {"cpu_ms_per_job": round(1e3 * (cpu1 - cpu0) / max(jobs, 1), 4)}})
    return {"runs": results}


def summarize_tls(results):
    lines = [f"{'case':30} {LOAD_HEADER} {'srv CPU/job':>11} {'err':>4}"]
    for c in results["runs"]:
        r = c["report"]
        if r is None:
            lines.append(f"{c['name']:30} failed (rc {c['client']['rc']})")
            continue
        lines.append(f"{c['name']:30} {load_row(r)} "
                     f"{c['server']['cpu_ms_per_job']:9.3f}ms {r['errors']:4d}")
    return lines


# The result check (ABFT): what it costs one job at a time, checked and not,
# per shape and kernel; and a soak of many random shapes on every fast
# kernel with the check on, whose every mismatch is a false positive (no
# fault is injected), with results verified against float64 as well.
ABFT_COST_CASES = [
    {"name": f"s{n}-{kernel}", "n": n, "kernel": kernel, "count": count}
    for n, count in ((128, 2000), (1024, 300), (4096, 40))
    for kernel in ("cublas", "v6")
]
ABFT_SOAK_KERNELS = ["auto", "cublas", "v6", "v7", "v7-64x64", "v8", "v5", "v4", "v10",
                     "v10-64x64", "v10-packed", "v11", "v12"]
# The 3xTF32 kernels: a job names them with PRECISION_FP32_TENSOR.
FP32_TENSOR_KERNELS = ("v9", "v12")


def abft_soak_shapes(seed=17, count=48):
    """Odd random shapes up to 400 (and a few larger), as a --shapes mix."""
    import random
    rng = random.Random(seed)
    shapes = [f"{rng.randint(1, 400)}x{rng.randint(1, 400)}x{rng.randint(1, 400)}"
              for _ in range(count)]
    return ",".join(shapes + ["1000x999x777:0.2", "16x4096x4096:0.2", "2048x2048x64:0.2"])


def scenario_abft(env):
    """The result check (ABFT): its cost per shape and kernel, and a false-positive soak."""
    logs = env.logs("abft")
    cost = []
    smoke = [{"name": "s128-auto", "n": 128, "kernel": "auto", "count": 10}]
    cases = smoke if env.smoke else selected(ABFT_COST_CASES, env.args.cases)
    with Server(env, [], os.path.join(logs, "server-cost.log")) as server:
        for case in cases:
            n = case["n"]
            for check in ("off", "abft", "off", "abft"):
                name = f"{case['name']}-{check}-{len(cost)}"
                flags = ["--shapes", f"{n}x{n}x{n}", "--kernel", case["kernel"], "--check", check,
                         "--concurrency", "1", "--count", str(case["count"]),
                         "--warmup-s", "1"]
                report, client = load(env, server, name, flags, logs, timeout_s=300)
                cost.append({"name": name, "case": case["name"], "n": n, "kernel": case["kernel"],
                             "check": check, "client": client, "report": report})
    soak = []
    per_kernel = 200 if env.smoke else 15000
    kernels = ["auto"] if env.smoke else ABFT_SOAK_KERNELS
    with Server(env, [], os.path.join(logs, "server-soak.log")) as server:
        for kernel in kernels:
            name = f"soak-{kernel}"
            flags = ["--shapes", abft_soak_shapes(), "--kernel", kernel, "--check", "abft",
                     "--concurrency", "32", "--count", str(per_kernel), "--warmup-s", "0",
                     "--verify-every", "25", "--connections", "4"]
            if kernel in FP32_TENSOR_KERNELS:
                flags += ["--precision", "fp32-tensor"]
            report, client = load(env, server, name, flags, logs, timeout_s=600)
            soak.append({"name": name, "kernel": kernel, "client": client, "report": report})
    return {"cost": cost, "soak": soak}


def summarize_abft(results):
    lines = [f"{'case':28} {'compute p50':>11} {'check p50':>9} {'check/compute':>13} {'e2e p50':>8}"]
    for c in results["cost"]:
        r = c["report"]
        if r is None:
            lines.append(f"{c['name']:28} failed (rc {c['client']['rc']})")
            continue
        compute = r["server_ms"]["compute"]["p50"]
        check = r["check_ms"]["p50"] if r.get("checked") else 0.0
        lines.append(f"{c['name']:28} {compute:9.3f}ms {check:7.3f}ms "
                     f"{100 * check / compute if compute else 0:12.2f}% {r['latency_ms']['p50']:6.2f}ms")
    jobs = sum(s["report"]["checked"] for s in results["soak"] if s["report"])
    mismatches = sum(s["report"]["check_mismatches"] + s["report"].get("server_check_mismatches", 0)
                     for s in results["soak"] if s["report"])
    wrong = sum(s["report"]["verify_failures"] for s in results["soak"] if s["report"])
    errors = sum(s["report"]["errors"] for s in results["soak"] if s["report"])
    lines.append(f"soak: {jobs} checked jobs on {len(results['soak'])} kernels, "
                 f"{mismatches} mismatches (false positives), {wrong} wrong results, {errors} errors")
    return lines


# Same-host callers: operands and results in the messages (socket), in a
# system shared-memory region (shm) or in GPU memory shared by CUDA IPC, one
# server, side by side; copy-bench's cudaMemcpy rates are the yardstick.
REGION_CASES = [
    e2e_case(f"{shape}-{memory}", goal, *flags, "--memory", memory)
    for shape, goal_of, flags in [
        ("one4096", {"socket": "", "shm": "12 ms", "cuda-ipc": "5 ms"}, ONE_4096),
        ("four4096", {"socket": "", "shm": "0.8 of pinned H2D", "cuda-ipc": ""},
         FOUR_4096 + ("--connections", "4")),
        ("s128-c64", {"socket": "", "shm": ">= socket", "cuda-ipc": ""},
         ("--shapes", "128x128x128", "--concurrency", "64", *LOAD_5S, "--connections", "8")),
    ]
    for memory, goal in goal_of.items()
]
REGION_SMOKE = [e2e_case(f"smoke-{m}", "", "--shapes", "64x64x64:0.8,33x17x9:0.2", "--concurrency", "4",
                         "--count", "200", "--warmup-s", "0.2", "--verify-every", "10", "--memory", m)
                for m in ("socket", "shm")]


def scenario_regions(env):
    """Same-host callers: the socket, system shared memory and CUDA IPC, side by side."""
    logs = env.logs("regions")
    copy = None
    if not env.smoke:
        env.need_gpu()
        copy_json = os.path.join(logs, "copy-bench.json")
        rc, _, _, _ = run_program([env.program("copy-bench"), "--bytes", str(128 << 20),
                                   "--json", copy_json], os.path.join(logs, "copy-bench.log"), 120)
        copy = read_json(copy_json) if rc == 0 else None
    cases = REGION_SMOKE if env.smoke else selected(REGION_CASES, env.args.cases)
    results = []
    with Server(env, [], os.path.join(logs, "server.log")) as server:
        for case in cases:
            report, client = load(env, server, case["name"], case["client"], logs)
            results.append({"name": case["name"], "goal": case["goal"],
                            "client_flags": case["client"] + list(env.args.client_flags),
                            "client": client, "report": report})
    return {"copy": copy, "cases": results}


def summarize_regions(results):
    lines = []
    copy = results.get("copy")
    if copy:
        for memory in ("pinned", "registered_shm", "pageable_shm"):
            lines.append(f"cudaMemcpy {memory:15} h2d {copy[memory]['h2d']['median_gbps']:6.1f} GB/s, "
                         f"d2h {copy[memory]['d2h']['median_gbps']:6.1f} GB/s")
    lines.append(f"{'case':18} {LOAD_HEADER} {'H2D GB/s':>8} {'srv ms':>7} {'h2d ms':>7} {'err':>4}  goal")
    for c in results["cases"]:
        r = c["report"]
        if r is None:
            lines.append(f"{c['name']:18} failed (rc {c['client']['rc']})")
            continue
        # Operand bytes the jobs moved to the device (A and B), per second.
        flags = c["client_flags"]
        m, n, k = (int(x) for x in flags[flags.index("--shapes") + 1].split(":")[0].split("x"))
        h2d = r["requests_per_s"] * 4 * (m * k + k * n) / 1e9
        lines.append(f"{c['name']:18} {load_row(r)} {h2d:8.1f} {r['server_ms']['total']['mean']:7.2f} "
                     f"{r['server_ms']['h2d']['mean']:7.2f} {r['errors']:4d}  {c['goal']}")
    return lines
