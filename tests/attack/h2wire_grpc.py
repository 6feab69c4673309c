"""gRPC over HTTP/2 for h2wire.py: status code names, request headers and the
5-byte message framing.

A GrpcMessageReader belongs to one stream.
"""

import struct

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


def grpc_request_headers(path, authority="attack", extra=()):
    return [(":method", "POST"), (":scheme", "http"), (":path", path),
            (":authority", authority), ("content-type", "application/grpc"),
            ("te", "trailers")] + list(extra)


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
