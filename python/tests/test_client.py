"""The Python client (gemm_client) against a real gemm-server process: jobs
unary, async and on streams, shared-memory regions, chunking, kernels, the
result check, timings, info and health, errors, and the generated code.

Every result is compared with numpy in float64 (client_testlib.Case). The
server's message limit is 4 MiB, so a job above it works only in chunks.
TLS, mTLS and tokens are in test_client_tls.py.

Usage: test_client.py GEMM_SERVER GEMM_PROTO (python_client_test.sh runs it
on the installed package).
"""

import filecmp
import itertools
import os
import subprocess
import sys
import time
import unittest

import grpc
import numpy as np

import gemm_client
from gemm_client import GemmClient, GemmError

from client_testlib import PROTO, TMP, Case, ServerProcess

MAX_MESSAGE_BYTES = 4 << 20


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


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
