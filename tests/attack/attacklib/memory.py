"""Attacks on the server's memory: the in-flight budget (budget-fill,
big-unary-unread, k0) and gRPC's buffers (partial-unary).
"""

import asyncio
import collections
import math

import h2wire as w

from .config import GEMM_PATH, MiB, STREAM_PATH
from .context import (close_all, connect_all, square_dim_for, summarize_conns,
                      unary_call)
from .h2conn import ConnClosed


async def attack_budget_fill(ctx):
    p, lim = ctx.params, ctx.limits
    budget = lim["max_inflight_bytes"]
    per_job = (min(lim["max_job_bytes"], budget) if not p["jobs"]
               else -(-budget // p["jobs"]))
    d = square_dim_for(per_job, 3, lim["max_dim"])
    job_bytes = 12 * d * d
    holding = max(1, budget // job_bytes)  # jobs that fit: they hold it all
    count = holding + p["extra_jobs"]
    conn = ctx.conn(keep_messages=1 << 16)
    await conn.connect()
    ends = collections.Counter()
    next_id = [1]
    params = w.gemm_params(d, d, d)

    def declare(st):
        job_id = next_id[0]
        next_id[0] += 1
        conn.write(w.frame(w.DATA, 0, st.sid, w.grpc_message(
            w.stream_request(job_id, params=params))))

    def on_message(st, message):
        _, kind, code, _ = w.parse_stream_response(message)
        if kind == "end":
            ends[w.grpc_code_name(code)] += 1
            if p["refill"] and not ctx.stop.is_set() and not conn.closed:
                declare(st)
    streams = []
    for _ in range(count):
        st = conn.open_stream(STREAM_PATH)
        st.on_message = on_message
        declare(st)
        streams.append(st)
    await conn.drain(0)
    await ctx.hold()
    conn.close()
    return ctx.result(job_dim=d, job_bytes=job_bytes,
                      jobs_that_fit=holding, declared=next_id[0] - 1,
                      declared_bytes=(next_id[0] - 1) * job_bytes,
                      streams=count, job_ends=dict(ends),
                      **summarize_conns([conn]))


async def attack_partial_unary(ctx):
    p, lim = ctx.params, ctx.limits
    announce = p["announce_bytes"] or lim["max_message_bytes"]
    send = int(announce * p["send_fraction"])
    count = p["count"] or math.ceil(p["overshoot"] * ctx.rss_bound / send)
    nconn = max(1, min(count, p["connections"]))
    conns, errors = await connect_all(ctx, nconn)
    sent = [0]
    calls = []

    async def one_call(conn):
        if ctx.stop.is_set() or conn.closed:
            return
        st = conn.open_stream(p["path"])
        calls.append(st)
        try:
            n = await conn.send_data(
                st, [w.grpc_prefix(announce), send - 5], stop=ctx.stop,
                window_wait_s=30)
        except ConnClosed:
            return
        sent[0] += n

    async def on_conn(conn, n):
        if p["parallel"]:
            await asyncio.gather(*(one_call(conn) for _ in range(n)))
            return
        for _ in range(n):
            await one_call(conn)
    shares = [count // nconn + (i < count % nconn) for i in range(nconn)]
    await asyncio.gather(*(on_conn(c, n) for c, n in zip(conns, shares)))
    await ctx.hold()
    answered = sum(1 for st in calls if st.done.is_set())
    close_all(conns)
    return ctx.result(announced_bytes=announce, bytes_per_call=send,
                      calls=len(calls), planned_calls=count,
                      bytes_sent=sent[0],
                      calls_answered_before_release=answered,
                      **summarize_conns(conns, sum(errors.values())))


async def attack_big_unary_unread(ctx):
    p, lim = ctx.params, ctx.limits
    d = p["dim"]
    operands = 3 if p["with_c"] else 2
    job_bytes = operands * 4 * d * d
    count = p["count"] or (-(-lim["max_inflight_bytes"] // job_bytes) +
                           p["extra"])
    nconn = max(1, min(count, p["connections"]))
    conns, errors = await connect_all(ctx, nconn, window=p["window"],
                                      auto_window=False)
    params = w.gemm_params(d, d, d, beta=1.0 if p["with_c"] else 0.0)
    parts = w.gemm_request_parts(params, 4 * d * d, 4 * d * d,
                                 4 * d * d if p["with_c"] else 0)
    body = [w.grpc_prefix(w.parts_length(parts))] + parts
    calls = []

    async def on_conn(conn, n):
        for _ in range(n):
            if ctx.stop.is_set() or conn.closed:
                return
            st = conn.open_stream(GEMM_PATH)
            calls.append(st)
            try:
                await conn.send_data(st, body, end_stream=True, stop=ctx.stop,
                                     window_wait_s=30)
            except ConnClosed:
                return
    shares = [count // nconn + (i < count % nconn) for i in range(nconn)]
    await asyncio.gather(*(on_conn(c, n) for c, n in zip(conns, shares)))
    await ctx.hold()
    close_all(conns)
    return ctx.result(
        job_dim=d, request_bytes=w.parts_length(body), job_bytes=job_bytes,
        calls=len(calls), planned_calls=count,
        responses_started=sum(1 for st in calls if st.headers is not None),
        result_bytes_received=sum(st.data_in for st in calls),
        **summarize_conns(conns, sum(errors.values())))


async def attack_k0(ctx):
    p, lim = ctx.params, ctx.limits
    d = p["dim"] or square_dim_for(
        min(lim["max_job_bytes"], lim["max_inflight_bytes"]), 1,
        lim["max_dim"])
    params = w.gemm_params(d, d, 0, alpha=1.0, beta=0.0)
    read = p["read"]
    conn = ctx.conn(keep_messages=1 << 16, auto_window=read,
                    window=8 * MiB if read else 1024,
                    settings_pairs=[(w.SETTINGS_ENABLE_PUSH, 0),
                                    (w.SETTINGS_MAX_FRAME_SIZE, MiB)],
                    conn_window=64 * MiB if read else None)
    await conn.connect()
    st = conn.open_stream(STREAM_PATH)
    ends = collections.Counter()
    times = []

    def on_message(_, message):
        _, kind, code, _ = w.parse_stream_response(message)
        if kind == "end":
            ends[w.grpc_code_name(code)] += 1
            times.append(ctx.loop.time() - ctx.started)
    st.on_message = on_message
    body = b"".join(w.grpc_message(w.stream_request(i, params=params,
                                                    end_of_job=True))
                    for i in range(1, p["count"] + 1))
    await conn.send_data(st, [body], stop=ctx.stop, window_wait_s=10)
    unary_tasks = [asyncio.ensure_future(unary_call(
        ctx.host, ctx.port, GEMM_PATH, w.gemm_request(params), timeout=10))
        for _ in range(p["unary"])]
    await ctx.hold()
    conn.close()
    unary = []
    for task in unary_tasks:
        if task.done():
            unary.append(task.result())
        else:
            task.cancel()
            unary.append((None, [], "no answer before release"))
    return ctx.result(
        job_dim=d, request_bytes=len(body) // max(1, p["count"]),
        result_bytes_per_job=4 * d * d, jobs=p["count"],
        job_ends=dict(ends), job_end_at_s=[round(t, 3) for t in times],
        result_bytes_received=st.data_in,
        unary=[{"grpc_status": None if s is None else w.grpc_code_name(s),
                "error": e} for s, _, e in unary],
        **summarize_conns([conn]))
