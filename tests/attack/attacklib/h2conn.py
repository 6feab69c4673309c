"""An HTTP/2 client connection that does what it is told (H2Conn), for
the attacks: it sends what h2wire encodes and records what the server did.
"""

import asyncio
import collections
import socket

import h2wire as w

from .config import MiB, ZEROS


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
