"""Unit tests of the encoders the attack harness hand-rolls (h2wire.py).

Run from this folder: python3 -m unittest attack_selftest
(or from anywhere: python3 tests/attack/attack_selftest.py).
"""

import os
import struct
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import h2wire as w  # noqa: E402  pylint: disable=wrong-import-position


def decode_frames(data):
    """[(type, flags, stream_id, payload)] of a byte string of frames."""
    frames, pos = [], 0
    while pos < len(data):
        length, ftype, flags, sid = w.parse_frame_header(data, pos)
        frames.append((ftype, flags, sid, data[pos + 9:pos + 9 + length]))
        pos += 9 + length
    assert pos == len(data), "trailing bytes"
    return frames


def decode_varint_fields(buf):
    return {f: v for f, _, v in w.scan_fields(buf)}


class FrameTest(unittest.TestCase):

    def test_header_layout(self):
        frame = w.frame(w.HEADERS, w.END_HEADERS | w.END_STREAM, 5, b"abc")
        self.assertEqual(frame[:9], bytes([0, 0, 3, 1, 5, 0, 0, 0, 5]))
        self.assertEqual(w.parse_frame_header(frame), (3, w.HEADERS, 5, 5))

    def test_length_is_24_bits_and_reserved_bit_clear(self):
        header = w.frame_header(w.DATA, 0, 0x80000003, 0x123456)
        self.assertEqual(header[:3], b"\x12\x34\x56")
        self.assertEqual(w.parse_frame_header(header), (0x123456, w.DATA, 0, 3))
        self.assertEqual(header[5] & 0x80, 0)

    def test_settings_round_trip_and_ack(self):
        frame = w.settings([(w.SETTINGS_INITIAL_WINDOW_SIZE, 1024),
                            (w.SETTINGS_ENABLE_PUSH, 0)])
        [(ftype, flags, sid, payload)] = decode_frames(frame)
        self.assertEqual((ftype, flags, sid), (w.SETTINGS, 0, 0))
        self.assertEqual(w.parse_settings(payload),
                         [(w.SETTINGS_INITIAL_WINDOW_SIZE, 1024),
                          (w.SETTINGS_ENABLE_PUSH, 0)])
        self.assertEqual(w.SETTINGS_ACK, bytes([0, 0, 0, 4, 1, 0, 0, 0, 0]))

    def test_window_update_rst_ping_goaway(self):
        [(t, _, sid, p)] = decode_frames(w.window_update(3, 70000))
        self.assertEqual((t, sid, struct.unpack(">I", p)[0]),
                         (w.WINDOW_UPDATE, 3, 70000))
        [(t, _, sid, p)] = decode_frames(w.rst_stream(7))
        self.assertEqual((t, sid, struct.unpack(">I", p)[0]),
                         (w.RST_STREAM, 7, w.CANCEL))
        [(t, flags, _, p)] = decode_frames(w.ping(b"12345678", ack=True))
        self.assertEqual((t, flags, p), (w.PING, w.ACK, b"12345678"))
        payload = struct.pack(">II", 9, 0xb) + b"calm down"
        self.assertEqual(w.parse_goaway(payload), (9, 0xb, b"calm down"))
        self.assertEqual(w.error_name(0xb), "ENHANCE_YOUR_CALM")

    def test_padding_and_priority_are_stripped(self):
        payload = bytes([2]) + b"\0\0\0\1\x10" + b"block" + b"\0\0"
        self.assertEqual(bytes(w.strip_padding(
            w.PADDED | w.PRIORITY_FLAG, payload, priority_flag=True)),
            b"block")
        self.assertEqual(bytes(w.strip_padding(0, b"data")), b"data")

    def test_preface(self):
        self.assertEqual(w.PREFACE, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")


class HpackTest(unittest.TestCase):

    def test_integer_examples_of_rfc7541_c1(self):
        self.assertEqual(w.encode_int(10, 5), bytes([0b01010]))
        self.assertEqual(w.encode_int(1337, 5), bytes([31, 154, 10]))
        self.assertEqual(w.encode_int(42, 8), bytes([42]))
        for value in (0, 1, 30, 31, 127, 128, 1337, 2**30, 2**31 - 1):
            for prefix in (4, 5, 6, 7, 8):
                encoded = w.encode_int(value, prefix)
                decoded, pos = w.HpackDecoder._int(encoded, 0, prefix)
                self.assertEqual((decoded, pos), (value, len(encoded)))

    def test_our_literals_are_plain_and_unindexed(self):
        block = w.encode_literal("x-key", "value")
        self.assertEqual(block, b"\x00\x05x-key\x05value")
        long_value = "v" * 300
        block = w.encode_literal("k", long_value)
        self.assertEqual(block[:3], b"\x00\x01k")
        # 300 = 127 + (0x2d | continue) + 1 * 128
        self.assertEqual(block[3:6], bytes([0x7f, 0xad, 0x01]))

    def test_request_headers_decode_back(self):
        headers = w.grpc_request_headers("/gemm.v1.GemmService/Gemm",
                                         "127.0.0.1:1",
                                         [("x-bad", "\xff\xfe")])
        decoder = w.HpackDecoder()
        self.assertEqual(decoder.decode(w.encode_headers(headers)), headers)
        self.assertEqual(decoder.table, [], "never indexed")

    def test_decoder_follows_rfc7541_c3_requests(self):
        # C.3: requests without Huffman coding, sharing a dynamic table.
        d = w.HpackDecoder()
        self.assertEqual(d.decode(bytes.fromhex(
            "828684410f7777772e6578616d706c652e636f6d")),
            [(":method", "GET"), (":scheme", "http"), (":path", "/"),
             (":authority", "www.example.com")])
        self.assertEqual(d.decode(bytes.fromhex(
            "828684be58086e6f2d6361636865")),
            [(":method", "GET"), (":scheme", "http"), (":path", "/"),
             (":authority", "www.example.com"),
             ("cache-control", "no-cache")])
        self.assertEqual(d.decode(bytes.fromhex(
            "828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565")),
            [(":method", "GET"), (":scheme", "https"),
             (":path", "/index.html"), (":authority", "www.example.com"),
             ("custom-key", "custom-value")])
        self.assertEqual(d.table_size, 164)

    def test_decoder_follows_rfc7541_c6_huffman_responses_with_eviction(self):
        # C.6: responses with Huffman coding and a 256-byte table.
        d = w.HpackDecoder(max_table_size=256)
        first = d.decode(bytes.fromhex(
            "488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082"
            "a62d1bff6e919d29ad171863c78f0b97c8e9ae82ae43d3"))
        self.assertEqual(first, [
            (":status", "302"), ("cache-control", "private"),
            ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
            ("location", "https://www.example.com")])
        second = d.decode(bytes.fromhex("4883640effc1c0bf"))
        self.assertEqual(second[0], (":status", "307"))
        self.assertEqual(second[1:], first[1:])
        self.assertEqual(d.table_size, 222)

    def test_huffman_codes_match_rfc7541_appendix_b(self):
        self.assertEqual(w.HUFFMAN_CODES[0], 0x1ff8)
        self.assertEqual(w.HUFFMAN_CODES[ord("0")], 0x0)
        self.assertEqual(w.HUFFMAN_CODES[ord("a")], 0x3)
        self.assertEqual(w.HUFFMAN_CODES[255], 0x3ffffee)
        self.assertEqual(w.HUFFMAN_CODES[256], 0x3fffffff)
        self.assertEqual(w.huffman_encode(b"www.example.com").hex(),
                         "f1e3c2e5f23a6ba0ab90f4ff")
        for text in (b"", b"no-cache", bytes(range(256)), b"grpc-status"):
            self.assertEqual(w.huffman_decode(w.huffman_encode(text)), text)

    def test_huffman_rejects_bad_padding(self):
        with self.assertRaises(ValueError):
            w.huffman_decode(b"\x00")  # '0' then 3 zero bits of padding

    def test_size_update_and_bad_index(self):
        d = w.HpackDecoder()
        d.decode(bytes.fromhex(
            "400a637573746f6d2d6b65790c637573746f6d2d76616c7565"))
        self.assertEqual(len(d.table), 1)
        d.decode(b"\x20")  # table size 0: evicts everything
        self.assertEqual(d.table, [])
        with self.assertRaises(w.HpackError):
            d.decode(b"\xbe")


class GrpcFramingTest(unittest.TestCase):

    def test_prefix(self):
        self.assertEqual(w.grpc_message(b"abc"), b"\0\0\0\0\3abc")
        self.assertEqual(w.grpc_prefix(64 << 20), b"\0\x04\0\0\0")

    def test_reader_splits_across_feeds_and_skips_large(self):
        stream = (w.grpc_message(b"one") + w.grpc_message(b"x" * 100) +
                  w.grpc_message(b"") + w.grpc_message(b"two"))
        reader = w.GrpcMessageReader(keep_max=10)
        out = []
        for i in range(0, len(stream), 3):
            out += reader.feed(stream[i:i + 3])
        self.assertEqual(out, [b"one", b"", b"two"])
        self.assertEqual((reader.messages, reader.skipped), (4, 1))


class ProtobufTest(unittest.TestCase):

    def test_varints(self):
        cases = {0: b"\x00", 1: b"\x01", 127: b"\x7f", 128: b"\x80\x01",
                 300: b"\xac\x02", 2**32: b"\x80\x80\x80\x80\x10",
                 -1: b"\xff" * 9 + b"\x01"}
        for value, encoded in cases.items():
            self.assertEqual(w.varint(value), encoded)
            self.assertEqual(w.read_varint(encoded),
                             (value % 2**64, len(encoded)))
        with self.assertRaises(ValueError):
            w.read_varint(b"\x80")

    def test_gemm_params(self):
        params = w.gemm_params(23170, 23170, 0, alpha=1.0, beta=0.0,
                               kernel=b"\xff", timeout_ms=5)
        fields = w.scan_fields(params)
        self.assertEqual(fields, [
            (1, w.VARINT, 23170), (2, w.VARINT, 23170),
            (6, w.I32, struct.pack("<f", 1.0)), (8, w.LEN, b"\xff"),
            (9, w.VARINT, 5)])
        self.assertEqual(params[:3], b"\x08\x82\xb5")

    def test_gemm_request_and_parts_agree(self):
        params = w.gemm_params(2, 3, 4, beta=1.0)
        a, b, c = bytes(32), bytes(48), bytes(24)
        whole = w.gemm_request(params, a, b, c)
        parts = w.gemm_request_parts(params, 32, 48, 24)
        flat = b"".join(bytes(p) if isinstance(p, int) else p for p in parts)
        self.assertEqual(flat, whole)
        self.assertEqual(w.parts_length(parts), len(whole))
        fields = decode_varint_fields(whole)
        self.assertEqual((fields[1], fields[2], fields[3], fields[4]),
                         (params, a, b, c))

    def test_gemm_request_keeps_empty_params(self):
        self.assertEqual(w.gemm_request(b""), b"\x0a\x00")

    def test_stream_request(self):
        params = w.gemm_params(1, 1, 1)
        msg = w.stream_request(7, params=params, end_of_job=True)
        self.assertEqual(w.scan_fields(msg), [
            (1, w.VARINT, 7), (2, w.LEN, params), (6, w.VARINT, 1)])
        job = w.gemm_request(params, b"abcd", b"efgh")
        msg = w.stream_request(2**40, job=job)
        self.assertEqual(w.scan_fields(msg),
                         [(1, w.VARINT, 2**40), (7, w.LEN, job)])

    def test_parse_stream_response(self):
        end = w.pb_uint(1, 4) + w.pb_bytes(2, "late")
        msg = w.pb_uint(1, 9) + w.pb_bytes(3, end)
        self.assertEqual(w.parse_stream_response(msg),
                         (9, "end", 4, "late"))
        chunk = w.pb_uint(1, 9) + w.pb_bytes(2, w.pb_bytes(2, b"data"))
        self.assertEqual(w.parse_stream_response(chunk)[:2], (9, "chunk"))
        negative = w.pb_uint(1, 1) + w.pb_bytes(3, w.key(1, w.VARINT) +
                                                 w.varint(-2))
        self.assertEqual(w.parse_stream_response(negative)[2], -2)
        self.assertEqual(w.parse_stream_response(w.pb_uint(1, 3) +
                                                 w.pb_bytes(3, b"", True)),
                         (3, "end", 0, ""))

    def test_parse_info_response(self):
        limits = w.pb_uint(1, 65536) + w.pb_uint(2, 2**31) + \
            w.pb_uint(3, 64 << 20) + w.pb_uint(5, 8 << 30)
        stats = w.pb_uint(1, 10) + w.pb_uint(3, 2)
        msg = w.pb_bytes(1, "0.2.0") + w.pb_bytes(2, "cpu") + \
            w.pb_bytes(4, "auto") + w.pb_bytes(5, limits) + \
            w.pb_bytes(7, stats)
        info = w.parse_info_response(msg)
        self.assertEqual((info["version"], info["max_inflight_bytes"],
                          info["max_message_bytes"], info["jobs_ok"],
                          info["jobs_rejected"], info["jobs_failed"]),
                         ("0.2.0", 8 << 30, 64 << 20, 10, 2, 0))

    def test_float_and_zero_fields_left_out(self):
        self.assertEqual(w.pb_float(6, 0.0), b"")
        self.assertEqual(w.pb_uint(3, 0), b"")
        self.assertEqual(w.pb_float(7, 1.0), b"\x3d\x00\x00\x80\x3f")


if __name__ == "__main__":
    unittest.main()
