"""What a running process does, from /proc: resident memory (whole, and by
mapping), threads' CPU time, open descriptors, and a Sampler thread that
records them while an attack runs.
"""

import os
import threading
import time


def read_proc_status(pid):
    out = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM"):
                    out[k] = int(v.split()[0]) * 1024
                elif k == "Threads":
                    out[k] = int(v)
    except (OSError, ValueError):
        pass
    return out


def rss_by_mapping(pid, top=8):
    """The process's resident memory by mapping kind (/proc/PID/smaps), in
    MiB, the largest first: [heap], anonymous mappings, each file (a
    driver's device file, a library), so that memory that stays after an
    attack can be told apart."""
    totals = {}
    name = None
    try:
        with open("/proc/%d/smaps" % pid) as f:
            for line in f:
                fields = line.split()
                if not fields:
                    continue
                if "-" in fields[0] and not fields[0].endswith(":"):
                    name = fields[5] if len(fields) > 5 else "[anon]"
                    start, _, end = fields[0].partition("-")
                    # glibc's thread arenas grow in heaps of up to 64 MiB,
                    # each 64 MiB aligned.
                    lo, hi = int(start, 16), int(end, 16)
                    if (name == "[anon]" and lo % (64 << 20) == 0 and
                            hi - lo <= 64 << 20):
                        name = "[anon: 64 MiB heaps, malloc arenas]"
                elif fields[0] == "Rss:" and name is not None:
                    totals[name] = totals.get(name, 0) + int(fields[1])
    except (OSError, ValueError, IndexError):
        return {}
    ranked = sorted(totals.items(), key=lambda kv: -kv[1])[:top]
    return {k: round(v / 1024.0, 1) for k, v in ranked if v >= 1024}


def thread_cpu(pid):
    """{thread name: CPU seconds} of a process's threads, summed by name."""
    out = {}
    tick = os.sysconf("SC_CLK_TCK")
    try:
        tasks = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return out
    for tid in tasks:
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                stat = f.read()
        except OSError:
            continue
        # "tid (name) state ..."; the name may hold spaces and parentheses.
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) +
                                          int(fields[12])) / tick
    return out


def cpu_between(before, after, top=8):
    """CPU seconds each thread name used between two thread_cpu()s."""
    used = {k: after[k] - before.get(k, 0.0) for k in after}
    busiest = sorted(used.items(), key=lambda kv: -kv[1])[:top]
    return {"total_s": round(sum(used.values()), 2),
            "busiest_threads_s": {k: round(v, 2) for k, v in busiest}}


def count_fds(pid):
    try:
        return len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return None


class Sampler(threading.Thread):
    """VmRSS and threads every 100 ms, open descriptors every 500 ms."""

    def __init__(self, pid, period=0.1):
        super().__init__(daemon=True)
        self.pid, self.period = pid, period
        self.samples = []  # (monotonic time, rss bytes, threads, fds)
        self.stopped = threading.Event()
        self.lock = threading.Lock()

    def run(self):
        fds, n = None, 0
        while not self.stopped.is_set():
            status = read_proc_status(self.pid)
            if "VmRSS" not in status:
                return
            if n % 5 == 0:
                fds = count_fds(self.pid)
            n += 1
            with self.lock:
                self.samples.append((time.monotonic(), status["VmRSS"],
                                     status.get("Threads"), fds))
            self.stopped.wait(self.period)

    def window(self, start, end=None):
        with self.lock:
            return [s for s in self.samples
                    if s[0] >= start and (end is None or s[0] <= end)]

    def last_rss(self):
        with self.lock:
            return self.samples[-1][1] if self.samples else None

    def stop(self):
        self.stopped.set()
