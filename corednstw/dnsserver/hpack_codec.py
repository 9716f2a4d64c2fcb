"""HPACK (RFC 7541) decoding of HTTP/2 request headers, and the few
encodings the DoH and gRPC listeners' answers need.

The decoder keeps the dynamic table (evicting by the RFC's entry size),
reads the integer and string representations and decodes Huffman strings
with a table per decoder state that takes a whole octet at a time (rows
built on first use); decoded Huffman strings are also kept in a small
cache, since a client sends the same ones again and again.  Answers are
encoded without Huffman and without indexing: indexed static fields and
literals, cached per field.
"""

#: RFC 7541 Appendix A: (name, value) for indexes 1 to 61.
STATIC = (
    (b':authority', b''),
    (b':method', b'GET'),
    (b':method', b'POST'),
    (b':path', b'/'),
    (b':path', b'/index.html'),
    (b':scheme', b'http'),
    (b':scheme', b'https'),
    (b':status', b'200'),
    (b':status', b'204'),
    (b':status', b'206'),
    (b':status', b'304'),
    (b':status', b'400'),
    (b':status', b'404'),
    (b':status', b'500'),
    (b'accept-charset', b''),
    (b'accept-encoding', b'gzip, deflate'),
    (b'accept-language', b''),
    (b'accept-ranges', b''),
    (b'accept', b''),
    (b'access-control-allow-origin', b''),
    (b'age', b''),
    (b'allow', b''),
    (b'authorization', b''),
    (b'cache-control', b''),
    (b'content-disposition', b''),
    (b'content-encoding', b''),
    (b'content-language', b''),
    (b'content-length', b''),
    (b'content-location', b''),
    (b'content-range', b''),
    (b'content-type', b''),
    (b'cookie', b''),
    (b'date', b''),
    (b'etag', b''),
    (b'expect', b''),
    (b'expires', b''),
    (b'from', b''),
    (b'host', b''),
    (b'if-match', b''),
    (b'if-modified-since', b''),
    (b'if-none-match', b''),
    (b'if-range', b''),
    (b'if-unmodified-since', b''),
    (b'last-modified', b''),
    (b'link', b''),
    (b'location', b''),
    (b'max-forwards', b''),
    (b'proxy-authenticate', b''),
    (b'proxy-authorization', b''),
    (b'range', b''),
    (b'referer', b''),
    (b'refresh', b''),
    (b'retry-after', b''),
    (b'server', b''),
    (b'set-cookie', b''),
    (b'strict-transport-security', b''),
    (b'transfer-encoding', b''),
    (b'user-agent', b''),
    (b'vary', b''),
    (b'via', b''),
    (b'www-authenticate', b''),
)

#: RFC 7541 Appendix B: (code, bit length) of symbols 0 to 256 (EOS).
HUFFMAN = (
    (0x1ff8, 13), (0x7fffd8, 23), (0xfffffe2, 28), (0xfffffe3, 28),
    (0xfffffe4, 28), (0xfffffe5, 28), (0xfffffe6, 28), (0xfffffe7, 28),
    (0xfffffe8, 28), (0xffffea, 24), (0x3ffffffc, 30), (0xfffffe9, 28),
    (0xfffffea, 28), (0x3ffffffd, 30), (0xfffffeb, 28), (0xfffffec, 28),
    (0xfffffed, 28), (0xfffffee, 28), (0xfffffef, 28), (0xffffff0, 28),
    (0xffffff1, 28), (0xffffff2, 28), (0x3ffffffe, 30), (0xffffff3, 28),
    (0xffffff4, 28), (0xffffff5, 28), (0xffffff6, 28), (0xffffff7, 28),
    (0xffffff8, 28), (0xffffff9, 28), (0xffffffa, 28), (0xffffffb, 28),
    (0x14, 6), (0x3f8, 10), (0x3f9, 10), (0xffa, 12), (0x1ff9, 13),
    (0x15, 6), (0xf8, 8), (0x7fa, 11), (0x3fa, 10), (0x3fb, 10), (0xf9, 8),
    (0x7fb, 11), (0xfa, 8), (0x16, 6), (0x17, 6), (0x18, 6), (0x0, 5),
    (0x1, 5), (0x2, 5), (0x19, 6), (0x1a, 6), (0x1b, 6), (0x1c, 6),
    (0x1d, 6), (0x1e, 6), (0x1f, 6), (0x5c, 7), (0xfb, 8), (0x7ffc, 15),
    (0x20, 6), (0xffb, 12), (0x3fc, 10), (0x1ffa, 13), (0x21, 6), (0x5d, 7),
    (0x5e, 7), (0x5f, 7), (0x60, 7), (0x61, 7), (0x62, 7), (0x63, 7),
    (0x64, 7), (0x65, 7), (0x66, 7), (0x67, 7), (0x68, 7), (0x69, 7),
    (0x6a, 7), (0x6b, 7), (0x6c, 7), (0x6d, 7), (0x6e, 7), (0x6f, 7),
    (0x70, 7), (0x71, 7), (0x72, 7), (0xfc, 8), (0x73, 7), (0xfd, 8),
    (0x1ffb, 13), (0x7fff0, 19), (0x1ffc, 13), (0x3ffc, 14), (0x22, 6),
    (0x7ffd, 15), (0x3, 5), (0x23, 6), (0x4, 5), (0x24, 6), (0x5, 5),
    (0x25, 6), (0x26, 6), (0x27, 6), (0x6, 5), (0x74, 7), (0x75, 7),
    (0x28, 6), (0x29, 6), (0x2a, 6), (0x7, 5), (0x2b, 6), (0x76, 7),
    (0x2c, 6), (0x8, 5), (0x9, 5), (0x2d, 6), (0x77, 7), (0x78, 7),
    (0x79, 7), (0x7a, 7), (0x7b, 7), (0x7ffe, 15), (0x7fc, 11), (0x3ffd, 14),
    (0x1ffd, 13), (0xffffffc, 28), (0xfffe6, 20), (0x3fffd2, 22),
    (0xfffe7, 20), (0xfffe8, 20), (0x3fffd3, 22), (0x3fffd4, 22),
    (0x3fffd5, 22), (0x7fffd9, 23), (0x3fffd6, 22), (0x7fffda, 23),
    (0x7fffdb, 23), (0x7fffdc, 23), (0x7fffdd, 23), (0x7fffde, 23),
    (0xffffeb, 24), (0x7fffdf, 23), (0xffffec, 24), (0xffffed, 24),
    (0x3fffd7, 22), (0x7fffe0, 23), (0xffffee, 24), (0x7fffe1, 23),
    (0x7fffe2, 23), (0x7fffe3, 23), (0x7fffe4, 23), (0x1fffdc, 21),
    (0x3fffd8, 22), (0x7fffe5, 23), (0x3fffd9, 22), (0x7fffe6, 23),
    (0x7fffe7, 23), (0xffffef, 24), (0x3fffda, 22), (0x1fffdd, 21),
    (0xfffe9, 20), (0x3fffdb, 22), (0x3fffdc, 22), (0x7fffe8, 23),
    (0x7fffe9, 23), (0x1fffde, 21), (0x7fffea, 23), (0x3fffdd, 22),
    (0x3fffde, 22), (0xfffff0, 24), (0x1fffdf, 21), (0x3fffdf, 22),
    (0x7fffeb, 23), (0x7fffec, 23), (0x1fffe0, 21), (0x1fffe1, 21),
    (0x3fffe0, 22), (0x1fffe2, 21), (0x7fffed, 23), (0x3fffe1, 22),
    (0x7fffee, 23), (0x7fffef, 23), (0xfffea, 20), (0x3fffe2, 22),
    (0x3fffe3, 22), (0x3fffe4, 22), (0x7ffff0, 23), (0x3fffe5, 22),
    (0x3fffe6, 22), (0x7ffff1, 23), (0x3ffffe0, 26), (0x3ffffe1, 26),
    (0xfffeb, 20), (0x7fff1, 19), (0x3fffe7, 22), (0x7ffff2, 23),
    (0x3fffe8, 22), (0x1ffffec, 25), (0x3ffffe2, 26), (0x3ffffe3, 26),
    (0x3ffffe4, 26), (0x7ffffde, 27), (0x7ffffdf, 27), (0x3ffffe5, 26),
    (0xfffff1, 24), (0x1ffffed, 25), (0x7fff2, 19), (0x1fffe3, 21),
    (0x3ffffe6, 26), (0x7ffffe0, 27), (0x7ffffe1, 27), (0x3ffffe7, 26),
    (0x7ffffe2, 27), (0xfffff2, 24), (0x1fffe4, 21), (0x1fffe5, 21),
    (0x3ffffe8, 26), (0x3ffffe9, 26), (0xffffffd, 28), (0x7ffffe3, 27),
    (0x7ffffe4, 27), (0x7ffffe5, 27), (0xfffec, 20), (0xfffff3, 24),
    (0xfffed, 20), (0x1fffe6, 21), (0x3fffe9, 22), (0x1fffe7, 21),
    (0x1fffe8, 21), (0x7ffff3, 23), (0x3fffea, 22), (0x3fffeb, 22),
    (0x1ffffee, 25), (0x1ffffef, 25), (0xfffff4, 24), (0xfffff5, 24),
    (0x3ffffea, 26), (0x7ffff4, 23), (0x3ffffeb, 26), (0x7ffffe6, 27),
    (0x3ffffec, 26), (0x3ffffed, 26), (0x7ffffe7, 27), (0x7ffffe8, 27),
    (0x7ffffe9, 27), (0x7ffffea, 27), (0x7ffffeb, 27), (0xffffffe, 28),
    (0x7ffffec, 27), (0x7ffffed, 27), (0x7ffffee, 27), (0x7ffffef, 27),
    (0x7fffff0, 27), (0x3ffffee, 26), (0x3fffffff, 30),
)

#: Largest dynamic table a client may ask for (our SETTINGS_HEADER_TABLE_SIZE).
TABLE_SIZE = 4096

#: Octets the RFC counts per table entry beyond its name and value.
ENTRY_OVERHEAD = 32


class HPACKError(ValueError):
    """A header block that does not decode (COMPRESSION_ERROR)."""


def _tree():
    """The Huffman code as a binary tree: ``kids[node]`` is the pair of
    the node's children, each another node's number or ``~symbol``."""
    kids = [[0, 0]]
    for sym, (code, length) in enumerate(HUFFMAN):
        node = 0
        for shift in range(length - 1, 0, -1):
            bit = (code >> shift) & 1
            nxt = kids[node][bit]
            if nxt <= 0:
                kids.append([0, 0])
                nxt = kids[node][bit] = len(kids) - 1
            node = nxt
        kids[node][code & 1] = ~sym
    return kids


_KIDS = _tree()


def _ends():
    """The nodes a string may end on: the root, or up to seven one bits
    into the code (the EOS prefix that pads the last octet)."""
    ends = {0}
    node = 0
    for _ in range(7):
        node = _KIDS[node][1]
        ends.add(node)
    return frozenset(ends)


_ENDS = _ends()
#: Per node, times 256, plus the input octet: the (next node times 256,
#: octets out) taken on that octet; None where the octet decodes EOS or
#: the node's row is not built yet (rows are built on first use).
_FLAT = [None] * (len(_KIDS) << 8)
_BUILT = bytearray(len(_KIDS))


def _step(at):
    """The entry at ``at`` of _FLAT, its row built first if need be
    (HPACKError for EOS)."""
    state = at >> 8
    if not _BUILT[state]:
        _BUILT[state] = 1
        for octet in range(256):
            node = state
            out = bytearray()
            for shift in range(7, -1, -1):
                nxt = _KIDS[node][(octet >> shift) & 1]
                if nxt < 0:
                    if nxt == ~256:
                        out = None
                        break
                    out.append(~nxt)
                    nxt = 0
                node = nxt
            if out is not None:
                _FLAT[state << 8 | octet] = (node << 8, bytes(out))
    step = _FLAT[at]
    if step is None:
        raise HPACKError("EOS in a Huffman string")
    return step


def huffman_decode(data):
    """The octets a Huffman-coded string stands for (HPACKError for EOS
    inside it or padding that is not a short run of one bits)."""
    flat = _FLAT
    state = 0
    out = []
    for octet in data:
        step = flat[state | octet]
        if step is None:
            step = _step(state | octet)
        state, chunk = step
        out.append(chunk)
    if state >> 8 not in _ENDS:
        raise HPACKError("bad Huffman padding")
    return b"".join(out)


def huffman_encode(data):
    """Huffman coding of ``data`` (for tests and clients)."""
    acc = bits = 0
    for octet in data:
        code, length = HUFFMAN[octet]
        acc = (acc << length) | code
        bits += length
    pad = -bits % 8
    acc = (acc << pad) | ((1 << pad) - 1)
    return acc.to_bytes((bits + pad) // 8, "big")


#: Huffman strings decoded lately (encoded -> decoded), cleared when full.
_CACHE = {}
_CACHE_SIZE = 512


class Decoder:
    """The decoding side of one connection's HPACK context."""

    __slots__ = ("table", "size", "limit", "max_limit")

    def __init__(self, max_limit=TABLE_SIZE):
        self.table = []         # the dynamic table, newest entry last
        self.size = 0
        self.limit = max_limit  # as the encoder last set it
        self.max_limit = max_limit

    def decode(self, block, limit=None):
        """The (name, value) pairs of a whole header block, and their
        size as SETTINGS_MAX_HEADER_LIST_SIZE counts it.  With ``limit``,
        the size is counted only when the block could decode past it
        (each octet stands for at most a table entry and 32 more), else
        given as 0."""
        headers = []
        listed = 0
        count = limit is None or len(block) * (self.max_limit + 34) > limit
        i, end = 0, len(block)
        table = self.table
        try:
            while i < end:
                b = block[i]
                if b & 0x80:                    # indexed field
                    if 0x80 < b < 0xBE:         # static, one octet
                        field = STATIC[b - 0x81]
                        i += 1
                    elif 0xBE <= b < 0xFF and b - 0xBE < len(table):
                        field = table[0xBD - b]  # dynamic, one octet
                        i += 1
                    else:
                        index, i = _integer(block, i, 0x7F)
                        field = self._field(index)
                elif b & 0x40:                  # literal, indexed
                    field, i = self._literal(block, i, 0x3F)
                    self._add(field)
                elif b & 0x20:                  # table size update
                    if headers:
                        raise HPACKError("size update after a field")
                    size, i = _integer(block, i, 0x1F)
                    if size > self.max_limit:
                        raise HPACKError("table size over the limit")
                    self.limit = size
                    self._evict(size)
                    continue
                else:                           # literal, not indexed
                    field, i = self._literal(block, i, 0x0F)
                headers.append(field)
                if count:
                    listed += len(field[0]) + len(field[1]) + ENTRY_OVERHEAD
        except IndexError:
            raise HPACKError("header block cut short") from None
        return headers, listed

    def _field(self, index):
        if 0 < index <= 61:
            return STATIC[index - 1]
        k = index - 62
        if index == 0 or k >= len(self.table):
            raise HPACKError("no header at index %d" % index)
        return self.table[-1 - k]

    def _literal(self, block, i, mask):
        index, i = _integer(block, i, mask)
        if index:
            name = self._field(index)[0]
        else:
            name, i = _string(block, i)
        value, i = _string(block, i)
        return (name, value), i

    def _add(self, field):
        size = len(field[0]) + len(field[1]) + ENTRY_OVERHEAD
        if size > self.limit:
            self.table.clear()
            self.size = 0
            return
        self._evict(self.limit - size)
        self.table.append(field)
        self.size += size

    def _evict(self, room):
        table = self.table
        while self.size > room:
            name, value = table.pop(0)
            self.size -= len(name) + len(value) + ENTRY_OVERHEAD


def _integer(block, i, mask):
    """An integer with an N-bit prefix (``mask``) at ``block[i]``."""
    value = block[i] & mask
    i += 1
    if value < mask:
        return value, i
    shift = 0
    while True:
        b = block[i]
        i += 1
        value += (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7
        if shift > 28:
            raise HPACKError("integer too large")


def _string(block, i):
    huffman = block[i] & 0x80
    length, i = _integer(block, i, 0x7F)
    end = i + length
    if end > len(block):
        raise HPACKError("string cut short")
    raw = block[i:end]
    if not huffman:
        return raw, end
    text = _CACHE.get(raw)
    if text is None:
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.clear()
        text = _CACHE[raw] = huffman_decode(raw)
    return text, end


# -- encoding (answers) -------------------------------------------------

def encode_integer(value, mask, first=0):
    """An integer with an N-bit prefix (``mask``), ``first`` the bits
    above the prefix."""
    if value < mask:
        return bytes((first | value,))
    out = bytearray((first | mask,))
    value -= mask
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _static_index():
    names, fields = {}, {}
    for index, (name, value) in enumerate(STATIC, 1):
        names.setdefault(name, index)
        fields.setdefault((name, value), index)
    return names, fields


_NAMES, _FIELDS = _static_index()
#: Encoded answer fields (name, value) -> octets, cleared when full.
_ENCODED = {}


def encode_field(name, value):
    """One field as an indexed static entry when the table has it whole,
    else as a literal without indexing (the name indexed when the static
    table has it), never Huffman-coded."""
    key = (name, value)
    out = _ENCODED.get(key)
    if out is not None:
        return out
    index = _FIELDS.get(key)
    if index is not None:
        out = encode_integer(index, 0x7F, 0x80)
    else:
        index = _NAMES.get(name)
        if index is not None:
            out = encode_integer(index, 0x0F)
        else:
            out = b"\x00" + encode_integer(len(name), 0x7F) + name
        out += encode_integer(len(value), 0x7F) + value
    if len(_ENCODED) >= 1024:
        _ENCODED.clear()
    _ENCODED[key] = out
    return out


def encode(headers):
    """A header block for ``headers`` (see ``encode_field``)."""
    return b"".join([encode_field(n, v) for n, v in headers])
