"""JobStream: many jobs pipelined on one GemmStream call.

Jobs are sent in the order submitted, each as one message or as params and
operand chunks (Job.stream_messages); their results come back in any order,
and each job's future gets its Result, its own error, or the stream's error
when the call ends first. A reader thread takes results as they come, which
the protocol asks of clients: when the server is full it stops reading, and
only a client that keeps reading lets it finish the jobs it holds.

Thread-safety: submit() may be called from any thread. Futures are completed
on the reader thread, so their done-callbacks run there and must not block.

    with client.stream() as stream:
        futures = [stream.submit(a, b) for a, b in pairs]
    results = [future.result() for future in futures]
"""

import queue
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import grpc

from gemm_client import gemm_pb2
from gemm_client.job import Job, ResultAssembly
from gemm_client.regions import RegionMatrix
from gemm_client.results import GemmError, Result


@dataclass
class _OpenJob:
    """A job submitted and not yet ended."""

    job: Job
    assembly: ResultAssembly
    future: "Future[Result]"
    started: float = field(default_factory=time.perf_counter)


class JobStream:
    """One GemmStream call and the jobs submitted on it.

    Made by GemmClient.stream(). Use it as a context manager, or call
    close() (or cancel()) when done: the call stays open until then.
    """

    def __init__(self, call: grpc.StreamStreamMultiCallable, *,
                 chunk_bytes: int, timeout: float | None) -> None:
        """Starts the call. chunk_bytes is as in GemmClient; timeout, in
        seconds, is the deadline of the whole call (None: none)."""
        self._chunk_bytes = chunk_bytes
        # What to send: (job_id, job) in order; None half-closes.
        self._outbox: "queue.SimpleQueue[tuple[int, Job] | None]" = (
            queue.SimpleQueue())
        self._lock = threading.Lock()
        self._open: dict[int, _OpenJob] = {}  # guarded by _lock
        self._next_id = 1  # guarded by _lock; ids are never reused
        self._closing = False  # guarded by _lock
        self._ended = False  # guarded by _lock
        self._error: GemmError | None = None  # set when the call ended
        self._responses = call(self._requests(), timeout=timeout)
        self._reader = threading.Thread(
            target=self._read, name="gemm-stream-reader", daemon=True)
        self._reader.start()

    def submit(self, a: Any, b: Any, c: Any = None, *, alpha: float = 1.0,
               beta: float = 0.0, trans_a: bool = False,
               trans_b: bool = False, kernel: str = "auto",
               check: str = "default",
               precision: str = "fp32",
               out: RegionMatrix | None = None) -> "Future[Result]":
        """Queues C = alpha * op(a) @ op(b) + beta * c; never blocks on the
        network. Arguments are those of GemmClient.gemm(), and bad shapes
        raise ValueError here; the future gets the Result or a GemmError.
        Leave the arrays unchanged until the future is done: they are read
        when the job is sent."""
        return self.submit_job(Job(a, b, c, alpha=alpha, beta=beta,
                                   trans_a=trans_a, trans_b=trans_b,
                                   kernel=kernel, check=check,
                                   precision=precision, out=out))

    def submit_job(self, job: Job) -> "Future[Result]":
        """submit() of a job already checked (GemmClient's large jobs)."""
        future: Future[Result] = Future()
        # A job on the wire cannot be called back: the protocol has no
        # cancellation of one job, so its future is running at once.
        future.set_running_or_notify_cancel()
        with self._lock:
            if self._closing:
                raise RuntimeError("submit() on a JobStream being closed")
            if self._ended:
                assert self._error is not None
                future.set_exception(self._error.copy())
                return future
            job_id = self._next_id
            self._next_id += 1
            self._open[job_id] = _OpenJob(job, ResultAssembly(job_id, job),
                                          future)
        self._outbox.put((job_id, job))
        return future

    def half_close(self) -> None:
        """Tells the server no more jobs follow, once the queued ones are
        sent, without waiting; the call ends when they all have."""
        with self._lock:
            self._closing = True
        self._outbox.put(None)

    def close(self) -> None:
        """Half-closes and waits until every job has ended. Raises GemmError
        when the call itself ended in error (the jobs it ended got it too)."""
        self.half_close()
        self._reader.join()
        if self._error is not None:
            raise self._error.copy()

    def cancel(self) -> None:
        """Cancels the call and waits for it to end: jobs not yet ended fail
        with CANCELLED."""
        self.half_close()
        self._responses.cancel()
        self._reader.join()

    def __enter__(self) -> "JobStream":
        return self

    def __exit__(self, exc_type: type[BaseException] | None,
                 exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        """close(), or cancel() when the block raised: its jobs are then
        not worth waiting for."""
        if exc_type is None:
            self.close()
        else:
            self.cancel()

    def _requests(self) -> Iterator[gemm_pb2.StreamRequest]:
        """The request side, consumed by gRPC's sending thread; returning
        half-closes."""
        while (item := self._outbox.get()) is not None:
            job_id, job = item
            yield from job.stream_messages(job_id, self._chunk_bytes)

    def _read(self) -> None:
        """Hands each result to its job until the call ends, then fails the
        jobs still open with the call's status."""
        error = None
        try:
            for response in self._responses:
                self._on_response(response)
        except grpc.RpcError as rpc_error:
            error = GemmError.from_rpc_error(rpc_error)
        with self._lock:
            self._ended = True
            self._error = error
            left, self._open = self._open, {}
        self._outbox.put(None)  # unblocks _requests should it still wait
        for job_id, open_job in left.items():
            open_job.future.set_exception(
                error.copy() if error is not None else GemmError(
                    grpc.StatusCode.INTERNAL,
                    f"job {job_id}: the stream ended without its JobEnd"))

    def _on_response(self, response: gemm_pb2.StreamResponse) -> None:
        kind = response.WhichOneof("kind")
        with self._lock:
            open_job = self._open.get(response.job_id)
            if kind == "end":
                self._open.pop(response.job_id, None)
        if open_job is None:
            return  # not a job of ours: nothing to give it to
        if kind == "chunk":
            open_job.assembly.add_chunk(response.chunk)
        elif kind == "end":
            self._end(open_job, response.end)

    @staticmethod
    def _end(open_job: _OpenJob, end: gemm_pb2.JobEnd) -> None:
        try:
            c, timing = open_job.assembly.finish(end)
        except GemmError as job_error:
            open_job.future.set_exception(job_error)
            return
        open_job.future.set_result(Result(
            c=c, timing=timing,
            client_ms=(time.perf_counter() - open_job.started) * 1e3))
