"""HPACK (RFC 7541) for h2wire.py: the encoder writes literal fields without
indexing and without Huffman coding; the decoder reads all of HPACK, dynamic
table and Huffman included, since it must follow what gRPC sends.

An HpackDecoder belongs to one connection.
"""


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
