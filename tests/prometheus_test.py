"""A real Prometheus scrapes real gemm-server replicas under load.

Starts two gemm-server replicas with their metrics endpoints, and Prometheus
(Debian's prometheus package) on a loopback port with a generated
configuration that scrapes both every second; runs `gemm-client load` with
verification against one target naming both (ipv4:A,B, balanced round
robin, as a Kubernetes headless Service's dns:/// name would be); then asks
Prometheus's HTTP API for the jobs counter summed over the replicas, which
must equal the jobs the client had answered OK, with each replica serving a
share, and checks that it was scraped during the load.

Usage: prometheus_test.py GEMM_SERVER GEMM_CLIENT
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

PROMETHEUS = "/usr/bin/prometheus"
REPLICAS = 2


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_file(path, process, what, timeout_s=20):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if os.path.exists(path):
            with open(path) as f:
                text = f.read().strip()
            if text:
                return int(text)
        if process.poll() is not None:
            sys.exit(f"FAIL: {what} exited with {process.returncode}")
        time.sleep(0.05)
    sys.exit(f"FAIL: {what} did not start within {timeout_s} s")


def get(url, timeout_s=5):
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        return response.status, response.read().decode()


def query(api, promql):
    url = f"{api}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    status, body = get(url)
    answer = json.loads(body)
    if status != 200 or answer.get("status") != "success":
        sys.exit(f"FAIL: query {promql!r}: {status} {body}")
    return answer["data"]["result"]


def scalar(api, promql):
    """The single value of an instant query, or None when it has none."""
    result = query(api, promql)
    if len(result) != 1:
        return None
    return float(result[0]["value"][1])


def main():
    server_bin, client_bin = sys.argv[1:3]
    work = tempfile.mkdtemp(prefix="prometheus-test-",
                            dir=os.environ.get("TEST_TMPDIR"))
    processes = []
    try:
        ports, metrics_ports = [], []
        for replica in range(REPLICAS):
            files = {key: os.path.join(work, f"{key}.{replica}")
                     for key in ("port", "metrics-port", "log")}
            server = subprocess.Popen(
                [server_bin, "--listen", "127.0.0.1:0", "--backend", "cpu",
                 "--port-file", files["port"],
                 "--metrics-listen", "127.0.0.1:0",
                 "--metrics-port-file", files["metrics-port"],
                 "--log-level", "warn", "--drain-delay-s", "0"],
                stdout=open(files["log"], "w"), stderr=subprocess.STDOUT)
            processes.append(server)
            ports.append(wait_for_file(files["port"], server, "gemm-server"))
            metrics_ports.append(wait_for_file(files["metrics-port"], server,
                                               "gemm-server"))

        web_port = free_port()
        config = os.path.join(work, "prometheus.yml")
        with open(config, "w") as f:
            f.write(
                "global:\n"
                "  scrape_interval: 1s\n"
                "  scrape_timeout: 1s\n"
                "scrape_configs:\n"
                "  - job_name: gemm\n"
                "    static_configs:\n"
                "      - targets: [" +
                ", ".join(f"'127.0.0.1:{p}'" for p in metrics_ports) + "]\n")
        prometheus_log = open(os.path.join(work, "prometheus.log"), "w")
        prometheus = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}",
             f"--storage.tsdb.path={os.path.join(work, 'data')}",
             f"--web.listen-address=127.0.0.1:{web_port}",
             "--log.level=warn"],
            stdout=prometheus_log, stderr=subprocess.STDOUT)
        processes.append(prometheus)
        api = f"http://127.0.0.1:{web_port}"
        deadline = time.time() + 30
        while True:
            try:
                if get(f"{api}/-/ready")[0] == 200:
                    break
            except OSError:
                pass
            if prometheus.poll() is not None or time.time() > deadline:
                sys.exit("FAIL: Prometheus did not become ready:\n" +
                         open(os.path.join(work, "prometheus.log")).read())
            time.sleep(0.2)

        # Prometheus picks up new targets every 5 s: the load starts once the
        # replicas have been scraped.
        deadline = time.time() + 30
        while scalar(api, 'sum(up{job="gemm"})') != REPLICAS:
            if time.time() > deadline:
                sys.exit("FAIL: Prometheus did not scrape gemm-server within "
                         "30 s:\n" +
                         open(os.path.join(work, "prometheus.log")).read())
            time.sleep(0.2)

        # Load for 4 s: several scrapes land while it runs.
        report = os.path.join(work, "load.json")
        subprocess.run(
            [client_bin, "load", "-s",
             "ipv4:" + ",".join(f"127.0.0.1:{p}" for p in ports), "-d", "4",
             "--warmup-s", "0", "-c", "8", "--connections", "2",
             "--shapes", "64x64x64,33x17x5", "--unary-share", "0.25",
             "--verify-every", "50", "-q", "--json", report],
            check=True, stdout=subprocess.DEVNULL)
        with open(report) as f:
            load = json.load(f)
        sent_ok = load["answered_ok"]
        if sent_ok <= 0 or load["errors"] != 0 or load["verify_failures"] != 0:
            sys.exit(f"FAIL: the load itself failed: {load['errors']} errors, "
                     f"{load['verify_failures']} wrong results")

        # Prometheus has it once a scrape after the load is stored.
        counter = 'sum(gemm_jobs_total{job="gemm",outcome="ok"})'
        deadline = time.time() + 30
        seen = None
        while time.time() < deadline:
            seen = scalar(api, counter)
            if seen == sent_ok:
                break
            time.sleep(0.5)
        if seen != sent_ok:
            sys.exit(f"FAIL: Prometheus has {seen} jobs ok, the client had "
                     f"{sent_ok} answered OK")
        up = scalar(api, 'sum(up{job="gemm"})')
        if up != REPLICAS:
            sys.exit(f"FAIL: {up} of {REPLICAS} replicas up")
        # Each replica served a share: the client balanced over both.
        shares = query(api, 'sum by (instance) '
                            '(gemm_jobs_total{job="gemm",outcome="ok"})')
        per_replica = sorted(float(r["value"][1]) for r in shares)
        if len(per_replica) != REPLICAS or per_replica[0] < 0.2 * sent_ok:
            sys.exit(f"FAIL: jobs by replica {per_replica} of {sent_ok}: "
                     "not balanced")
        # Scraped while the load ran: the counter changed between scrapes
        # more than once (0, values during the load, the final count).
        changes = scalar(
            api, 'min(changes(gemm_jobs_total{job="gemm",outcome="ok"}[1m]))')
        if changes is None or changes < 2:
            sys.exit(f"FAIL: the counter changed {changes} times between "
                     "scrapes: not scraped during the load")
        p99 = scalar(api, 'histogram_quantile(0.99, sum by (le) '
                     '(gemm_job_server_seconds_bucket{job="gemm"}))')
        if p99 is None or not p99 > 0:
            sys.exit(f"FAIL: no p99 of the server time from the histogram: {p99}")
        print(f"PASS: jobs ok in Prometheus {seen:.0f} = the client's "
              f"{sent_ok}, by replica {per_replica}; each counter changed at "
              f"least {changes:.0f} times between scrapes; server-time p99 "
              f"{p99 * 1e3:.2f} ms")
    finally:
        for process in processes:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
        if os.environ.get("KEEP_WORK") is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
