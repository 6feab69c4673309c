"""The Python client (gemm_client) against a TLS gemm-server: tokens,
refused credentials, the health check without a token, and mutual TLS, with
certificates made by openssl here.

Usage: test_client_tls.py GEMM_SERVER GEMM_PROTO (python_client_test.sh runs
it on the installed package).
"""

import os
import subprocess
import sys
import unittest

import grpc
import numpy as np

from gemm_client import GemmClient, GemmError

from client_testlib import TMP, Case, ServerProcess


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
