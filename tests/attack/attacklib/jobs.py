"""Attacks through the job calls themselves: very many jobs opened and
never ended (open-jobs), results never read (unread-results), and requests
the server must refuse, each of which it might log (bad-utf8).
"""

import asyncio
import collections

import h2wire as w

from .config import GEMM_PATH, STREAM_PATH
from .context import close_all, connect_all, summarize_conns
from .h2conn import ConnClosed, first_of


async def send_stream_messages(ctx, conn, st, messages, batch):
    """Sends messages (a generator of StreamRequest bytes) on st, batch at a
    time; returns how many went."""
    sent = 0
    chunk = []
    for message in messages:
        chunk.append(w.grpc_message(message))
        if len(chunk) == batch:
            if ctx.stop.is_set():
                break
            await conn.send_data(st, [b"".join(chunk)], stop=ctx.stop,
                                 window_wait_s=10)
            sent += len(chunk)
            chunk = []
    if chunk and not ctx.stop.is_set():
        await conn.send_data(st, [b"".join(chunk)], stop=ctx.stop,
                             window_wait_s=10)
        sent += len(chunk)
    return sent


async def attack_open_jobs(ctx):
    p = ctx.params
    conn = ctx.conn(keep_messages=1 << 16)
    await conn.connect()
    st = conn.open_stream(STREAM_PATH)
    ends = collections.Counter()
    st.on_message = lambda s, m: ends.update(
        [w.grpc_code_name(w.parse_stream_response(m)[2])])
    params = w.gemm_params(1, 1, 1)
    sent = 0
    try:
        sent = await send_stream_messages(
            ctx, conn, st, (w.stream_request(i, params=params)
                            for i in range(1, p["count"] + 1)), p["batch"])
    except ConnClosed:
        pass
    await ctx.hold()
    conn.close()
    return ctx.result(jobs_opened=sent, job_ends=dict(ends),
                      **summarize_conns([conn]))


async def attack_unread_results(ctx):
    p = ctx.params
    conn = ctx.conn(window=p["window"], auto_window=False)
    await conn.connect()
    st = conn.open_stream(STREAM_PATH)
    one = b"\0\0\x80\x3f"  # 1.0f
    job = w.gemm_request(w.gemm_params(
        1, 1, 1, inline_result_max_bytes=4 if p["inline"] else 0), one, one)
    sent = 0
    try:
        sent = await send_stream_messages(
            ctx, conn, st, (w.stream_request(i, job=job)
                            for i in range(1, p["count"] + 1)), p["batch"])
    except ConnClosed:
        pass
    await ctx.hold()
    conn.close()
    return ctx.result(jobs_sent=sent, result_bytes_received=st.data_in,
                      **summarize_conns([conn]))


async def attack_bad_utf8(ctx):
    p = ctx.params
    conns, errors = await connect_all(ctx, p["connections"])
    one = b"\0\0\x80\x3f"
    request = w.grpc_message(w.gemm_request(
        w.gemm_params(1, 1, 1,
                      kernel=b"\xff\xfe bad \xc0\x80 utf-8 \xed\xa0\x80"),
        one, one))
    sent = [0]
    per_conn = -(-p["count"] // max(1, len(conns)))

    async def caller(conn, quota):
        while quota[0] > 0 and not ctx.stop.is_set() and not conn.closed:
            quota[0] -= 1
            try:
                st = conn.open_stream(GEMM_PATH)
                conn.write(w.frame(w.DATA, w.END_STREAM, st.sid, request))
                sent[0] += 1
                await conn.drain_or_stop(ctx.stop)
                await first_of(st.done, ctx.stop, timeout=10)
                if not st.done.is_set():
                    return
            except ConnClosed:
                return
            conn.forget(st)

    async def on_conn(conn):
        quota = [per_conn]
        await asyncio.gather(*(caller(conn, quota)
                               for _ in range(p["inflight"])))
    await asyncio.gather(*(on_conn(c) for c in conns))
    ctx.mark_established()
    await ctx.hold()
    close_all(conns)
    return ctx.result(requests_sent=sent[0],
                      **summarize_conns(conns, sum(errors.values())))
