"""gemmbench_scenarios: the named scenarios of gemmbench.py.

Each scenario is a function of the Environment that returns its results
(the body of one report) and a summarize function that turns them into the
lines of the table printed at the end of a run. Those that load gemm-server
with gemm-client load (e2e, tls, abft, regions) are in gemmbench_e2e.py.
"""

import os
import re
import json
import shlex
import subprocess
import sys
import tempfile

from gemmbench_e2e import (scenario_abft, scenario_e2e, scenario_regions, scenario_tls,
                           summarize_abft, summarize_e2e, summarize_regions, summarize_tls)
from gemmbench_env import Server, SkipScenario, read_json, run_program, selected
from gemmbench_soak import scenario_soak, summarize_soak

HERE = os.path.dirname(os.path.abspath(__file__))


def scenario_kernels(env):
    """gemm-bench: the chapter's table, v0..v5 and cuBLAS, on several shapes."""
    env.need_gpu()
    logs = env.logs("kernels")
    flags = (["--shapes", "256,1000x999x777", "--repeats", "3"] if env.smoke else
             ["--shapes", "1024,2048,4096,8192,1000x999x777", "--repeats", "30"])
    out = os.path.join(logs, "gemm-bench.json")
    cmd = [env.program("gemm-bench"), "--kernels", "all", "--json", out] + flags
    rc, seconds, _, _ = run_program(cmd, os.path.join(logs, "gemm-bench.log"), 600)
    data = read_json(out)
    if rc != 0 or data is None:
        raise RuntimeError(f"gemm-bench failed (rc {rc}); see {logs}/gemm-bench.log")
    return {"command": shlex.join(cmd), "seconds": round(seconds, 1),
            "device": data["device"], "settings": data["settings"], "rows": data["results"]}


def summarize_kernels(results):
    rows = [r for r in results["rows"] if r["status"] == "ok"]
    big = max((r["m"] * r["n"] * r["k"] for r in rows), default=0)
    return [f"{r['kernel']:7} {r['m']}x{r['n']}x{r['k']}: {r['median_ms']:.3f} ms, "
            f"{r['tflops']:.2f} TFLOP/s, {r['pct_of_cublas']:.1f}% of cuBLAS"
            for r in rows if r["m"] * r["n"] * r["k"] == big and r["m"] == r["n"]]


def scenario_dispatch(env):
    """dispatch-bench: auto's choice against the best of its candidates per shape."""
    env.need_gpu()
    logs = env.logs("dispatch")
    out = os.path.join(logs, "dispatch.json")
    cmd = [env.program("dispatch-bench"), "--dispatch-cache", env.dispatch_cache,
           "--out", out] + (["--reps", "3"] if env.smoke else [])
    rc, seconds, _, _ = run_program(cmd, os.path.join(logs, "dispatch-bench.log"), 300)
    data = read_json(out)
    if rc != 0 or data is None:
        raise RuntimeError(f"dispatch-bench failed (rc {rc}); see {logs}")
    data["command"] = shlex.join(cmd)
    return data


def summarize_dispatch(results):
    return [f"{len(results['shapes'])} shapes: worst auto/best {results['worst_auto_over_best']:.3f}, "
            f"sweep auto/best {results['sweep_auto_over_best']:.3f}, own kernel chosen for "
            f"{results.get('own_kernel_chosen', '?')}"]


# check-bench --detect per kernel: cuBLAS, the strict FP32 kernel auto
# prefers at large sizes, and the 3xTF32 one.
CHECK_DETECT_KERNELS = ["cublas", "v10", "v12"]


def scenario_check(env):
    """check-bench: the result check's detection by bit and size, and its false-positive soak."""
    env.need_gpu()
    logs = env.logs("check")
    program = env.program("check-bench")
    if env.smoke:
        detect_flags, kernels = ["--sizes", "256", "--elements", "2"], ["cublas"]
        soak_flags = ["--jobs", "40", "--kernels", "v0,cublas"]
    else:
        detect_flags = ["--sizes", "1024,2048,4096,8192", "--elements", "32"]
        kernels = CHECK_DETECT_KERNELS
        soak_flags = ["--jobs", "20000", "--kernels", "all"]
    runs = [(f"detect-{k}", ["--detect", "--kernel", k] + detect_flags) for k in kernels]
    runs.append(("soak", ["--soak"] + soak_flags))
    results = {"detect": [], "soak": None}
    for name, flags in runs:
        out = os.path.join(logs, f"{name}.json")
        cmd = [program, "--json", out] + flags
        rc, seconds, _, _ = run_program(cmd, os.path.join(logs, f"{name}.log"), 900)
        data = read_json(out)
        if data is None:
            raise RuntimeError(f"check-bench failed (rc {rc}); see {logs}/{name}.log")
        entry = {"command": shlex.join(cmd), "rc": rc, "seconds": round(seconds, 1), "report": data}
        if name == "soak":
            results["soak"] = entry
        else:
            results["detect"].append(entry)
    return results


def summarize_check(results):
    lines = []
    for d in results["detect"]:
        r = d["report"]
        sign = next(b for b in r["bits"] if b["bit"] == 31)
        lines.append(f"{r['kernel']:7} sign flips caught " + ", ".join(
            f"{s['caught']}/{s['tried']} at {s['size']}^3" for s in sign["sizes"])
            + f"; clean results failing {r['false_positives']}")
    s = results["soak"]["report"]
    lines.append(f"soak: {s['jobs']:,} checked jobs, {s['false_positives']} false positives")
    return lines


BATCHING_CASES = [
    # name, server flags, serve-bench flags
    {"name": "s1-batching-on", "server": ["--streams-per-device", "1", "--max-batch-size", "64",
                                          "--max-queue-delay-us", "500"],
     "bench": ["--mode", "batching", "--size", "128", "--streams", "64", "--seconds", "8"]},
    {"name": "s1-batching-off", "server": ["--streams-per-device", "1", "--max-batch-size", "1"],
     "bench": ["--mode", "batching", "--size", "128", "--streams", "64", "--seconds", "8"]},
    {"name": "batching-on", "server": ["--max-batch-size", "64", "--max-queue-delay-us", "500"],
     "bench": ["--mode", "batching", "--size", "128", "--streams", "64", "--seconds", "8"]},
    {"name": "batching-off", "server": ["--max-batch-size", "1"],
     "bench": ["--mode", "batching", "--size", "128", "--streams", "64", "--seconds", "8"]},
    {"name": "single-4096", "server": ["--max-message-bytes", "268435456"],
     "bench": ["--mode", "single", "--size", "4096", "--reps", "4"]},
]


def scenario_batching(env):
    """serve-bench against gemm-server: batching on and off, one 4096^3 job's breakdown."""
    logs = env.logs("batching")
    cases = selected(BATCHING_CASES, env.args.cases)
    if env.smoke:
        cases = [{"name": "smoke-on", "server": ["--max-batch-size", "8", "--max-queue-delay-us", "200"],
                  "bench": ["--mode", "batching", "--size", "64", "--streams", "4", "--seconds", "1"]}]
    results = []
    for case in cases:
        out = os.path.join(logs, f"{case['name']}.json")
        with Server(env, case["server"], os.path.join(logs, f"server-{case['name']}.log")) as server:
            cmd = [env.program("serve-bench"), "--target", server.address, "--out", out] + case["bench"]
            rc, seconds, _, _ = run_program(cmd, os.path.join(logs, f"bench-{case['name']}.log"), 120)
        entry = {"name": case["name"], "server_flags": server.cmd[1:], "command": shlex.join(cmd),
                 "rc": rc, "server_exit": server.exit_code}
        if os.path.exists(out):
            entry["report"] = read_json(out)
        results.append(entry)
    return {"cases": results}


def summarize_batching(results):
    lines = []
    for c in results["cases"]:
        r = c.get("report")
        if r is None:
            lines.append(f"{c['name']:16} failed (rc {c['rc']})")
        elif r.get("mode") == "batching":
            lines.append(f"{c['name']:16} batch {r['mean_batch_size']:5.1f}  GPU-side jobs/s "
                         f"{r['gpu_jobs_per_s']:9.0f}  end-to-end req/s {r['requests_per_s']:8.0f}  "
                         f"p99 {r['latency_ms']['p99']:.1f} ms")
        else:
            warm = r["runs"][1:] or r["runs"]
            lines.append(f"{c['name']:16} server {min(x['server_ms'] for x in warm):.2f} ms, compute "
                         f"{min(x['compute_ms'] for x in warm):.2f} ms, client "
                         f"{min(x['client_ms'] for x in warm):.1f} ms (best warm run)")
    return lines


# numpy's float32 matmul with the host's own BLAS, and with libgemm_blas.so
# preloaded so that the product goes to gemm-server on the same host.
BLAS_MATMUL = r"""
import json, sys, time
import numpy as np
n, reps = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(5)
a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
b = rng.uniform(-1, 1, (n, n)).astype(np.float32)
c = a @ b  # warm-up: the first call opens the channel or spins up the threads
times = []
for _ in range(reps):
    start = time.perf_counter()
    c = a @ b
    times.append((time.perf_counter() - start) * 1e3)
check = a[:64].astype(np.float64) @ b.astype(np.float64)
err = float(np.linalg.norm(c[:64] - check) / np.linalg.norm(check))
print(json.dumps({"n": n, "ms": sorted(times), "rel_error_first_64_rows": err,
                  "numpy": np.__version__}))
"""


def scenario_blas(env):
    """numpy float32 n^3 matmul: the host's BLAS against libgemm_blas.so and gemm-server."""
    logs = env.logs("blas")
    dropin = env.program("libgemm_blas.so")
    script = os.path.join(logs, "matmul.py")
    with open(script, "w") as f:
        f.write(BLAS_MATMUL)
    sizes, reps = ([256], 2) if env.smoke else ([1024, 4096, 8192], 5)
    results = []

    def jobs_ok(server):
        """The server's count of jobs answered OK: proof that the calls went there."""
        info = subprocess.run([env.program("gemm-client"), "info", "-s", server.address],
                              capture_output=True, text=True, check=True).stdout
        return int(re.search(r"jobs ok (\d+)", info).group(1))

    with Server(env, [], os.path.join(logs, "server.log")) as server:
        for n in sizes:
            for way in ("host BLAS", "gemm-server"):
                before = jobs_ok(server)
                environ = dict(os.environ)
                if way == "gemm-server":
                    environ.update(LD_PRELOAD=dropin, GEMM_BLAS_SERVER=server.address,
                                   GEMM_BLAS_MIN_SIZE="0")
                log = os.path.join(logs, f"{way.replace(' ', '-')}-{n}.log")
                cmd = [sys.executable, script, str(n), str(reps)]
                rc, _, _, _ = run_program(cmd, log, 600, env=environ)
                with open(log) as f:
                    lines = [l for l in f.read().splitlines() if l.startswith("{")]
                report = json.loads(lines[-1]) if rc == 0 and lines else None
                results.append({"n": n, "way": way, "rc": rc, "report": report,
                                "server_jobs": jobs_ok(server) - before,
                                "command": shlex.join(cmd)})
    return {"runs": results, "cpus": os.cpu_count()}


def summarize_blas(results):
    lines = [f"{'n':>6} {'way':12} {'median ms':>10} {'TFLOP/s':>8} {'rel err':>9} {'server jobs':>11}"]
    for r in results["runs"]:
        if r["report"] is None:
            lines.append(f"{r['n']:>6} {r['way']:12} failed (rc {r['rc']})")
            continue
        ms = r["report"]["ms"][len(r["report"]["ms"]) // 2]
        lines.append(f"{r['n']:>6} {r['way']:12} {ms:10.2f} "
                     f"{2 * r['n'] ** 3 / ms / 1e9:8.2f} {r['report']['rel_error_first_64_rows']:9.2e} "
                     f"{r['server_jobs']:11d}")
    return lines


def scenario_tcp(env):
    """bench/tcp_blast.py: what plain TCP connections carry over loopback (the yardstick)."""
    logs = env.logs("tcp")
    cases = [{"name": "tcp1", "connections": 1}] if env.smoke else selected(
        [{"name": f"tcp{n}", "connections": n} for n in (1, 4, 8)], env.args.cases)
    seconds = "0.5" if env.smoke else "3"
    results = []
    for case in cases:
        out = os.path.join(logs, f"{case['name']}.json")
        cmd = [sys.executable, os.path.join(HERE, "tcp_blast.py"), "--connections",
               str(case["connections"]), "--seconds", seconds, "--out", out]
        rc, _, _, _ = run_program(cmd, os.path.join(logs, f"{case['name']}.log"), 60)
        entry = {"name": case["name"], "command": shlex.join(cmd), "rc": rc}
        if os.path.exists(out):
            entry["report"] = read_json(out)
        results.append(entry)
    return {"cases": results}


def summarize_tcp(results):
    return [f"{c['name']:6} " + (f"{c['report']['aggregate_bytes_per_s'] / 1e9:.2f} GB/s over "
                                 f"{c['report']['connections']} connection(s)" if "report" in c else
                                 f"failed (rc {c['rc']})") for c in results["cases"]]


GPU_SUITES = ["sgemm_gpu_test", "cuda_executor_test", "gpu_integration_test",
              "gpu_fault_test", "gpu_result_check_test", "gpu_region_test"]


def scenario_suites(env):
    """The GPU test programs; pass or fail each."""
    env.need_gpu()
    logs = env.logs("suites")
    child_env = dict(os.environ, GEMM_SERVER_BINARY=env.program("gemm-server"),
                     TEST_TMPDIR=tempfile.mkdtemp(dir=env.work))
    try:
        child_env["GEMM_SERVER_WITH_FAULTS_BINARY"] = env.program("gemm-server-with-faults")
    except SkipScenario:
        pass  # a bundle without it: gpu_fault_test fails, saying so
    results = []
    for name in selected([{"name": n} for n in GPU_SUITES], env.args.cases):
        name = name["name"]
        log = os.path.join(logs, f"{name}.log")
        rc, seconds, _, _ = run_program([env.program(name)], log, 300, env=child_env)
        with open(log, errors="replace") as f:
            text = f.read()
        count = lambda word: sum(int(n) for n in re.findall(rf"^\[  {word} *\] (\d+) tests?", text, re.M))
        results.append({"name": name, "rc": rc, "seconds": round(seconds, 1),
                        "passed": count("PASSED"), "failed": count("FAILED"),
                        "skipped": count("SKIPPED"),
                        "verdict": "pass" if rc == 0 and count("SKIPPED") == 0 else
                                   ("skipped" if rc == 0 else "fail")})
    return {"suites": results}


def summarize_suites(results):
    return [f"{s['name']:22} {s['verdict']:7} passed {s['passed']}, failed {s['failed']}, "
            f"skipped {s['skipped']} ({s['seconds']} s)" for s in results["suites"]]


# name -> (run, summarize); "all" runs them in this order.
SCENARIOS = {
    "suites": (scenario_suites, summarize_suites),
    "kernels": (scenario_kernels, summarize_kernels),
    "dispatch": (scenario_dispatch, summarize_dispatch),
    "batching": (scenario_batching, summarize_batching),
    "e2e": (scenario_e2e, summarize_e2e),
    "tls": (scenario_tls, summarize_tls),
    "blas": (scenario_blas, summarize_blas),
    "tcp": (scenario_tcp, summarize_tcp),
    "soak": (scenario_soak, summarize_soak),
    "abft": (scenario_abft, summarize_abft),
    "check": (scenario_check, summarize_check),
    "regions": (scenario_regions, summarize_regions),
}
