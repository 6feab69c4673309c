"""What a job gives back: its result and timing record, or a GemmError.

    result = client.gemm(a, b)
    print(result.c.shape, result.timing.kernel, result.timing.compute_ms)
    # a failed job raises GemmError: e.code, e.g. INVALID_ARGUMENT, e.details
"""

from dataclasses import dataclass

import grpc
import numpy as np

from gemm_client import gemm_pb2

# google.rpc.Code values (JobEnd.code) to gRPC's status codes.
_STATUS_BY_VALUE = {code.value[0]: code for code in grpc.StatusCode}


@dataclass(frozen=True)
class Timing:
    """Where a job's time went on the server (gemm.v1.Timing), in ms."""

    queue_ms: float
    """From the job being complete on the server to its batch starting."""
    h2d_ms: float
    """Host-to-device copy of the operands (0 on the CPU backend)."""
    compute_ms: float
    """The GEMM itself (for a batched launch, the whole launch)."""
    d2h_ms: float
    """Device-to-host copy of C (0 on the CPU backend)."""
    server_ms: float
    """From the job being complete to its result being ready to send."""
    batch_size: int
    """Jobs in the batch this job ran in (1 when it ran alone)."""
    kernel: str
    """The kernel that ran it: the resolved name, never "auto"."""
    device: str
    """The device that ran it, e.g. "cpu" or "cuda:0 NVIDIA H200"."""
    gflops: float
    """2*M*N*K over the compute time (this job's share of a batch)."""
    check: gemm_pb2.CheckRecord
    """The result check (check="abft"): ran, ms, mismatches, worst_ratio,
    unchecked_lines and detail, as gemm.v1.CheckRecord."""
    precision: str
    """The arithmetic the kernel computed in: "fp32", "tf32" or "bf16"."""

    @classmethod
    def from_proto(cls, timing: gemm_pb2.Timing) -> "Timing":
        return cls(queue_ms=timing.queue_ms, h2d_ms=timing.h2d_ms,
                   compute_ms=timing.compute_ms, d2h_ms=timing.d2h_ms,
                   server_ms=timing.server_ms, batch_size=timing.batch_size,
                   kernel=timing.kernel, device=timing.device,
                   gflops=timing.gflops, check=timing.check,
                   precision=timing.precision)


@dataclass(frozen=True)
class Result:
    """One job's answer: C and the server's account of it."""

    c: np.ndarray
    """The result, an M x N float32 array of the caller's own."""
    timing: Timing
    client_ms: float
    """From the call (or submit) to the result, as the caller saw it:
    the server's time plus transfers, encoding and waiting to be sent."""


class GemmError(Exception):
    """A job or call that failed, with its gRPC status code and message.

    The service's codes and what they mean are in proto/gemm.proto; errors
    the client finds itself (a result of the wrong size) are INTERNAL, as in
    the C++ client.
    """

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details

    @classmethod
    def from_rpc_error(cls, error: grpc.RpcError) -> "GemmError":
        """The error of a failed gRPC call (which is a grpc.Call)."""
        # The RpcError of a failed call is that grpc.Call too.
        return cls(error.code(), error.details() or "")  # type: ignore

    @classmethod
    def from_job_end(cls, end: gemm_pb2.JobEnd) -> "GemmError":
        """The error a JobEnd of the stream carries (code not OK)."""
        code = _STATUS_BY_VALUE.get(end.code, grpc.StatusCode.UNKNOWN)
        return cls(code, end.message)

    def copy(self) -> "GemmError":
        """A fresh exception with the same status, so that the many futures
        one stream error ends do not share (and grow) one traceback."""
        return GemmError(self.code, self.details)
