"""gemm_client: the Python client of gemm-service (SGEMM over gRPC).

numpy in, numpy out: GemmClient.gemm() for one job, gemm_async() for many
in flight (futures), stream() to pipeline many on one call; large jobs go
in chunks by themselves. Each Result carries C and the server's Timing.

    client = GemmClient("localhost:50051")
    result = client.gemm(a, b, kernel="auto")
    print(result.c.shape, result.timing.server_ms, result.timing.kernel)
"""

from gemm_client.client import GemmClient
from gemm_client.job_stream import JobStream
from gemm_client.regions import RegionMatrix, SharedRegion
from gemm_client.results import GemmError, Result, Timing

__all__ = ["GemmClient", "GemmError", "JobStream", "RegionMatrix", "Result",
           "SharedRegion", "Timing"]
