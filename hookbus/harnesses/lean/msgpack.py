"""msgpack in plain Python, for the per-event adapter processes.

The bus's wire is msgpack made by msgspec (:mod:`hookbus.bus.wire`), but ``import msgspec``
alone costs most of a bare process start (docs/performance.md), and an adapter encodes one event
and decodes at most one decision per process: a few dozen lines of Python do that in
microseconds. The output is standard msgpack that msgspec's typed decoders read
(tests/unit/test_harness_wire.py checks both directions against msgspec).

Only what JSON can hold plus bytes is supported: nil, bool, int, float, str, bin, arrays
and maps. Extension types are refused.
"""

from __future__ import annotations


class MsgpackError(ValueError):
    """Bytes that are not the msgpack this codec reads, or a value it cannot write."""


def packb(value: object) -> bytes:
    """Encode ``value`` (JSON-like data, plus bytes) as msgpack."""
    out: list[bytes] = []
    _pack(value, out)
    return b"".join(out)


def _pack(value: object, out: list[bytes]) -> None:
    if value is None:
        out.append(b"\xc0")
    elif value is True:
        out.append(b"\xc3")
    elif value is False:
        out.append(b"\xc2")
    elif isinstance(value, int):
        out.append(_pack_int(value))
    elif isinstance(value, float):
        import struct  # floats are rare in hook input; most processes never load struct

        out.append(struct.pack(">Bd", 0xCB, value))
    elif isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
        n = len(data)
        if n < 32:
            out.append(bytes((0xA0 | n,)))
        elif n < 0x100:
            out.append(bytes((0xD9, n)))
        elif n < 0x10000:
            out.append(b"\xda" + n.to_bytes(2, "big"))
        else:
            out.append(b"\xdb" + n.to_bytes(4, "big"))
        out.append(data)
    elif isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
        n = len(data)
        if n < 0x100:
            out.append(bytes((0xC4, n)))
        elif n < 0x10000:
            out.append(b"\xc5" + n.to_bytes(2, "big"))
        else:
            out.append(b"\xc6" + n.to_bytes(4, "big"))
        out.append(data)
    elif isinstance(value, list | tuple):
        out.append(_container_head(len(value), 0x90, 0xDC))
        for item in value:
            _pack(item, out)
    elif isinstance(value, dict):
        out.append(_container_head(len(value), 0x80, 0xDE))
        for key, item in value.items():
            _pack(key, out)
            _pack(item, out)
    else:
        raise MsgpackError(f"cannot encode a {type(value).__name__} as msgpack")


def _container_head(n: int, fix: int, sixteen: int) -> bytes:
    if n < 16:
        return bytes((fix | n,))
    if n < 0x10000:
        return bytes((sixteen,)) + n.to_bytes(2, "big")
    return bytes((sixteen + 1,)) + n.to_bytes(4, "big")


def _pack_int(n: int) -> bytes:
    if 0 <= n < 0x80:
        return bytes((n,))
    if -32 <= n < 0:
        return bytes((n & 0xFF,))
    if n >= 0:
        for tag, size in ((0xCC, 1), (0xCD, 2), (0xCE, 4), (0xCF, 8)):
            if n < 1 << (8 * size):
                return bytes((tag,)) + n.to_bytes(size, "big")
    else:
        for tag, size in ((0xD0, 1), (0xD1, 2), (0xD2, 4), (0xD3, 8)):
            if n >= -(1 << (8 * size - 1)):
                return bytes((tag,)) + n.to_bytes(size, "big", signed=True)
    raise MsgpackError(f"integer {n} does not fit in 64 bits")


def unpackb(data: bytes) -> object:
    """Decode one msgpack value that fills ``data`` exactly."""
    try:
        value, end = _unpack(data, 0)
    except (IndexError, ValueError, UnicodeDecodeError) as exc:
        if isinstance(exc, MsgpackError):
            raise
        raise MsgpackError(f"truncated or invalid msgpack: {exc}") from exc
    if end != len(data):
        raise MsgpackError(f"{len(data) - end} extra bytes after the msgpack value")
    return value


_FIXED = {0xC0: None, 0xC2: False, 0xC3: True}
_UINT = {0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8}
_INT = {0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8}
_STR = {0xD9: 1, 0xDA: 2, 0xDB: 4}
_BIN = {0xC4: 1, 0xC5: 2, 0xC6: 4}


def _unpack(data: bytes, pos: int) -> tuple[object, int]:
    tag = data[pos]
    pos += 1
    if tag < 0x80:
        return tag, pos
    if tag >= 0xE0:
        return tag - 0x100, pos
    if 0xA0 <= tag <= 0xBF:
        n = tag & 0x1F
        return _text(data, pos, n), pos + n
    if 0x90 <= tag <= 0x9F:
        return _array(data, pos, tag & 0x0F)
    if 0x80 <= tag <= 0x8F:
        return _map(data, pos, tag & 0x0F)
    if tag in _FIXED:
        return _FIXED[tag], pos
    if tag in _UINT:
        size = _UINT[tag]
        return int.from_bytes(data[pos : pos + size], "big"), pos + size
    if tag in _INT:
        size = _INT[tag]
        return int.from_bytes(data[pos : pos + size], "big", signed=True), pos + size
    if tag in (0xCA, 0xCB):
        import struct

        fmt, size = (">d", 8) if tag == 0xCB else (">f", 4)
        if pos + size > len(data):
            raise IndexError("float runs past the end")
        return struct.unpack_from(fmt, data, pos)[0], pos + size
    if tag in _STR:
        size = _STR[tag]
        n = int.from_bytes(data[pos : pos + size], "big")
        pos += size
        return _text(data, pos, n), pos + n
    if tag in _BIN:
        size = _BIN[tag]
        n = int.from_bytes(data[pos : pos + size], "big")
        pos += size
        if pos + n > len(data):
            raise IndexError("bin runs past the end")
        return bytes(data[pos : pos + n]), pos + n
    if tag in (0xDC, 0xDD):
        size = 2 if tag == 0xDC else 4
        return _array(data, pos + size, int.from_bytes(data[pos : pos + size], "big"))
    if tag in (0xDE, 0xDF):
        size = 2 if tag == 0xDE else 4
        return _map(data, pos + size, int.from_bytes(data[pos : pos + size], "big"))
    raise MsgpackError(f"unsupported msgpack type 0x{tag:02x} at byte {pos - 1}")


def _text(data: bytes, pos: int, n: int) -> str:
    if pos + n > len(data):
        raise IndexError("str runs past the end")
    return bytes(data[pos : pos + n]).decode("utf-8")


def _array(data: bytes, pos: int, n: int) -> tuple[list[object], int]:
    items: list[object] = []
    for _ in range(n):
        item, pos = _unpack(data, pos)
        items.append(item)
    return items, pos


def _map(data: bytes, pos: int, n: int) -> tuple[dict[object, object], int]:
    result: dict[object, object] = {}
    for _ in range(n):
        key, pos = _unpack(data, pos)
        value, pos = _unpack(data, pos)
        if isinstance(key, list | dict):
            raise MsgpackError("a map key must be a scalar")
        result[key] = value
    return result, pos
