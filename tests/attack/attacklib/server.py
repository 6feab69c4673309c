"""gemm-server started on a free port (ServerProcess), and the priority it,
the victim and the probes run at when the attacks are niced.
"""

import collections
import os
import resource
import signal
import subprocess
import time
import urllib.request


# The priority gemm-server, the victim and the probes run at: this process's
# own before --attacker-nice lowered it.
CHILD_NICE = None


def child_priority():
    """preexec_fn: a child started by a niced attacker runs at the
    priority the attacker started with (raising it back needs
    CAP_SYS_NICE, which --attacker-nice checks first)."""
    if CHILD_NICE is not None:
        os.setpriority(os.PRIO_PROCESS, 0, CHILD_NICE)


def lower_own_priority(nice):
    """--attacker-nice: the attacks (this process's threads) yield the CPU
    to gemm-server and the victim, as an attacker on a machine of its own
    would. Only this process is lowered; its children are not."""
    global CHILD_NICE
    if not nice:
        return
    start = os.getpriority(os.PRIO_PROCESS, 0)
    os.setpriority(os.PRIO_PROCESS, 0, min(19, start + nice))
    try:
        os.setpriority(os.PRIO_PROCESS, 0, start)
    except PermissionError:
        raise SystemExit("--attacker-nice: cannot start gemm-server and the "
                         "victim at the priority this process started with "
                         "(it needs CAP_SYS_NICE, or root)")
    os.setpriority(os.PRIO_PROCESS, 0, min(19, start + nice))
    CHILD_NICE = start


def raise_own_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


class ServerProcess:
    """gemm-server on a free port, its output in a log file."""

    def __init__(self, binary, flags, workdir, name, nofile=None):
        self.port_file = os.path.join(workdir, name + ".port")
        self.log_path = os.path.join(workdir, name + ".log")
        self.metrics_port_file = os.path.join(workdir, name + ".metrics-port")
        # Its metrics, scraped halfway through the attack: what the jobs
        # were waiting on when a victim stalls.
        self.argv = [binary, "--listen", "[::]:0", "--port-file",
                     self.port_file, "--metrics-listen", "127.0.0.1:0",
                     "--metrics-port-file", self.metrics_port_file] + flags
        self.nofile = nofile
        self.proc = None
        self.port = None
        self.log = None

    def start(self, timeout=30.0):
        nofile = self.nofile

        def limit():
            child_priority()
            if nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.argv, stdout=self.log,
                                     stderr=subprocess.STDOUT,
                                     preexec_fn=limit, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("gemm-server exited with %s: %s" % (
                    self.proc.returncode, self.log_tail()))
            try:
                with open(self.port_file) as f:
                    text = f.read().strip()
                if text:
                    self.port = int(text)
                    return self.port
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("gemm-server wrote no port in %s s" % timeout)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def gauges(self, timeout=5.0):
        """The server's gemm_ series but histograms', {series: value}."""
        try:
            with open(self.metrics_port_file) as f:
                port = int(f.read().strip())
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port,
                                        timeout=timeout) as r:
                text = r.read().decode()
        except (OSError, ValueError) as e:
            return {"error": "%s: %s" % (type(e).__name__, e)}
        out = {}
        for line in text.splitlines():
            if not line.startswith("gemm_") or "_bucket{" in line:
                continue
            series, _, value = line.rpartition(" ")
            if series.endswith(("_sum", "_count")) or "_sum{" in series \
                    or "_count{" in series:
                continue
            try:
                out[series] = float(value)
            except ValueError:
                pass
        return out

    def dump_stacks(self, path):
        """Every thread's stack (gdb), to `path`; the error, if any."""
        try:
            r = subprocess.run(["gdb", "-p", str(self.proc.pid), "-batch",
                                "-ex", "thread apply all bt"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               timeout=120, check=False)
            with open(path, "wb") as f:
                f.write(r.stdout)
            return None
        except (OSError, subprocess.TimeoutExpired) as e:
            return "%s: %s" % (type(e).__name__, e)

    def log_bytes(self):
        try:
            return os.path.getsize(self.log_path)
        except OSError:
            return 0

    def log_tail(self, lines=5):
        try:
            with open(self.log_path, "rb") as f:
                f.seek(max(0, os.path.getsize(self.log_path) - 4096))
                text = f.read().decode("utf-8", "replace")
            return text.strip().splitlines()[-lines:]
        except OSError:
            return []

    def log_line_kinds(self, start_offset, limit=8):
        """The most frequent lines written after start_offset (numbers
        blanked), to say what the log filled up with."""
        kinds = collections.Counter()
        try:
            with open(self.log_path, "rb") as f:
                f.seek(start_offset)
                for line in f:
                    text = line.decode("utf-8", "replace").strip()
                    # Drop the timestamp and level spdlog puts first.
                    text = text.split("] ", 2)[-1]
                    kinds["".join("#" if c.isdigit() else c
                                  for c in text)[:160]] += 1
        except OSError:
            pass
        return [{"count": n, "line": t} for t, n in kinds.most_common(limit)]

    def stop(self, grace_s=15.0):
        """SIGTERM, then SIGKILL after grace_s: (exit code, how it ended)."""
        if self.proc.poll() is not None:
            return self.proc.returncode, "had exited"
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(grace_s)
            how = "SIGTERM"
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            how = "SIGKILL after %s s" % grace_s
        self.log.close()
        return self.proc.returncode, how
