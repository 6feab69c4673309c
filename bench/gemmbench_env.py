"""gemmbench_env: where gemmbench.py finds programs, and how it runs them.

The environment of a run (programs, output folder, GPUs, commit), one
program run with its resource usage, and Server: one gemm-server on a free
loopback port, started, waited for through --port-file, and stopped.
"""

import datetime
import json
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import time

SCHEMA_VERSION = 1
HERE = os.path.dirname(os.path.abspath(__file__))

# Where each program is under bazel-bin/ (in a bundle they all sit in bin/).
BAZEL_BIN_PATHS = {
    "gemm-server": "server/gemm-server",
    "gemm-client": "client/gemm-client",
    "libgemm_blas.so": "client/blas/libgemm_blas.so",
    "serve-bench": "bench/serve-bench",
    "dispatch-bench": "bench/dispatch-bench",
    "gemm-bench": "kernels/gemm-bench",
    "sgemm_gpu_test": "kernels/sgemm_gpu_test",
    "cuda_executor_test": "server/cuda_executor_test",
    "gpu_integration_test": "tests/gpu_integration_test",
    "gpu_fault_test": "tests/gpu_fault_test",
    "gemm-server-with-faults": "tests/gemm-server-with-faults",
}


class SkipScenario(Exception):
    """The scenario cannot run here (no GPU, a program missing); no report."""


# ---------------------------------------------------------------- environment


class Environment:
    """Where the programs are, where output goes, and what this host is."""

    def __init__(self, args):
        self.bin_dir = args.bin_dir or default_bin_dir()
        self.out = os.path.abspath(args.out)
        self.backend = args.backend
        self.smoke = args.smoke
        self.args = args
        self.work = tempfile.mkdtemp(prefix="gemmbench-")
        self.dispatch_cache = os.path.join(self.work, "dispatch.tsv")
        self.gpus = query_gpus()
        if self.backend == "auto":
            self.backend = "cuda" if self.gpus else "cpu"

    def program(self, name):
        if self.bin_dir:
            path = os.path.join(self.bin_dir, name)
        else:
            path = os.path.join(repo_root(), "bazel-bin", BAZEL_BIN_PATHS[name])
        if not os.access(path, os.X_OK):
            raise SkipScenario(f"{name} not found at {path}")
        return path

    def logs(self, scenario):
        d = os.path.join(self.out, "logs", scenario)
        os.makedirs(d, exist_ok=True)
        return d

    def need_gpu(self):
        if not self.gpus:
            raise SkipScenario("needs a GPU (nvidia-smi found none)")


def repo_root():
    return os.path.dirname(HERE)


def default_bin_dir():
    """The bundle's bin/ when this script is in it; None: the bazel-bin tree."""
    if os.path.exists(os.path.join(HERE, "gemm-server")):
        return HERE
    return None


def query_gpus():
    if not shutil.which("nvidia-smi"):
        return []
    fields = "index,name,memory.total,driver_version,clocks.sm,clocks.max.sm"
    try:
        text = subprocess.run(
            ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=30, check=True).stdout
    except (subprocess.SubprocessError, OSError):
        return []
    gpus = []
    for line in text.strip().splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != 6:
            continue
        gpus.append({"index": int(cells[0]), "name": cells[1],
                     "memory_total_mib": int(cells[2]), "driver": cells[3],
                     "sm_clock_mhz": cells[4], "max_sm_clock_mhz": cells[5]})
    return gpus


def commit_id(env):
    """The bundle's COMMIT file, else git's HEAD (with -dirty)."""
    for d in filter(None, [env.bin_dir, HERE]):
        path = os.path.join(os.path.dirname(os.path.abspath(d)), "COMMIT")
        if os.path.exists(path):
            with open(path) as f:
                return f.read().strip()
    try:
        head = subprocess.run(["git", "-C", HERE, "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", HERE, "diff", "--quiet", "HEAD", "--"]).returncode
        return head + ("-dirty" if dirty else "")
    except (subprocess.SubprocessError, OSError):
        return "unknown"


def now_utc():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# ------------------------------------------------------------ processes


def read_json(path):
    """The JSON a program wrote, or None where it wrote none."""
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def run_program(cmd, log_path, timeout_s, env=None):
    """Runs cmd with output into log_path; returns (rc, seconds, user_s, sys_s)."""
    start = time.monotonic()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)
        deadline = start + timeout_s
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                proc.returncode = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                _, status, usage = os.wait4(proc.pid, 0)
                proc.returncode = 124
                log.write(f"\ngemmbench: killed after {timeout_s} s\n")
                break
            time.sleep(0.02)
    return proc.returncode, time.monotonic() - start, usage.ru_utime, usage.ru_stime


class Server:
    """One gemm-server on a free loopback port: started, waited for, stopped.

        with Server(env, flags, log) as server:
            ... server.address, server.cpu_seconds(), server.memory_kb("VmRSS")
    """

    def __init__(self, env, flags, log_path):
        self.env = env
        self.cmd = [env.program("gemm-server"), "--listen", "127.0.0.1:0",
                    "--backend", env.backend]
        if env.backend == "cuda":
            self.cmd += ["--dispatch-cache", env.dispatch_cache]
        self.cmd += list(flags) + list(env.args.server_flags)
        self.log_path = log_path
        self.proc = None
        self.address = None
        self.exit_code = None

    def __enter__(self):
        port_file = os.path.join(self.env.work, "port")
        if os.path.exists(port_file):
            os.remove(port_file)
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.cmd + ["--port-file", port_file],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120  # calibration on a cold GPU included
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gemm-server exited with {self.proc.returncode} "
                                   f"at start; see {self.log_path}")
            if os.path.exists(port_file) and os.path.getsize(port_file) > 0:
                with open(port_file) as f:
                    port = f.read().strip()
                if port:
                    self.address = f"127.0.0.1:{port}"
                    return self
            time.sleep(0.05)
        self.proc.kill()
        raise RuntimeError(f"gemm-server did not listen within 120 s; see {self.log_path}")

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)  # longer than --shutdown-grace-s
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.exit_code = self.proc.returncode
        self.log.close()
        return False

    def cpu_seconds(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def memory_kb(self, key):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
        return 0


def load(env, server, name, flags, logs, timeout_s=120):
    """gemm-client load against server; returns (report, client rusage)."""
    json_path = os.path.join(logs, f"{name}.json")
    cmd = [env.program("gemm-client"), "load", "--server", server.address, "-q",
           "--json", json_path] + list(flags) + list(env.args.client_flags)
    rc, seconds, user_s, sys_s = run_program(cmd, os.path.join(logs, f"client-{name}.log"),
                                             timeout_s)
    report = read_json(json_path)
    if report:
        report.pop("histogram", None)  # per-bucket counts: large, and in the log
    return report, {"rc": rc, "command": shlex.join(cmd), "wall_s": round(seconds, 3),
                    "user_s": round(user_s, 3), "sys_s": round(sys_s, 3)}


def selected(cases, wanted):
    """The cases named in --cases; all of them when --cases names none of these."""
    mine = [c for c in cases if c["name"] in wanted]
    return mine or cases
