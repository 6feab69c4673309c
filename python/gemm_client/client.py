"""GemmClient: one channel to a gemm-server, and the calls made on it.

Small jobs use the unary Gemm call; a job whose operands or result exceed
max_unary_bytes goes over a GemmStream call of its own, in chunks, as in the
C++ client (client/lib/gemm_client.h). stream() pipelines many jobs on one call.

Thread-safety: thread-safe; one client may serve many threads and jobs.

    with GemmClient("localhost:50051") as client:
        result = client.gemm(a, b)  # numpy in, numpy out
        print(result.c, result.timing.compute_ms)
"""

import os
import time
from concurrent.futures import Future
from types import TracebackType
from typing import Any

import grpc

from gemm_client import gemm_pb2
from gemm_client.job import Job
from gemm_client.job_stream import JobStream
from gemm_client.regions import RegionMatrix, SharedRegion
from gemm_client.results import GemmError, Result, Timing

_SERVICE = "/gemm.v1.GemmService/"
# The largest message taken from the server, as the C++ client: room for a
# unary result and for result chunks (--result-chunk-bytes) of any size the
# server's default message limit allows.
_MAX_RECEIVE_BYTES = 64 << 20
# grpc.health.v1.HealthCheckResponse.ServingStatus, by value.
_HEALTH_STATUS = ("UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN")

PathLike = str | os.PathLike[str]


class GemmClient:
    """A client of gemm.v1.GemmService on one channel (one connection).

    Args:
      target: the server, "host:port" (or any gRPC target).
      tls: use TLS, checking the server against the system's CAs. On too
        when any of tls_ca, tls_cert, tls_key is given.
      tls_ca: PEM file of the CAs to check the server's certificate with.
      tls_cert, tls_key: PEM files of a client certificate and its key, for
        a server that asks for one (mTLS); they go together.
      token_file: a file holding the bearer token every call carries
        ("authorization: Bearer TOKEN"); needs TLS, since gRPC sends call
        credentials only over a secure channel.
      timeout: deadline of each call in seconds, of a stream's whole call
        for stream() (None: none).
      max_unary_bytes: jobs whose operands (A, B and C when beta != 0)
        or result exceed this go over a stream, in chunks. The default
        3 MiB stays under gRPC's usual 4 MiB message limit.
      chunk_bytes: size of the operand chunks on a stream. Stream jobs of
        at most this go as one message, and results of at most this come
        back in one (inline, capped by the server's result_chunk_bytes).
    """

    def __init__(self, target: str, *, tls: bool = False,
                 tls_ca: PathLike | None = None,
                 tls_cert: PathLike | None = None,
                 tls_key: PathLike | None = None,
                 token_file: PathLike | None = None,
                 timeout: float | None = None,
                 max_unary_bytes: int = 3 << 20,
                 chunk_bytes: int = 1 << 20) -> None:
        if max_unary_bytes < 0:
            raise ValueError(f"max_unary_bytes is {max_unary_bytes}, < 0")
        if chunk_bytes < 1:
            raise ValueError(f"chunk_bytes is {chunk_bytes}, < 1")
        self._timeout = timeout
        self._max_unary_bytes = max_unary_bytes
        self._chunk_bytes = chunk_bytes
        credentials = _credentials(tls, tls_ca, tls_cert, tls_key, token_file)
        options = [("grpc.max_receive_message_length", _MAX_RECEIVE_BYTES)]
        self._channel = (
            grpc.secure_channel(target, credentials, options)
            if credentials is not None else
            grpc.insecure_channel(target, options))
        self._info = self._channel.unary_unary(
            _SERVICE + "Info",
            request_serializer=gemm_pb2.InfoRequest.SerializeToString,
            response_deserializer=gemm_pb2.InfoResponse.FromString)
        self._gemm = self._channel.unary_unary(
            _SERVICE + "Gemm",
            request_serializer=gemm_pb2.GemmRequest.SerializeToString,
            response_deserializer=gemm_pb2.GemmResponse.FromString)
        self._gemm_stream = self._channel.stream_stream(
            _SERVICE + "GemmStream",
            request_serializer=gemm_pb2.StreamRequest.SerializeToString,
            response_deserializer=gemm_pb2.StreamResponse.FromString)
        self._register_region = self._channel.unary_unary(
            _SERVICE + "RegisterRegion",
            request_serializer=gemm_pb2.RegisterRegionRequest.SerializeToString,
            response_deserializer=gemm_pb2.RegisterRegionResponse.FromString)
        self._unregister_region = self._channel.unary_unary(
            _SERVICE + "UnregisterRegion",
            request_serializer=(
                gemm_pb2.UnregisterRegionRequest.SerializeToString),
            response_deserializer=gemm_pb2.UnregisterRegionResponse.FromString)
        self._list_regions = self._channel.unary_unary(
            _SERVICE + "ListRegions",
            request_serializer=gemm_pb2.ListRegionsRequest.SerializeToString,
            response_deserializer=gemm_pb2.ListRegionsResponse.FromString)
        # Raw bytes in and out: the two health messages are encoded here
        # rather than generated from a proto this repository does not hold.
        self._health = self._channel.unary_unary("/grpc.health.v1.Health/Check")

    def close(self) -> None:
        """Closes the channel; calls still open, streams included, end with
        CANCELLED."""
        self._channel.close()

    def __enter__(self) -> "GemmClient":
        return self

    def __exit__(self, exc_type: type[BaseException] | None,
                 exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def info(self) -> gemm_pb2.InfoResponse:
        """What the server runs on: version, backend, devices, kernels,
        limits, batching and counters (gemm.v1.InfoResponse)."""
        try:
            return self._info(gemm_pb2.InfoRequest(), timeout=self._timeout)
        except grpc.RpcError as error:
            raise GemmError.from_rpc_error(error) from None

    def health(self, service: str = "") -> str:
        """The standard health check (grpc.health.v1.Health/Check), as a
        probe asks it, for service (empty: the whole server): "SERVING",
        "NOT_SERVING", "SERVICE_UNKNOWN" or "UNKNOWN". Raises GemmError
        when the call fails (NOT_FOUND: no such service)."""
        name = service.encode()
        # HealthCheckRequest{string service = 1}; proto3 leaves out "".
        request = b"\x0a" + _varint(len(name)) + name if name else b""
        try:
            response = self._health(request, timeout=self._timeout)
        except grpc.RpcError as error:
            raise GemmError.from_rpc_error(error) from None
        # HealthCheckResponse{ServingStatus status = 1}: b"" (UNKNOWN) or
        # b"\x08" and the value, below 128.
        status = response[1] if response[:1] == b"\x08" else 0
        return _HEALTH_STATUS[status] if status < len(_HEALTH_STATUS) \
            else "UNKNOWN"

    def register_region(self, region: SharedRegion, *,
                        read_only: bool = False) -> gemm_pb2.RegionInfo:
        """Registers a shared-memory region with the server (which must
        run on this host) under region.name; read_only: the server may
        read it but never write it. Raises GemmError when the server
        refuses it (the message says why)."""
        try:
            return self._register_region(region.request(read_only),
                                         timeout=self._timeout).region
        except grpc.RpcError as error:
            raise GemmError.from_rpc_error(error) from None

    def unregister_region(self, name: str) -> None:
        """Forgets a region; returns once no job uses it and the server
        has unmapped it, so that its memory may be reused or freed."""
        try:
            self._unregister_region(
                gemm_pb2.UnregisterRegionRequest(name=name),
                timeout=self._timeout)
        except grpc.RpcError as error:
            raise GemmError.from_rpc_error(error) from None

    def list_regions(self) -> list[gemm_pb2.RegionInfo]:
        """This caller's regions on the server."""
        try:
            return list(self._list_regions(gemm_pb2.ListRegionsRequest(),
                                           timeout=self._timeout).regions)
        except grpc.RpcError as error:
            raise GemmError.from_rpc_error(error) from None

    def gemm(self, a: Any, b: Any, c: Any = None, *, alpha: float = 1.0,
             beta: float = 0.0, trans_a: bool = False, trans_b: bool = False,
             kernel: str = "auto", check: str = "default",
             precision: str = "fp32",
             out: RegionMatrix | None = None) -> Result:
        """Computes C = alpha * op(a) @ op(b) + beta * c and waits for it.

        a, b and c are anything numpy turns into float32 matrices (copied
        only when they are not C-contiguous float32 already). op(x) is x, or
        x.T when trans_x is set, so a is M x K (K x M with trans_a) and b
        K x N (N x K with trans_b). c (M x N) is needed when beta is not 0,
        and neither read nor sent when it is 0. kernel is "auto" or a name
        from info().kernels. check asks the server to check the result
        before returning it: "abft" (row and column checksums; a result
        that fails is re-run, never returned, and timing.check says what
        happened), "off", or "default" (the server's --check-min-gflop).
        precision is the arithmetic the server may use: "fp32" (strict
        float32), "fp32-tensor" (float32-accurate, Tensor Cores allowed),
        "tf32" or "bf16" (inputs rounded, on Tensor Cores); timing.precision
        says which ran.

        Same-host callers may pass a, b or c as a matrix in a registered
        shared-memory region (SharedRegion.at(offset, shape)), which is
        then not sent, and out= such a matrix for the result, which the
        server writes there; Result.c is then a view of it.

        Raises ValueError for shapes that do not fit, before anything is
        sent, and GemmError when the server or the call fails.
        """
        return self.gemm_async(a, b, c, alpha=alpha, beta=beta,
                               trans_a=trans_a, trans_b=trans_b,
                               kernel=kernel, check=check,
                               precision=precision, out=out).result()

    def gemm_async(self, a: Any, b: Any, c: Any = None, *,
                   alpha: float = 1.0, beta: float = 0.0,
                   trans_a: bool = False, trans_b: bool = False,
                   kernel: str = "auto", check: str = "default",
                   precision: str = "fp32",
                   out: RegionMatrix | None = None) -> "Future[Result]":
        """gemm() without waiting: the future gets the Result or a
        GemmError, on one of gRPC's threads (or a stream's reader thread).
        ValueError is raised at once. Many jobs may be in flight; for many
        small ones, stream() saves a call per job. Leave the arrays of a
        job larger than max_unary_bytes unchanged until its future is
        done: they are read as its chunks are sent."""
        job = Job(a, b, c, alpha=alpha, beta=beta, trans_a=trans_a,
                  trans_b=trans_b, kernel=kernel, check=check,
                  precision=precision, out=out)
        if max(job.operand_bytes, job.result_bytes) > self._max_unary_bytes:
            # A call of its own, which ends with the job.
            stream = self.stream()
            future = stream.submit_job(job)
            stream.half_close()
            return future
        future: Future[Result] = Future()
        future.set_running_or_notify_cancel()
        started = time.perf_counter()
        call = self._gemm.future(job.request(), timeout=self._timeout)

        def finish(call: grpc.Future) -> None:
            try:
                response = call.result()
                future.set_result(Result(
                    c=job.unary_result(response.c),
                    timing=Timing.from_proto(response.timing),
                    client_ms=(time.perf_counter() - started) * 1e3))
            except grpc.RpcError as error:
                future.set_exception(GemmError.from_rpc_error(error))
            except GemmError as error:
                future.set_exception(error)

        call.add_done_callback(finish)
        return future

    def stream(self) -> JobStream:
        """Opens a GemmStream call for pipelining many jobs: submit() each
        (a future per job), then close() or leave its `with` block. The
        client's timeout is the deadline of the whole call."""
        return JobStream(self._gemm_stream, chunk_bytes=self._chunk_bytes,
                         timeout=self._timeout)


def _credentials(tls: bool, tls_ca: PathLike | None,
                 tls_cert: PathLike | None, tls_key: PathLike | None,
                 token_file: PathLike | None) -> grpc.ChannelCredentials | None:
    """The channel's credentials, None for plaintext. Secrets come from
    files, never arguments, as with gemm-client's flags."""
    if not (tls or tls_ca or tls_cert or tls_key):
        if token_file:
            raise ValueError(
                "token_file needs TLS (tls=True or tls_ca): gRPC sends a "
                "token only over a secure channel")
        return None
    if bool(tls_cert) != bool(tls_key):
        raise ValueError("tls_cert and tls_key go together")
    credentials = grpc.ssl_channel_credentials(
        root_certificates=_read(tls_ca) if tls_ca else None,
        private_key=_read(tls_key) if tls_key else None,
        certificate_chain=_read(tls_cert) if tls_cert else None)
    if token_file:
        token = _read(token_file).decode().strip()
        if not token:
            raise ValueError(f"token_file {token_file} holds no token")
        credentials = grpc.composite_channel_credentials(
            credentials, grpc.access_token_call_credentials(token))
    return credentials


def _read(path: PathLike) -> bytes:
    with open(path, "rb") as file:
        return file.read()


def _varint(value: int) -> bytes:
    """value in protobuf's base-128 varint encoding."""
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
