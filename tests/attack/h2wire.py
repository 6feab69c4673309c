"""Wire encodings for tests/attack/attack.py, pure functions without I/O.

HTTP/2 frames (RFC 9113), HPACK (RFC 7541: the encoder writes literal fields
without indexing and without Huffman coding; the decoder reads all of HPACK,
dynamic table and Huffman included, since it must follow what gRPC sends),
gRPC's 5-byte message framing, and the protobuf encoding of the few
gemm.v1 messages the attacks send (proto/gemm.proto), with a field scanner
for the few they read. Python standard library only.

Thread-safety: the functions are pure; an HpackDecoder or a GrpcMessageReader
belongs to one connection or stream.

    block = encode_headers(grpc_request_headers("/gemm.v1.GemmService/Gemm"))
    wire = frame(HEADERS, END_HEADERS, 1, block)
    wire += frame(DATA, END_STREAM, 1, grpc_message(gemm_request(params)))
"""

import struct

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

# Frame types.
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, \
    WINDOW_UPDATE, CONTINUATION = range(10)
FRAME_NAMES = {DATA: "DATA", HEADERS: "HEADERS", PRIORITY: "PRIORITY",
               RST_STREAM: "RST_STREAM", SETTINGS: "SETTINGS",
               PUSH_PROMISE: "PUSH_PROMISE", PING: "PING", GOAWAY: "GOAWAY",
               WINDOW_UPDATE: "WINDOW_UPDATE", CONTINUATION: "CONTINUATION"}

# Flags.
END_STREAM = 0x1
ACK = 0x1
END_HEADERS = 0x4
PADDED = 0x8
PRIORITY_FLAG = 0x20

# SETTINGS identifiers.
SETTINGS_HEADER_TABLE_SIZE = 0x1
SETTINGS_ENABLE_PUSH = 0x2
SETTINGS_MAX_CONCURRENT_STREAMS = 0x3
SETTINGS_INITIAL_WINDOW_SIZE = 0x4
SETTINGS_MAX_FRAME_SIZE = 0x5
SETTINGS_MAX_HEADER_LIST_SIZE = 0x6

# Error codes (RST_STREAM, GOAWAY).
ERROR_NAMES = {0x0: "NO_ERROR", 0x1: "PROTOCOL_ERROR", 0x2: "INTERNAL_ERROR",
               0x3: "FLOW_CONTROL_ERROR", 0x4: "SETTINGS_TIMEOUT",
               0x5: "STREAM_CLOSED", 0x6: "FRAME_SIZE_ERROR",
               0x7: "REFUSED_STREAM", 0x8: "CANCEL", 0x9: "COMPRESSION_ERROR",
               0xa: "CONNECT_ERROR", 0xb: "ENHANCE_YOUR_CALM",
               0xc: "INADEQUATE_SECURITY", 0xd: "HTTP_1_1_REQUIRED"}
CANCEL = 0x8

# google.rpc.Code names, for grpc-status and JobEnd.code.
GRPC_CODES = ["OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT",
              "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
              "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
              "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL",
              "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"]


def grpc_code_name(code):
    try:
        return GRPC_CODES[int(code)]
    except (ValueError, IndexError):
        return "code %s" % code


def error_name(code):
    return ERROR_NAMES.get(code, "0x%x" % code)


# --- HTTP/2 frames ---------------------------------------------------------

FRAME_HEADER = struct.Struct(">HBBBI")  # 24-bit length as H + B


def frame_header(ftype, flags, stream_id, length):
    return FRAME_HEADER.pack(length >> 8, length & 0xFF, ftype, flags,
                             stream_id & 0x7FFFFFFF)


def frame(ftype, flags, stream_id, payload=b""):
    return frame_header(ftype, flags, stream_id, len(payload)) + payload


def parse_frame_header(buf, offset=0):
    """(length, type, flags, stream_id) of the 9 bytes at offset."""
    hi, lo, ftype, flags, sid = FRAME_HEADER.unpack_from(buf, offset)
    return (hi << 8) | lo, ftype, flags, sid & 0x7FFFFFFF


def settings(pairs=()):
    """A SETTINGS frame; pairs is an iterable of (identifier, value)."""
    return frame(SETTINGS, 0, 0,
                 b"".join(struct.pack(">HI", k, v) for k, v in pairs))


def parse_settings(payload):
    return [struct.unpack_from(">HI", payload, i)
            for i in range(0, len(payload) - len(payload) % 6, 6)]


SETTINGS_ACK = frame(SETTINGS, ACK, 0)


def window_update(stream_id, increment):
    return frame(WINDOW_UPDATE, 0, stream_id,
                 struct.pack(">I", increment & 0x7FFFFFFF))


def rst_stream(stream_id, code=CANCEL):
    return frame(RST_STREAM, 0, stream_id, struct.pack(">I", code))


def ping(opaque=b"\0" * 8, ack=False):
    return frame(PING, ACK if ack else 0, 0, opaque)


def parse_goaway(payload):
    """(last_stream_id, error_code, debug_bytes)."""
    last, code = struct.unpack_from(">II", payload)
    return last & 0x7FFFFFFF, code, bytes(payload[8:])


def strip_padding(flags, payload, priority_flag=False):
    """The field block or data of a HEADERS or DATA payload."""
    start, pad = 0, 0
    if flags & PADDED:
        pad = payload[0]
        start = 1
    if priority_flag and flags & PRIORITY_FLAG:
        start += 5
    return payload[start:len(payload) - pad]


# --- HPACK -----------------------------------------------------------------

def encode_int(value, prefix_bits, first_byte=0):
    """HPACK integer (RFC 7541 5.1) with an N-bit prefix; first_byte holds the
    bits above the prefix."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first_byte | value])
    out = bytearray([first_byte | limit])
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_str(data):
    """HPACK string literal, never Huffman coded."""
    if isinstance(data, str):
        data = data.encode("latin-1")
    return encode_int(len(data), 7) + data


def encode_literal(name, value):
    """A literal header field without indexing, with a new name (0x00)."""
    return b"\x00" + encode_str(name) + encode_str(value)


def encode_headers(headers):
    return b"".join(encode_literal(n, v) for n, v in headers)


def grpc_request_headers(path, authority="attack", extra=()):
    return [(":method", "POST"), (":scheme", "http"), (":path", path),
            (":authority", authority), ("content-type", "application/grpc"),
            ("te", "trailers")] + list(extra)


STATIC_TABLE = [
    (":authority", ""), (":method", "GET"), (":method", "POST"), (":path", "/"),
    (":path", "/index.html"), (":scheme", "http"), (":scheme", "https"),
    (":status", "200"), (":status", "204"), (":status", "206"),
    (":status", "304"), (":status", "400"), (":status", "404"),
    (":status", "500"), ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"), ("accept-language", ""),
    ("accept-ranges", ""), ("accept", ""), ("access-control-allow-origin", ""),
    ("age", ""), ("allow", ""), ("authorization", ""), ("cache-control", ""),
    ("content-disposition", ""), ("content-encoding", ""),
    ("content-language", ""), ("content-length", ""), ("content-location", ""),
    ("content-range", ""), ("content-type", ""), ("cookie", ""), ("date", ""),
    ("etag", ""), ("expect", ""), ("expires", ""), ("from", ""), ("host", ""),
    ("if-match", ""), ("if-modified-since", ""), ("if-none-match", ""),
    ("if-range", ""), ("if-unmodified-since", ""), ("last-modified", ""),
    ("link", ""), ("location", ""), ("max-forwards", ""),
    ("proxy-authenticate", ""), ("proxy-authorization", ""), ("range", ""),
    ("referer", ""), ("refresh", ""), ("retry-after", ""), ("server", ""),
    ("set-cookie", ""), ("strict-transport-security", ""),
    ("transfer-encoding", ""), ("user-agent", ""), ("vary", ""), ("via", ""),
    ("www-authenticate", "")]

# Code lengths of the HPACK Huffman code (RFC 7541 Appendix B), symbols 0..255
# and EOS (256). The code is canonical: codes follow from the lengths alone.
HUFFMAN_LENGTHS = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28,
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
    6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6,
    5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
    13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
    15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5,
    6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23,
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25,
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
    30]


def _canonical_codes(lengths):
    codes = [0] * len(lengths)
    code, prev_len = 0, 0
    for sym in sorted(range(len(lengths)), key=lambda s: (lengths[s], s)):
        code <<= lengths[sym] - prev_len
        codes[sym] = code
        code += 1
        prev_len = lengths[sym]
    return codes


HUFFMAN_CODES = _canonical_codes(HUFFMAN_LENGTHS)
_HUFFMAN_DECODE = {(HUFFMAN_LENGTHS[s], HUFFMAN_CODES[s]): s
                   for s in range(257)}


def huffman_encode(data):
    """Only for tests: the decoder is what the attacks need."""
    acc, nbits, out = 0, 0, bytearray()
    for byte in data:
        acc = (acc << HUFFMAN_LENGTHS[byte]) | HUFFMAN_CODES[byte]
        nbits += HUFFMAN_LENGTHS[byte]
        while nbits >= 8:
            nbits -= 8
            out.append((acc >> nbits) & 0xFF)
    if nbits:
        out.append(((acc << (8 - nbits)) | ((1 << (8 - nbits)) - 1)) & 0xFF)
    return bytes(out)


def huffman_decode(data):
    out = bytearray()
    code, length = 0, 0
    for byte in data:
        for shift in range(7, -1, -1):
            code = (code << 1) | ((byte >> shift) & 1)
            length += 1
            sym = _HUFFMAN_DECODE.get((length, code))
            if sym is not None:
                if sym == 256:
                    raise ValueError("EOS in a Huffman string")
                out.append(sym)
                code, length = 0, 0
            elif length > 30:
                raise ValueError("bad Huffman code")
    if length > 7 or code != (1 << length) - 1:
        raise ValueError("bad Huffman padding")
    return bytes(out)


class HpackError(ValueError):
    pass


class HpackDecoder:
    """Decodes header blocks of one connection, in order."""

    def __init__(self, max_table_size=4096):
        self.max_table_size = max_table_size
        self.table = []  # newest first
        self.table_size = 0

    def _entry(self, index):
        if index <= 0:
            raise HpackError("index 0")
        if index <= len(STATIC_TABLE):
            return STATIC_TABLE[index - 1]
        index -= len(STATIC_TABLE) + 1
        if index >= len(self.table):
            raise HpackError("index past the dynamic table")
        return self.table[index]

    def _evict(self):
        while self.table_size > self.max_table_size and self.table:
            name, value = self.table.pop()
            self.table_size -= len(name) + len(value) + 32

    def _add(self, name, value):
        self.table.insert(0, (name, value))
        self.table_size += len(name) + len(value) + 32
        self._evict()

    @staticmethod
    def _int(block, pos, prefix_bits):
        limit = (1 << prefix_bits) - 1
        value = block[pos] & limit
        pos += 1
        if value < limit:
            return value, pos
        shift = 0
        while True:
            if pos >= len(block):
                raise HpackError("truncated integer")
            byte = block[pos]
            pos += 1
            value += (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value, pos

    def _str(self, block, pos):
        huffman = block[pos] & 0x80
        length, pos = self._int(block, pos, 7)
        if pos + length > len(block):
            raise HpackError("truncated string")
        raw = bytes(block[pos:pos + length])
        return (huffman_decode(raw) if huffman else raw).decode(
            "latin-1"), pos + length

    def decode(self, block):
        """The (name, value) pairs of a complete header block."""
        headers, pos = [], 0
        while pos < len(block):
            byte = block[pos]
            if byte & 0x80:  # indexed field
                index, pos = self._int(block, pos, 7)
                headers.append(self._entry(index))
                continue
            if byte & 0xE0 == 0x20:  # dynamic table size update
                size, pos = self._int(block, pos, 5)
                self.max_table_size = size
                self._evict()
                continue
            if byte & 0x40:  # literal with incremental indexing
                index, pos = self._int(block, pos, 6)
                indexing = True
            else:  # without indexing (0000) or never indexed (0001)
                index, pos = self._int(block, pos, 4)
                indexing = False
            if index:
                name = self._entry(index)[0]
            else:
                name, pos = self._str(block, pos)
            value, pos = self._str(block, pos)
            headers.append((name, value))
            if indexing:
                self._add(name, value)
        return headers


# --- gRPC message framing --------------------------------------------------

def grpc_prefix(length, compressed=False):
    return struct.pack(">BI", 1 if compressed else 0, length)


def grpc_message(payload):
    return grpc_prefix(len(payload)) + payload


class GrpcMessageReader:
    """Splits a stream's DATA into gRPC messages. Messages longer than
    keep_max are skipped (counted, never buffered), so reading large results
    costs no memory."""

    def __init__(self, keep_max=1 << 20):
        self.keep_max = keep_max
        self.header = bytearray()
        self.remaining = None  # bytes of the current message still to come
        self.body = None       # bytearray, or None while skipping
        self.messages = 0
        self.skipped = 0

    def feed(self, data):
        """Returns the complete messages kept from data."""
        out, pos, data = [], 0, memoryview(data)
        while pos < len(data):
            if self.remaining is None:
                need = 5 - len(self.header)
                self.header += data[pos:pos + need]
                pos += min(need, len(data) - pos)
                if len(self.header) < 5:
                    break
                self.remaining = struct.unpack(">I", self.header[1:5])[0]
                self.header = bytearray()
                self.body = bytearray() if self.remaining <= self.keep_max \
                    else None
            take = min(self.remaining, len(data) - pos)
            if self.body is not None:
                self.body += data[pos:pos + take]
            pos += take
            self.remaining -= take
            if self.remaining == 0:
                self.messages += 1
                if self.body is None:
                    self.skipped += 1
                else:
                    out.append(bytes(self.body))
                self.remaining, self.body = None, None
        return out


# --- protobuf --------------------------------------------------------------

VARINT, I64, LEN, I32 = 0, 1, 2, 5


def varint(value):
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_varint(buf, pos=0):
    """(value, next position)."""
    value, shift = 0, 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos
        if shift > 63:
            raise ValueError("varint too long")


def key(field, wire_type):
    return varint((field << 3) | wire_type)


def pb_uint(field, value):
    """A varint field; proto3 leaves out zeros."""
    return key(field, VARINT) + varint(value) if value else b""


def pb_float(field, value):
    return key(field, I32) + struct.pack("<f", value) if value else b""


def pb_bytes(field, data, always=False):
    if isinstance(data, str):
        data = data.encode("utf-8")
    if not data and not always:
        return b""
    return key(field, LEN) + varint(len(data)) + data


def pb_len_prefix(field, length):
    """The key and length of a LEN field whose bytes follow separately."""
    return key(field, LEN) + varint(length)


def scan_fields(buf):
    """[(field, wire_type, value)] of a message: varints as int, LEN fields as
    bytes, fixed fields as raw bytes."""
    fields, pos = [], 0
    while pos < len(buf):
        tag, pos = read_varint(buf, pos)
        field, wire_type = tag >> 3, tag & 7
        if wire_type == VARINT:
            value, pos = read_varint(buf, pos)
        elif wire_type == LEN:
            length, pos = read_varint(buf, pos)
            if pos + length > len(buf):
                raise ValueError("truncated field %d" % field)
            value, pos = bytes(buf[pos:pos + length]), pos + length
        elif wire_type == I32:
            value, pos = bytes(buf[pos:pos + 4]), pos + 4
        elif wire_type == I64:
            value, pos = bytes(buf[pos:pos + 8]), pos + 8
        else:
            raise ValueError("wire type %d" % wire_type)
        fields.append((field, wire_type, value))
    return fields


def field_map(buf):
    """{field: last value} of a message (what proto3 singular fields mean)."""
    return {f: v for f, _, v in scan_fields(buf)}


def gemm_params(m, n, k, alpha=1.0, beta=0.0, kernel=b"", timeout_ms=0,
                inline_result_max_bytes=0):
    """GemmParams; kernel as bytes so that it may be invalid UTF-8."""
    return (pb_uint(1, m) + pb_uint(2, n) + pb_uint(3, k) +
            pb_float(6, alpha) + pb_float(7, beta) + pb_bytes(8, kernel) +
            pb_uint(9, timeout_ms) + pb_uint(10, inline_result_max_bytes))


def gemm_request(params, a=b"", b=b"", c=b""):
    return pb_bytes(1, params, always=True) + pb_bytes(2, a) + \
        pb_bytes(3, b) + pb_bytes(4, c)


def gemm_request_parts(params, a_len, b_len, c_len):
    """GemmRequest whose operands are zeros, as parts to send in order:
    bytes, or an int for that many zero bytes (never materialized)."""
    parts = [pb_bytes(1, params, always=True)]
    for field, length in ((2, a_len), (3, b_len), (4, c_len)):
        if length:
            parts += [pb_len_prefix(field, length), length]
    return parts


def parts_length(parts):
    return sum(p if isinstance(p, int) else len(p) for p in parts)


def stream_request(job_id, params=None, job=None, end_of_job=False):
    """StreamRequest: params starts a job; job is a whole GemmRequest."""
    out = pb_uint(1, job_id)
    if params is not None:
        out += pb_bytes(2, params, always=True)
    if end_of_job:
        out += pb_uint(6, 1)
    if job is not None:
        out += pb_bytes(7, job, always=True)
    return out


def parse_stream_response(buf):
    """(job_id, kind, code, message): kind "chunk" or "end"; code and message
    only for "end"."""
    fields = field_map(buf)
    job_id = fields.get(1, 0)
    if 3 in fields:
        end = field_map(fields[3])
        code = end.get(1, 0)
        if code >= 1 << 63:  # a negative int32 travels as 64 bits
            code -= 1 << 64
        return job_id, "end", code, end.get(2, b"").decode("utf-8", "replace")
    return job_id, "chunk", None, None


def parse_info_response(buf):
    """The figures of an InfoResponse the attacks size themselves by."""
    fields = field_map(buf)
    limits = field_map(fields.get(5, b""))
    stats = field_map(fields.get(7, b""))
    return {
        "version": fields.get(1, b"").decode("utf-8", "replace"),
        "backend": fields.get(2, b"").decode("utf-8", "replace"),
        "max_dim": limits.get(1, 0),
        "max_job_bytes": limits.get(2, 0),
        "max_message_bytes": limits.get(3, 0),
        "max_queued_jobs": limits.get(4, 0),
        "max_inflight_bytes": limits.get(5, 0),
        "result_chunk_bytes": limits.get(6, 0),
        "jobs_ok": stats.get(1, 0),
        "jobs_failed": stats.get(2, 0),
        "jobs_rejected": stats.get(3, 0),
    }
