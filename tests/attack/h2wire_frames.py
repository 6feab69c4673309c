"""HTTP/2 frames (RFC 9113) for h2wire.py: constants, encoders and parsers.

Pure functions without I/O.
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
