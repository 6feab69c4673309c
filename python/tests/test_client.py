"""The Python client (gemm_client) against real gemm-server processes.

Every result is compared with numpy in float64 (relative Frobenius error at
most 1e-5); inputs are never 0 and C is NaN wherever beta is 0, so a result
that was not computed, or that read C when it must not, cannot pass. The
server's message limit is 4 MiB, so a job above it works only in chunks.
TLS, mTLS and tokens are tested with certificates made by openssl here.

Usage: test_client.py GEMM_SERVER GEMM_PROTO (python_client_test.sh runs it
on the installed package).
"""

import filecmp
import itertools
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import grpc
import numpy as np

import gemm_client
from gemm_client import GemmClient, GemmError

SERVER, PROTO = (os.path.abspath(path) for path in sys.argv[1:3])
TMP = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
MAX_MESSAGE_BYTES = 4 << 20


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


class ClientTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.server = ServerProcess(
            "plain", "--max-message-bytes", str(MAX_MESSAGE_BYTES))
        cls.client = GemmClient(cls.server.address, timeout=120)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.server.stop()

    def setUp(self):
        self.rng = np.random.default_rng(abs(hash(self.id())) % (1 << 32))

    def test_odd_shapes(self):
        # 1000x999x777 (10 MB) exceeds max_unary_bytes: a stream of chunks.
        for m, n, k in ((33, 17, 5), (1, 1, 1), (1000, 999, 777)):
            case = Case(self.rng, m, n, k)
            case.check(self, case.run(self.client.gemm))

    def test_operands_and_result_in_a_shared_memory_region(self):
        # Every mix of A, B, C and the result in the region or the request,
        # unary, and a large job (over max_unary_bytes in the request) on
        # the stream; the result region is NaN until the server writes it.
        region = gemm_client.SharedRegion(4 << 20, name="py-work")
        info = self.client.register_region(region)
        self.assertEqual((info.kind, info.byte_size), ("system", 4 << 20))
        self.assertEqual([r.name for r in self.client.list_regions()],
                         ["py-work"])
        try:
            for mask, (m, n, k) in itertools.product(
                    range(16), ((33, 17, 9), (700, 300, 600))):
                if m == 700 and mask not in (3, 8, 15):
                    continue
                case = Case(self.rng, m, n, k, alpha=1.5, beta=-0.5,
                            trans_b=mask % 3 == 0)
                args, offset = [], 0
                for bit, matrix in enumerate((case.a, case.b, case.c)):
                    if mask >> bit & 1:
                        region.array(offset, matrix.shape)[:] = matrix
                        args.append(region.at(offset, matrix.shape))
                        offset += matrix.nbytes + 256
                    else:
                        args.append(matrix)
                out = None
                if mask & 8:
                    region.array(offset, (m, n))[:] = np.nan
                    out = region.at(offset, (m, n))
                result = self.client.gemm(*args, **case.kwargs, out=out)
                case.check(self, result)
                if out is not None:
                    self.assertTrue(np.shares_memory(result.c, region.array(
                        offset, (m, n))), mask)
                del result
            # On a stream too, the result only in the region.
            case = Case(self.rng, 40, 30, 20)
            region.array(0, (40, 30))[:] = np.nan
            with self.client.stream() as stream:
                future = stream.submit(case.a, case.b, **case.kwargs,
                                       out=region.at(0, (40, 30)))
                case.check(self, future.result())
            del future
        finally:
            self.client.unregister_region("py-work")
            region.close()
        self.assertEqual(self.client.list_regions(), [])
        # A region of nothing registered is refused, naming the operand.
        with gemm_client.SharedRegion(4096, name="py-never") as stray:
            with self.assertRaises(GemmError) as refused:
                self.client.gemm(stray.at(0, (4, 4)), np.ones((4, 4)))
            self.assertEqual(refused.exception.code,
                             grpc.StatusCode.INVALID_ARGUMENT)
            self.assertIn("a_region", refused.exception.details)

    def test_k_zero_gives_beta_c(self):
        case = Case(self.rng, 7, 9, 0, beta=0.5)
        case.check(self, case.run(self.client.gemm))

    def test_every_transpose_with_beta(self):
        for trans_a, trans_b in itertools.product((False, True), repeat=2):
            case = Case(self.rng, 37, 23, 51, alpha=1.5, beta=-0.5,
                        trans_a=trans_a, trans_b=trans_b)
            case.check(self, case.run(self.client.gemm))
            with self.client.stream() as stream:
                future = case.run(stream.submit)
            case.check(self, future.result())

    def test_nan_in_c_does_not_leak_when_beta_is_zero(self):
        case = Case(self.rng, 40, 30, 20, alpha=2.0)
        self.assertTrue(np.isnan(case.c).all())
        with self.client.stream() as stream:
            streamed = case.run(stream.submit)
        for result in (case.run(self.client.gemm), streamed.result()):
            self.assertTrue(np.isfinite(result.c).all())
            case.check(self, result)

    def test_large_job_goes_over_the_stream_in_chunks(self):
        # Chunks of 1001 bytes end inside floats; the result (4 MB) comes
        # back in the server's chunks.
        chunked = GemmClient(self.server.address, timeout=120,
                             max_unary_bytes=4096, chunk_bytes=1001)
        for m, n, k in ((64, 48, 40), (1000, 999, 777)):
            case = Case(self.rng, m, n, k, alpha=0.5, beta=2.0)
            case.check(self, case.run(chunked.gemm))
        chunked.close()
        # The server takes no message of 10 MB: only chunks could do it.
        case = Case(self.rng, 1000, 999, 777)
        case.check(self, case.run(self.client.gemm))
        unary_only = GemmClient(self.server.address, max_unary_bytes=1 << 40)
        with self.assertRaises(GemmError) as caught:
            case.run(unary_only.gemm)
        self.assertEqual(caught.exception.code,
                         grpc.StatusCode.RESOURCE_EXHAUSTED)
        unary_only.close()

    def test_200_jobs_in_flight_with_gemm_async(self):
        cases = [self.mixed_case(i) for i in range(200)]
        futures = [case.run(self.client.gemm_async) for case in cases]
        for case, future in zip(cases, futures):
            case.check(self, future.result())

    def test_200_jobs_on_one_stream(self):
        # chunk_bytes 8000: whole-job messages and chunked jobs, inline and
        # chunked results, all mixed on one call.
        client = GemmClient(self.server.address, timeout=120,
                            chunk_bytes=8000)
        cases = [self.mixed_case(i) for i in range(200)]
        with client.stream() as stream:
            futures = [case.run(stream.submit) for case in cases]
        for case, future in zip(cases, futures):
            case.check(self, future.result())
        client.close()

    def mixed_case(self, i):
        return Case(self.rng, 8 + i % 57, 5 + i % 43, 1 + i % 61,
                    alpha=1.0 + i % 3, beta=(0.0, 0.5)[i % 2],
                    trans_a=i % 3 == 0, trans_b=i % 5 == 0)

    def test_unknown_kernel_is_invalid_argument(self):
        case = Case(self.rng, 4, 4, 4)
        with self.assertRaises(GemmError) as caught:
            case.run(self.client.gemm, kernel="no-such-kernel")
        self.assertEqual(caught.exception.code,
                         grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("no-such-kernel", caught.exception.details)
        # On a stream the job fails alone and the stream goes on.
        with self.client.stream() as stream:
            bad = case.run(stream.submit, kernel="no-such-kernel")
            good = case.run(stream.submit)
        self.assertEqual(bad.exception().code,
                         grpc.StatusCode.INVALID_ARGUMENT)
        case.check(self, good.result())

    def test_a_named_kernel_runs_and_is_reported(self):
        kernel = self.client.info().kernels[0]
        case = Case(self.rng, 20, 30, 40)
        result = case.run(self.client.gemm, kernel=kernel)
        case.check(self, result)
        self.assertEqual(result.timing.kernel, kernel)

    def test_a_checked_result_says_so(self):
        case = Case(self.rng, 70, 50, 90)
        with self.client.stream() as stream:
            streamed = case.run(stream.submit, check="abft")
        for result in (case.run(self.client.gemm, check="abft"),
                       streamed.result()):
            case.check(self, result)
            self.assertTrue(result.timing.check.ran)
            self.assertEqual(result.timing.check.mismatches, 0)
            self.assertLessEqual(result.timing.check.worst_ratio, 1.0)
        unchecked = case.run(self.client.gemm, check="off")
        self.assertFalse(unchecked.timing.check.ran)
        self.assertEqual(unchecked.timing.precision, "fp32")
        with self.assertRaises(GemmError) as caught:
            case.run(self.client.gemm, precision="tf32")
        self.assertEqual(caught.exception.code, grpc.StatusCode.UNIMPLEMENTED)
        with self.assertRaises(ValueError):
            case.run(self.client.gemm, precision="fp16")
        with self.assertRaises(ValueError):
            case.run(self.client.gemm, check="sometimes")

    def test_timings(self):
        case = Case(self.rng, 200, 300, 400)
        with self.client.stream() as stream:
            streamed = case.run(stream.submit)
        for result in (case.run(self.client.gemm), streamed.result()):
            timing = result.timing
            self.assertGreater(timing.server_ms, 0)
            self.assertGreater(timing.compute_ms, 0)
            self.assertGreaterEqual(timing.queue_ms, 0)
            self.assertGreaterEqual(timing.server_ms, timing.compute_ms)
            self.assertGreaterEqual(timing.batch_size, 1)
            self.assertEqual((timing.h2d_ms, timing.d2h_ms), (0, 0))  # CPU
            self.assertEqual(timing.kernel, "cpu")
            self.assertEqual(timing.device, "cpu")
            self.assertGreater(timing.gflops, 0)
            self.assertGreater(result.client_ms, timing.server_ms)

    def test_info_and_health(self):
        info = self.client.info()
        self.assertTrue(info.version)
        self.assertEqual(info.backend, "cpu")
        self.assertIn("cpu", info.kernels)
        self.assertEqual(info.limits.max_message_bytes, MAX_MESSAGE_BYTES)
        self.assertEqual(self.client.health(), "SERVING")
        self.assertEqual(self.client.health("gemm.v1.GemmService"), "SERVING")
        with self.assertRaises(GemmError) as caught:
            self.client.health("no.such.Service")
        self.assertEqual(caught.exception.code, grpc.StatusCode.NOT_FOUND)

    def test_bad_shapes_are_value_errors_before_sending(self):
        ones = np.ones
        bad = [
            ((ones((3, 4)), ones((5, 6))), {}, "inner dimensions"),
            ((ones((3, 4)), ones((6, 5))), {"trans_b": True}, "inner"),
            ((ones(4), ones((4, 2))), {}, "2-D"),
            ((ones((3, 4)), ones((4, 2))), {"beta": 1.0}, "c is needed"),
            ((ones((3, 4)), ones((4, 2)), ones((2, 3))), {"beta": 1.0},
             "c must be 3x2"),
            ((ones((0, 4)), ones((4, 2))), {}, "at least 1"),
        ]
        for args, kwargs, message in bad:
            with self.assertRaisesRegex(ValueError, message):
                self.client.gemm(*args, **kwargs)
            with self.client.stream() as stream:
                with self.assertRaisesRegex(ValueError, message):
                    stream.submit(*args, **kwargs)

    def test_array_likes_and_other_dtypes(self):
        a = [[1, 2], [3, 4]]  # lists of ints
        b = np.array([[1.0, 0.0], [0.0, 1.0]])  # float64
        result = self.client.gemm(a, np.asfortranarray(b))
        np.testing.assert_array_equal(result.c, [[1, 2], [3, 4]])

    def test_a_stream_past_its_deadline_fails_its_jobs(self):
        client = GemmClient(self.server.address, timeout=0.5)
        stream = client.stream()
        time.sleep(1.0)
        case = Case(self.rng, 4, 4, 4)
        late = case.run(stream.submit)
        self.assertEqual(late.exception(timeout=10).code,
                         grpc.StatusCode.DEADLINE_EXCEEDED)
        with self.assertRaises(GemmError) as caught:
            stream.close()
        self.assertEqual(caught.exception.code,
                         grpc.StatusCode.DEADLINE_EXCEEDED)
        client.close()

    def test_cancel_ends_every_job(self):
        case = Case(self.rng, 300, 300, 300)
        stream = self.client.stream()
        futures = [case.run(stream.submit) for _ in range(20)]
        stream.cancel()
        for future in futures:
            error = future.exception(timeout=10)
            if error is None:
                case.check(self, future.result())
            else:
                self.assertEqual(error.code, grpc.StatusCode.CANCELLED)
        with self.assertRaises(RuntimeError):
            case.run(stream.submit)

    def test_generated_code_matches_the_proto(self):
        out = os.path.join(TMP, "gen")
        os.makedirs(out, exist_ok=True)
        subprocess.run(["protoc", "--proto_path=" + os.path.dirname(PROTO),
                        "--python_out=" + out, os.path.basename(PROTO)],
                       check=True)
        checked_in = gemm_client.gemm_pb2.__file__
        self.assertTrue(
            filecmp.cmp(os.path.join(out, "gemm_pb2.py"), checked_in,
                        shallow=False),
            f"{checked_in} is out of date; regenerate it with: protoc "
            "--proto_path=proto --python_out=python/gemm_client gemm.proto")


def make_certificates(directory):
    """A CA; a server certificate for 127.0.0.1 and a client certificate
    from it; a client certificate from another CA (as tests/tls_test.cc)."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
          "-nodes"]

    def path(name):
        return os.path.join(directory, name)

    def run(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    with open(path("server.ext"), "w") as ext:
        ext.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    for ca in ("ca", "other-ca"):
        run("req", "-x509", *ec, "-days", "1", "-subj", "/CN=" + ca,
            "-keyout", path(ca + ".key"), "-out", path(ca + ".pem"))
    for name, ca in (("server", "ca"), ("client", "ca"),
                     ("stranger", "other-ca")):
        run("req", "-new", *ec, "-subj", "/CN=" + name, "-keyout",
            path(name + ".key"), "-out", path(name + ".csr"))
        run("x509", "-req", "-days", "1", "-in", path(name + ".csr"), "-CA",
            path(ca + ".pem"), "-CAkey", path(ca + ".key"), "-CAcreateserial",
            "-out", path(name + ".pem"),
            *(["-extfile", path("server.ext")] if name == "server" else []))
    with open(path("tokens"), "w") as tokens:
        tokens.write("# name token\nalice 0123456789abcdef0123456789\n")
    for name, token in (("alice.token", "0123456789abcdef0123456789\n"),
                        ("wrong.token", "0123456789abcdef0123456780\n")):
        with open(path(name), "w") as file:
            file.write(token)
    return path


class TlsTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        directory = os.path.join(TMP, "certs")
        os.makedirs(directory, exist_ok=True)
        cls.path = staticmethod(make_certificates(directory))
        cls.server = ServerProcess(
            "tls", "--tls-cert", cls.path("server.pem"), "--tls-key",
            cls.path("server.key"), "--token-file", cls.path("tokens"))

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def setUp(self):
        self.rng = np.random.default_rng(5)

    def client(self, **options):
        return GemmClient(self.server.address, timeout=30, **options)

    def test_tls_with_a_token_is_served_unary_and_in_chunks(self):
        with self.client(tls_ca=self.path("ca.pem"),
                         token_file=self.path("alice.token"),
                         max_unary_bytes=4096, chunk_bytes=4096) as client:
            for m, n, k in ((9, 7, 5), (100, 90, 80)):
                case = Case(self.rng, m, n, k, beta=1.0)
                case.check(self, case.run(client.gemm))
            self.assertEqual(client.health(), "SERVING")

    def test_missing_wrong_or_untrusted_credentials_are_refused(self):
        case = Case(self.rng, 3, 3, 3)
        refusals = [
            ({"tls_ca": self.path("ca.pem")}, grpc.StatusCode.UNAUTHENTICATED),
            ({"tls_ca": self.path("ca.pem"),
              "token_file": self.path("wrong.token")},
             grpc.StatusCode.UNAUTHENTICATED),
            ({"tls_ca": self.path("other-ca.pem"),
              "token_file": self.path("alice.token")},
             grpc.StatusCode.UNAVAILABLE),
            ({}, grpc.StatusCode.UNAVAILABLE),  # plaintext to a TLS server
        ]
        for options, code in refusals:
            with self.client(**options) as client:
                with self.assertRaises(GemmError, msg=options) as caught:
                    case.run(client.gemm)
                self.assertEqual(caught.exception.code, code, options)

    def test_health_needs_no_token(self):
        with self.client(tls_ca=self.path("ca.pem")) as client:
            self.assertEqual(client.health(), "SERVING")

    def test_a_token_only_over_tls(self):
        with self.assertRaisesRegex(ValueError, "needs TLS"):
            GemmClient("127.0.0.1:1", token_file=self.path("alice.token"))
        with self.assertRaisesRegex(ValueError, "go together"):
            GemmClient("127.0.0.1:1", tls_cert=self.path("client.pem"))

    def test_mutual_tls_wants_a_certificate_from_its_ca(self):
        server = ServerProcess(
            "mtls", "--tls-cert", self.path("server.pem"), "--tls-key",
            self.path("server.key"), "--tls-client-ca", self.path("ca.pem"))
        case = Case(self.rng, 6, 5, 4)
        try:
            with GemmClient(server.address, tls_ca=self.path("ca.pem"),
                            tls_cert=self.path("client.pem"),
                            tls_key=self.path("client.key")) as member:
                case.check(self, case.run(member.gemm))
            for cert in (None, "stranger"):
                files = {} if cert is None else {
                    "tls_cert": self.path(cert + ".pem"),
                    "tls_key": self.path(cert + ".key")}
                with GemmClient(server.address, tls_ca=self.path("ca.pem"),
                                timeout=30, **files) as other:
                    with self.assertRaises(GemmError, msg=cert):
                        case.run(other.gemm)
        finally:
            server.stop()


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
