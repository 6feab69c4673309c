"""Shared-memory regions: matrices a gemm-server on this host reads and
writes in place, without sending them through the socket (gemm.proto's
Region; the README's "Same-host callers").

A SharedRegion is a POSIX shared-memory object this process creates; its
array() views are numpy arrays over it. Register it with
GemmClient.register_region(), then pass region.at(offset, shape) where a
matrix goes: as a, b or c of gemm(), or as its out=, where the server then
writes the result (Result.c is then a view of those bytes).

    with SharedRegion(3 * 4 * 512 * 512, name="work") as region:
        a = region.array(0, (512, 512)); a[:] = ...
        client.register_region(region)
        result = client.gemm(region.at(0, (512, 512)), b,
                             out=region.at(2 * 4 * 512 * 512, (512, 512)))
        client.unregister_region(region.name)

Thread-safety: a SharedRegion's views are ordinary numpy arrays over shared
memory; the caller must not change an operand while a job reads it, nor
read a result before its job has answered.
"""

import itertools
import os
from dataclasses import dataclass
from multiprocessing import shared_memory
from types import TracebackType

import numpy as np

from gemm_client import gemm_pb2

_FLOAT = np.dtype("<f4")
_COUNTER = itertools.count()


def host_id() -> str:
    """This host's id, as RegisterRegionRequest.host_id takes it."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as file:
            return file.read().strip()
    except OSError:
        return ""


class SharedRegion:
    """A POSIX shared-memory object of nbytes, mapped here.

    Its key starts with "/gemm-", the prefix a server opens by default
    (gemm-server --region-key-prefix); it is created with mode 0600, for a
    server running as this user. name is what jobs call it once registered
    (default: the key without its slash). close() unmaps and unlinks it; a
    server that still maps it keeps the memory until it unmaps it
    (unregistering, or its idle timeout).
    """

    def __init__(self, nbytes: int, name: str | None = None) -> None:
        if nbytes < 1:
            raise ValueError(f"a region needs at least 1 byte, got {nbytes}")
        shm_name = f"gemm-py-{os.getpid()}-{next(_COUNTER)}"
        self._shm = shared_memory.SharedMemory(shm_name, create=True,
                                               size=nbytes)
        self.key = "/" + self._shm.name
        self.nbytes = nbytes
        self.name = name if name is not None else self._shm.name

    def array(self, offset: int, shape: tuple[int, int]) -> np.ndarray:
        """A float32 view of the region, shape (rows, columns), from byte
        offset (a multiple of 4)."""
        if offset % 4:
            raise ValueError(f"offset {offset} is not a multiple of 4")
        count = shape[0] * shape[1]
        if offset < 0 or offset + 4 * count > self.nbytes:
            raise ValueError(
                f"{shape} floats from offset {offset} pass the region's end "
                f"({self.nbytes} bytes)")
        return np.ndarray(shape, _FLOAT, buffer=self._shm.buf, offset=offset)

    def at(self, offset: int, shape: tuple[int, int]) -> "RegionMatrix":
        """A matrix in the region, as gemm() takes it for an operand or its
        out=."""
        self.array(offset, shape)  # checks the bounds
        return RegionMatrix(self, offset, (int(shape[0]), int(shape[1])))

    def request(self, read_only: bool = False) -> gemm_pb2.RegisterRegionRequest:
        """The region as RegisterRegionRequest takes it (all of it)."""
        return gemm_pb2.RegisterRegionRequest(
            name=self.name, host_id=host_id(),
            system=gemm_pb2.SystemSharedMemory(
                key=self.key, offset=0, byte_size=self.nbytes,
                read_only=read_only))

    def close(self) -> None:
        """Unmaps and unlinks the object. Views from array() must be gone
        first (numpy holds the mapping while they live)."""
        if self._shm is None:
            return
        shm, self._shm = self._shm, None
        try:
            shm.close()
        finally:
            shm.unlink()

    def __enter__(self) -> "SharedRegion":
        return self

    def __exit__(self, exc_type: type[BaseException] | None,
                 exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()


@dataclass(frozen=True)
class RegionMatrix:
    """A float32 matrix at a byte offset of a SharedRegion."""

    region: SharedRegion
    offset: int
    shape: tuple[int, int]

    def ref(self) -> gemm_pb2.RegionRef:
        return gemm_pb2.RegionRef(region=self.region.name, offset=self.offset)

    def array(self) -> np.ndarray:
        return self.region.array(self.offset, self.shape)


__all__ = ["RegionMatrix", "SharedRegion", "host_id"]
