"""Protobuf for h2wire.py: the encoding of the few gemm.v1 messages the
attacks send (proto/gemm.proto), with a field scanner for the few they read.
"""

import struct

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
