"""One job as the wire carries it, shared by the unary call and the stream.

Job checks the caller's matrices once, before anything is sent, and turns
them into GemmParams and little-endian float32 bytes: a GemmRequest for the
unary call, or StreamRequest messages (one whole-job message, or params and
operand chunks) for GemmStream. ResultAssembly puts a streamed result back
together. Internal to the package; GemmClient and JobStream use them.

    job = Job(a, b, None, alpha=1.0, beta=0.0, trans_a=False,
              trans_b=False, kernel="auto", check="default")
    messages = list(job.stream_messages(job_id=1, chunk_bytes=1 << 20))
"""

from collections.abc import Iterator
from typing import Any

import grpc
import numpy as np

from gemm_client import gemm_pb2
from gemm_client.regions import RegionMatrix
from gemm_client.results import GemmError, Timing

# The wire's element type: raw little-endian float32 (proto/gemm.proto).
WIRE_FLOAT = np.dtype("<f4")
# GemmParams.check by name.
_CHECKS = {"default": gemm_pb2.CHECK_DEFAULT, "abft": gemm_pb2.CHECK_ABFT,
           "off": gemm_pb2.CHECK_OFF}
# GemmParams.precision by name.
_PRECISIONS = {"fp32": gemm_pb2.PRECISION_FP32,
               "fp32-tensor": gemm_pb2.PRECISION_FP32_TENSOR,
               "tf32": gemm_pb2.PRECISION_TF32,
               "bf16": gemm_pb2.PRECISION_BF16}
# The GemmRequest field of each operand.
_FIELD = {gemm_pb2.OPERAND_A: "a", gemm_pb2.OPERAND_B: "b",
          gemm_pb2.OPERAND_C: "c"}


def _as_matrix(name: str, value: Any) -> np.ndarray | RegionMatrix:
    """A C-contiguous float32 copy of value, or value itself when it is
    one already (so a float32 array costs no copy here); a matrix in a
    shared-memory region as it is."""
    if isinstance(value, RegionMatrix):
        return value
    matrix = np.ascontiguousarray(value, dtype=WIRE_FLOAT)
    if matrix.ndim != 2:
        raise ValueError(
            f"{name} must be a 2-D matrix, got shape {matrix.shape}")
    return matrix


class Job:
    """A checked job: its GemmParams and its operands in wire layout.

    The operand arrays are read again when the job is sent, which on a
    stream may be later than submit(): callers must not change them until
    the job's future is done.
    """

    def __init__(self, a: Any, b: Any, c: Any, *, alpha: float, beta: float,
                 trans_a: bool, trans_b: bool, kernel: str,
                 check: str = "default", precision: str = "fp32",
                 out: RegionMatrix | None = None) -> None:
        if check not in _CHECKS:
            raise ValueError(
                f"check must be one of {', '.join(_CHECKS)}, got {check!r}")
        if precision not in _PRECISIONS:
            raise ValueError(f"precision must be one of "
                             f"{', '.join(_PRECISIONS)}, got {precision!r}")
        a = _as_matrix("a", a)
        b = _as_matrix("b", b)
        # BLAS shapes: op(A) is M x K, op(B) is K x N; a transposed operand
        # is stored the other way round.
        m, k = a.shape[::-1] if trans_a else a.shape
        k_of_b, n = b.shape[::-1] if trans_b else b.shape
        if k_of_b != k:
            raise ValueError(
                f"op(a) is {m}x{k} but op(b) is {k_of_b}x{n}: their inner "
                f"dimensions differ (a {a.shape}, trans_a={trans_a}; "
                f"b {b.shape}, trans_b={trans_b})")
        if m == 0 or n == 0:
            raise ValueError(
                f"C would be {m}x{n}: the service needs M and N of at least 1")
        # The server compares beta as a float32, and with beta 0 it does not
        # read C, so C is then neither needed nor sent (NaN is not 0).
        if np.float32(beta) != 0:
            if c is None:
                raise ValueError(f"beta is {beta}, so c is needed")
            c = _as_matrix("c", c)
            if c.shape != (m, n):
                raise ValueError(
                    f"c must be {m}x{n} (op(a) rows x op(b) columns), got "
                    f"shape {c.shape}")
        else:
            c = None
        if out is not None:
            if not isinstance(out, RegionMatrix):
                raise ValueError("out must be a matrix in a region "
                                 "(SharedRegion.at)")
            if out.shape != (m, n):
                raise ValueError(
                    f"out must be {m}x{n} (op(a) rows x op(b) columns), got "
                    f"shape {out.shape}")
        self.params = gemm_pb2.GemmParams(
            m=m, n=n, k=k, trans_a=trans_a, trans_b=trans_b, alpha=alpha,
            beta=beta, kernel=kernel, check=_CHECKS[check],
            precision=_PRECISIONS[precision])
        # Operands in regions travel as references, the rest as bytes.
        self.operands = []
        for operand, field, matrix in ((gemm_pb2.OPERAND_A, "a_region", a),
                                       (gemm_pb2.OPERAND_B, "b_region", b),
                                       (gemm_pb2.OPERAND_C, "c_region", c)):
            if matrix is None:
                continue
            if isinstance(matrix, RegionMatrix):
                getattr(self.params, field).CopyFrom(matrix.ref())
            else:
                self.operands.append((operand, matrix))
        self.out = out
        if out is not None:
            self.params.result_region.CopyFrom(out.ref())
        self.m, self.n = m, n

    @property
    def operand_bytes(self) -> int:
        """Bytes of A, B and C (when sent) together."""
        return sum(matrix.nbytes for _, matrix in self.operands)

    @property
    def result_bytes(self) -> int:
        """Bytes of C that come back: none when it goes to a region."""
        if self.out is not None:
            return 0
        return self.m * self.n * WIRE_FLOAT.itemsize

    def request(self) -> gemm_pb2.GemmRequest:
        """The whole job in one message: the unary call's request."""
        request = gemm_pb2.GemmRequest()
        self._fill(request)
        return request

    def _fill(self, request: gemm_pb2.GemmRequest) -> None:
        """Writes the job into request in place (a message given to another
        as a field is copied, operand bytes included)."""
        request.params.CopyFrom(self.params)
        for operand, matrix in self.operands:
            setattr(request, _FIELD[operand], matrix.tobytes())

    def stream_messages(self, job_id: int,
                        chunk_bytes: int) -> Iterator[gemm_pb2.StreamRequest]:
        """The job's StreamRequest messages, made as they are asked for so
        that a large job is never all in memory twice.

        A job of at most chunk_bytes goes as one message (StreamRequest.job);
        a larger one as its params, then its operands in chunks of
        chunk_bytes, the last marked end_of_job. Results of at most
        chunk_bytes are asked for inline, in the JobEnd.
        """
        if self.operand_bytes <= chunk_bytes or not self.operands:
            message = gemm_pb2.StreamRequest(job_id=job_id)
            self._fill(message.job)
            message.job.params.inline_result_max_bytes = chunk_bytes
            yield message
            return
        pieces = [(operand, matrix, offset)
                  for operand, matrix in self.operands
                  for offset in range(0, matrix.nbytes, chunk_bytes)]
        for index, (operand, matrix, offset) in enumerate(pieces):
            data = memoryview(matrix).cast("B")[offset:offset + chunk_bytes]
            message = gemm_pb2.StreamRequest(
                job_id=job_id, operand=operand, offset=offset,
                data=bytes(data), end_of_job=index == len(pieces) - 1)
            if index == 0:
                message.params.CopyFrom(self.params)
                message.params.inline_result_max_bytes = chunk_bytes
            yield message

    def unary_result(self, data: bytes) -> np.ndarray:
        """C from a GemmResponse, checked for size, as a writable array (a
        view of the region, for a result written to one)."""
        if len(data) != self.result_bytes:
            raise GemmError(
                grpc.StatusCode.INTERNAL,
                f"server sent {len(data)} bytes of C, expected "
                f"{self.result_bytes}")
        if self.out is not None:
            return self.out.array()
        return np.frombuffer(data, WIRE_FLOAT).reshape(self.m, self.n).copy()



class ResultAssembly:
    """A streamed job's C, from its ResultChunks or its JobEnd.

    Chunks must come in order and stay within C (the proto's contract); a
    chunk that does not is not written and the job fails at its end.
    """

    def __init__(self, job_id: int, job: Job) -> None:
        self._job_id = job_id
        self._job = job
        # Allocated at the first chunk: an inline result needs no buffer.
        self._c: np.ndarray | None = None
        self._received = 0
        self._error: GemmError | None = None

    def add_chunk(self, chunk: gemm_pb2.ResultChunk) -> None:
        if self._error is not None:
            return
        end = chunk.offset + len(chunk.data)
        if chunk.offset != self._received or end > self._job.result_bytes:
            self._error = GemmError(
                grpc.StatusCode.INTERNAL,
                f"job {self._job_id}: server sent a result chunk of "
                f"{len(chunk.data)} bytes at offset {chunk.offset}; expected "
                f"offset {self._received} of {self._job.result_bytes} bytes "
                "of C")
            return
        if self._c is None:
            self._c = np.empty((self._job.m, self._job.n), WIRE_FLOAT)
        self._c.reshape(-1).view(np.uint8)[chunk.offset:end] = np.frombuffer(
            chunk.data, np.uint8)
        self._received = end

    def finish(self, end: gemm_pb2.JobEnd) -> tuple[np.ndarray, Timing]:
        """C and the timing of a job that ended; raises GemmError when it
        failed on the server or its result did not add up."""
        if end.code != 0:
            raise GemmError.from_job_end(end)
        if self._error is not None:
            raise self._error
        if self._c is None:  # no chunks: the result is inline, or missing
            return self._job.unary_result(end.c), Timing.from_proto(end.timing)
        if self._received != self._job.result_bytes:
            raise GemmError(
                grpc.StatusCode.INTERNAL,
                f"job {self._job_id}: server sent {self._received} bytes of "
                f"C, expected {self._job.result_bytes}")
        return self._c, Timing.from_proto(end.timing)
