"""Minimal msgpack decoder (the subset LLVM writes into NT_AMDGPU_METADATA notes).

Written here so reading a code object needs no third-party package at run time.
"""
import struct


class MsgpackError(ValueError):
    pass


def unpackb(data: bytes):
    value, end = _decode(memoryview(data), 0)
    if end != len(data):
        raise MsgpackError(f"trailing bytes after msgpack value at offset {end}")
    return value


def _decode(buf, pos):
    try:
        tag = buf[pos]
    except IndexError:
        raise MsgpackError("truncated msgpack data") from None
    pos += 1
    if tag <= 0x7F:
        return tag, pos
    if tag >= 0xE0:
        return tag - 0x100, pos
    if 0x80 <= tag <= 0x8F:
        return _map(buf, pos, tag & 0x0F)
    if 0x90 <= tag <= 0x9F:
        return _array(buf, pos, tag & 0x0F)
    if 0xA0 <= tag <= 0xBF:
        return _str(buf, pos, tag & 0x1F)
    if tag == 0xC0:
        return None, pos
    if tag == 0xC2:
        return False, pos
    if tag == 0xC3:
        return True, pos
    fixed = _FIXED.get(tag)
    if fixed is not None:
        fmt, size = fixed
        _need(buf, pos, size)
        return struct.unpack_from(fmt, buf, pos)[0], pos + size
    sized = _SIZED.get(tag)
    if sized is not None:
        kind, lenfmt, lensize = sized
        _need(buf, pos, lensize)
        n = struct.unpack_from(lenfmt, buf, pos)[0]
        pos += lensize
        if kind == "str":
            return _str(buf, pos, n)
        if kind == "bin":
            _need(buf, pos, n)
            return bytes(buf[pos:pos + n]), pos + n
        if kind == "array":
            return _array(buf, pos, n)
        return _map(buf, pos, n)
    raise MsgpackError(f"unsupported msgpack tag 0x{tag:02x} at offset {pos - 1}")


_FIXED = {
    0xCA: (">f", 4), 0xCB: (">d", 8),
    0xCC: (">B", 1), 0xCD: (">H", 2), 0xCE: (">I", 4), 0xCF: (">Q", 8),
    0xD0: (">b", 1), 0xD1: (">h", 2), 0xD2: (">i", 4), 0xD3: (">q", 8),
}
_SIZED = {
    0xC4: ("bin", ">B", 1), 0xC5: ("bin", ">H", 2), 0xC6: ("bin", ">I", 4),
    0xD9: ("str", ">B", 1), 0xDA: ("str", ">H", 2), 0xDB: ("str", ">I", 4),
    0xDC: ("array", ">H", 2), 0xDD: ("array", ">I", 4),
    0xDE: ("map", ">H", 2), 0xDF: ("map", ">I", 4),
}


def _need(buf, pos, n):
    if pos + n > len(buf):
        raise MsgpackError("truncated msgpack data")


def _str(buf, pos, n):
    _need(buf, pos, n)
    return bytes(buf[pos:pos + n]).decode("utf-8"), pos + n


def _array(buf, pos, n):
    out = []
    for _ in range(n):
        v, pos = _decode(buf, pos)
        out.append(v)
    return out, pos


def _map(buf, pos, n):
    out = {}
    for _ in range(n):
        k, pos = _decode(buf, pos)
        v, pos = _decode(buf, pos)
        out[k] = v
    return out, pos
