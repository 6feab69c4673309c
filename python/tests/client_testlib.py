"""What the tests of the Python client (gemm_client) share: gemm-server
processes, and jobs whose results are checked against numpy in float64.

Every result is compared with numpy in float64 (relative Frobenius error at
most 1e-5); inputs are never 0 and C is NaN wherever beta is 0, so a result
that was not computed, or that read C when it must not, cannot pass.

The test files (test_*.py) are run as GEMM_SERVER GEMM_PROTO: importing
this module reads them from sys.argv.
"""

import os
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

SERVER, PROTO = (os.path.abspath(path) for path in sys.argv[1:3])
TMP = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))


class ServerProcess:
    """A gemm-server on a free loopback port, CPU backend."""

    def __init__(self, name, *flags):
        port_file = os.path.join(TMP, name + ".port")
        self.process = subprocess.Popen(
            [SERVER, "--listen", "127.0.0.1:0", "--port-file", port_file,
             "--backend", "cpu", "--log-level", "warn", "--drain-delay-s",
             "0", *flags])
        for _ in range(600):
            if port := read_text(port_file):
                break
            if self.process.poll() is not None:
                raise RuntimeError(f"gemm-server {flags} exited early")
            time.sleep(0.05)
        self.address = "127.0.0.1:" + port

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        assert self.process.wait(timeout=60) == 0


def read_text(path):
    """The file's text, stripped; "" while it does not exist."""
    try:
        with open(path) as file:
            return file.read().strip()
    except FileNotFoundError:
        return ""


def operand(rng, shape):
    """Uniform in +-[0.5, 1.5): never 0, so nothing cancels to 0 by luck."""
    values = rng.uniform(0.5, 1.5, shape) * rng.choice([-1, 1], shape)
    return values.astype(np.float32)


def reference(a, b, c, alpha, beta, trans_a, trans_b):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = alpha * ((a64.T if trans_a else a64) @ (b64.T if trans_b else b64))
    return want + beta * c.astype(np.float64) if beta else want


class Case:
    """A job and what it must give: a (m x k, or k x m with trans_a) and b
    (k x n, or n x k with trans_b); C is NaN when beta is 0."""

    def __init__(self, rng, m, n, k, alpha=1.0, beta=0.0, trans_a=False,
                 trans_b=False):
        self.a = operand(rng, (k, m) if trans_a else (m, k))
        self.b = operand(rng, (n, k) if trans_b else (k, n))
        self.c = operand(rng, (m, n)) if beta else np.full((m, n), np.nan,
                                                           np.float32)
        self.kwargs = dict(alpha=alpha, beta=beta, trans_a=trans_a,
                           trans_b=trans_b)
        self.want = reference(self.a, self.b, self.c, alpha, beta, trans_a,
                              trans_b)

    def run(self, submit, **extra):
        """submit(a, b, c, **kwargs): gemm, gemm_async or a stream's."""
        return submit(self.a, self.b, self.c, **self.kwargs, **extra)

    def check(self, test, result):
        test.assertEqual(result.c.dtype, np.float32)
        test.assertEqual(result.c.shape, self.want.shape)
        error = (np.linalg.norm(result.c - self.want)
                 / np.linalg.norm(self.want))
        test.assertLessEqual(error, 1e-5, self.kwargs)
        test.assertTrue(result.c.flags.writeable)
