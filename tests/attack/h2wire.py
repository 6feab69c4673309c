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

# The encodings live in modules of their own, by layer; this module gathers
# them under one name (import h2wire as w).
from h2wire_frames import *  # noqa: F401,F403  pylint: disable=wildcard-import,unused-wildcard-import
from h2wire_grpc import *  # noqa: F401,F403  pylint: disable=wildcard-import,unused-wildcard-import
from h2wire_hpack import *  # noqa: F401,F403  pylint: disable=wildcard-import,unused-wildcard-import
from h2wire_proto import *  # noqa: F401,F403  pylint: disable=wildcard-import,unused-wildcard-import
