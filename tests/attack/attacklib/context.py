"""What every attack is given (AttackContext) and the helpers they share:
connecting many connections, summing up what the server did to them, and a
unary call of this package's own HTTP/2 (raw_info: the server's limits).
"""

import asyncio
import collections
import math
import time

import h2wire as w

from .config import INFO_PATH, MiB
from .h2conn import ConnClosed, H2Conn


def summarize_conns(conns, connect_errors=0):
    """What the server did to a set of connections."""
    out = {"connections": len(conns), "connect_errors": connect_errors,
           "closed_by_server": sum(c.closed_by_peer for c in conns),
           "goaway": collections.Counter(), "rst_stream_in":
           collections.Counter(), "grpc_status": collections.Counter(),
           "frames_in": collections.Counter(), "bytes_out": 0, "bytes_in": 0,
           "hpack_errors": 0}
    samples = []
    for c in conns:
        out["rst_stream_in"].update(c.rst_in)
        out["grpc_status"].update(c.statuses)
        out["frames_in"].update(c.frames_in)
        out["bytes_out"] += c.bytes_out
        out["bytes_in"] += c.bytes_in
        out["hpack_errors"] += c.hpack_errors
        if c.goaway:
            out["goaway"][c.goaway["error"]] += 1
            if c.goaway["debug"] and len(samples) < 3:
                samples.append(c.goaway["debug"])
    lifetimes = [c.closed_at - c.opened_at for c in conns
                 if c.closed_by_peer and c.opened_at and c.closed_at]
    if lifetimes:
        out["closed_by_server_after_s"] = {
            "min": round(min(lifetimes), 3), "max": round(max(lifetimes), 3)}
    out["goaway_debug_sample"] = samples
    for k in ("goaway", "rst_stream_in", "grpc_status", "frames_in"):
        out[k] = dict(out[k])
    return out


async def unary_call(host, port, path, request, timeout=5.0):
    """One gRPC unary call on a fresh connection: (grpc-status or None,
    response messages, error text)."""
    conn = H2Conn(host, port, keep_messages=64 * MiB)
    try:
        await conn.connect(timeout)
        st = conn.open_stream(path)
        await conn.send_data(st, [w.grpc_message(request)], end_stream=True,
                             window_wait_s=timeout)
        await asyncio.wait_for(st.done.wait(), timeout)
        error = None
        if st.status is None:
            error = (conn.close_reason if conn.closed else
                     "RST_STREAM %s" % w.error_name(st.rst)
                     if st.rst is not None else "no grpc-status")
        return st.status, st.messages, error
    except (OSError, ConnClosed, asyncio.TimeoutError) as e:
        return None, [], "%s: %s" % (type(e).__name__, e)
    finally:
        conn.close()


async def raw_info(host, port, timeout=5.0):
    """Info over this module's own HTTP/2: the server's limits and counts."""
    start = time.monotonic()
    status, messages, error = await unary_call(host, port, INFO_PATH, b"",
                                               timeout)
    out = {"ok": status == 0 and bool(messages),
           "seconds": round(time.monotonic() - start, 3)}
    if status is not None:
        out["grpc_status"] = w.grpc_code_name(status)
    if error:
        out["error"] = error
    if out["ok"]:
        out["info"] = w.parse_info_response(messages[0])
    return out


class AttackContext:
    """What an attack needs: where, how big, and when to let go."""

    def __init__(self, host, port, limits, params, stop, rss_bound):
        self.host, self.port = host, port
        self.limits = limits
        self.params = params
        self.stop = stop
        self.rss_bound = rss_bound
        self.loop = asyncio.get_running_loop()
        self.started = self.loop.time()
        self.established = None

    def mark_established(self):
        if self.established is None:
            self.established = self.loop.time()

    def result(self, **figures):
        now = self.loop.time()
        out = {"params": self.params,
               "established_after_s": (round(self.established - self.started,
                                             3) if self.established else None),
               "ran_s": round(now - self.started, 3)}
        out.update(figures)
        return out

    async def hold(self):
        self.mark_established()
        await self.stop.wait()

    def conn(self, **kwargs):
        return H2Conn(self.host, self.port, **kwargs)


async def connect_all(ctx, count, concurrency=64, **kwargs):
    """count H2Conns, connected concurrently; (connected, errors)."""
    conns, errors = [], collections.Counter()
    gate = asyncio.Semaphore(concurrency)

    async def one():
        c = ctx.conn(**kwargs)
        async with gate:
            if ctx.stop.is_set():
                return
            try:
                await c.connect()
                conns.append(c)
            except (OSError, asyncio.TimeoutError) as e:
                errors[type(e).__name__ + (": %s" % e.strerror
                                           if getattr(e, "strerror", None)
                                           else "")] += 1
    await asyncio.gather(*(one() for _ in range(count)))
    return conns, errors


def close_all(conns):
    for c in conns:
        c.close()


def square_dim_for(job_bytes, operands, max_dim):
    """Largest d with operands*4*d*d <= job_bytes."""
    d = math.isqrt(job_bytes // (4 * operands))
    return max(1, min(d, max_dim or d))
