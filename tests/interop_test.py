"""Interoperability: a client that shares no code with this repository.

Given only proto/gemm.proto, Python's grpcio and protobuf (Debian packages)
call Info and Gemm on a real gemm-server; the standard health service must
report SERVING and server reflection (v1 and v1alpha) must list
gemm.v1.GemmService. Then gemm-client's .npy path computes 1000x999x777 and
must match numpy's float64 result within 1e-5 relative error.

Usage: interop_test.py GEMM_SERVER GEMM_CLIENT GEMM_PROTO
"""

import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import grpc
import numpy as np

SERVER, CLIENT, PROTO = (os.path.abspath(p) for p in sys.argv[1:4])
TMP = os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp()


def generate_stubs():
    """Compiles proto/gemm.proto to Python message classes."""
    out = os.path.join(TMP, "gen")
    os.makedirs(out, exist_ok=True)
    subprocess.run(["protoc", "--proto_path=" + os.path.dirname(PROTO),
                    "--python_out=" + out, PROTO], check=True)
    sys.path.insert(0, out)
    import gemm_pb2  # pylint: disable=import-outside-toplevel
    return gemm_pb2


def varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


class InteropTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.pb = generate_stubs()
        port_file = os.path.join(TMP, "interop.port")
        cls.server = subprocess.Popen(
            [SERVER, "--listen", "127.0.0.1:0", "--port-file", port_file,
             "--log-level", "warn"])
        for _ in range(400):
            if os.path.exists(port_file) and open(port_file).read().strip():
                break
            time.sleep(0.05)
        cls.address = "127.0.0.1:" + open(port_file).read().strip()
        cls.channel = grpc.insecure_channel(
            cls.address,
            options=[("grpc.max_receive_message_length", 64 << 20)])

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.server.send_signal(signal.SIGTERM)
        assert cls.server.wait(timeout=60) == 0

    def call(self, method, request, response_class):
        stub = self.channel.unary_unary(
            "/gemm.v1.GemmService/" + method,
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=response_class.FromString)
        return stub(request, timeout=60)

    def test_info(self):
        info = self.call("Info", self.pb.InfoRequest(), self.pb.InfoResponse)
        self.assertTrue(info.version)
        self.assertIn(info.backend, ("cpu", "cuda"))
        self.assertGreater(len(info.kernels), 0)
        self.assertGreater(info.limits.max_message_bytes, 0)

    def test_gemm(self):
        rng = np.random.default_rng(7)
        m, n, k = 37, 23, 51
        a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
        b = rng.uniform(-1, 1, (n, k)).astype(np.float32)  # stored N x K
        c = rng.uniform(-1, 1, (m, n)).astype(np.float32)
        params = self.pb.GemmParams(m=m, n=n, k=k, trans_b=True, alpha=1.5,
                                    beta=-0.5)
        request = self.pb.GemmRequest(params=params, a=a.astype("<f4").tobytes(),
                                      b=b.astype("<f4").tobytes(),
                                      c=c.astype("<f4").tobytes())
        response = self.call("Gemm", request, self.pb.GemmResponse)
        got = np.frombuffer(response.c, dtype="<f4").reshape(m, n)
        want = 1.5 * a.astype(np.float64) @ b.astype(np.float64).T - 0.5 * c
        err = np.linalg.norm(got - want) / np.linalg.norm(want)
        self.assertLessEqual(err, 1e-5)
        self.assertGreater(response.timing.server_ms, 0)
        self.assertTrue(response.timing.kernel)

    def test_bad_shape_is_invalid_argument(self):
        params = self.pb.GemmParams(m=2, n=2, k=2, alpha=1)
        request = self.pb.GemmRequest(params=params, a=b"\0" * 12, b=b"\0" * 16)
        with self.assertRaises(grpc.RpcError) as caught:
            self.call("Gemm", request, self.pb.GemmResponse)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("a: expected 16 bytes", caught.exception.details())

    def test_health_reports_serving(self):
        # grpc.health.v1.HealthCheckRequest{service}; reply field 1 = status.
        check = self.channel.unary_unary("/grpc.health.v1.Health/Check")
        for service in (b"", b"gemm.v1.GemmService"):
            request = (b"\x0a" + varint(len(service)) + service) if service else b""
            self.assertEqual(check(request, timeout=10), b"\x08\x01")  # SERVING

    def test_reflection_lists_the_service(self):
        # ServerReflectionRequest{list_services = ""} (field 7), in both
        # versions of the reflection service.
        for version in ("v1", "v1alpha"):
            info = self.channel.stream_stream(
                "/grpc.reflection.%s.ServerReflection/ServerReflectionInfo"
                % version)
            replies = list(info(iter([b"\x3a\x00"]), timeout=10))
            self.assertEqual(len(replies), 1, version)
            self.assertIn(b"gemm.v1.GemmService", replies[0], version)
            self.assertIn(b"grpc.health.v1.Health", replies[0], version)

    def test_gemm_client_matches_numpy_at_1000x999x777(self):
        rng = np.random.default_rng(11)
        a = rng.uniform(-1, 1, (1000, 777)).astype(np.float32)
        b = rng.uniform(-1, 1, (777, 999)).astype(np.float32)
        paths = {name: os.path.join(TMP, name + ".npy") for name in "abc"}
        np.save(paths["a"], a)
        np.save(paths["b"], b)
        result = subprocess.run(
            [CLIENT, "run", "--server", self.address, "--a", paths["a"],
             "--b", paths["b"], "--out", paths["c"]],
            check=True, capture_output=True, text=True)
        self.assertIn("1000x999x777", result.stdout)
        got = np.load(paths["c"])
        self.assertEqual(got.shape, (1000, 999))
        want = a.astype(np.float64) @ b.astype(np.float64)
        err = np.linalg.norm(got - want) / np.linalg.norm(want)
        self.assertLessEqual(err, 1e-5)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]])
