"""Thrift's compact protocol, both ways, for writing Parquet files whose metadata lies.

pyarrow writes honest files; the lying ones are an honest file whose footer (FileMetaData) or
page headers (PageHeader) are decoded here, edited and encoded again. A struct decodes to
{field id: (type, value)} and a list to (element type, [values]), so it encodes back to the
same bytes (tests check that round trip against pyarrow's own files). Written from the Thrift
compact protocol specification, independently of core.tables' reader.
"""

from __future__ import annotations

import struct
from typing import Any

STOP, TRUE, FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(13)

Struct = dict[int, tuple[int, Any]]


def _zigzag(value: int) -> int:
    return (value << 1) ^ (value >> 63)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


class Reader:
    def __init__(self, data: bytes, position: int = 0) -> None:
        self.data = data
        self.position = position

    def byte(self) -> int:
        value = self.data[self.position]
        self.position += 1
        return value

    def varint(self) -> int:
        shift = result = 0
        while True:
            byte = self.byte()
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7

    def signed(self) -> int:
        value = self.varint()
        return (value >> 1) ^ -(value & 1)

    def value(self, kind: int) -> Any:
        if kind in (TRUE, FALSE):  # inside a list: one byte
            return self.byte() == TRUE
        if kind == BYTE:
            return self.byte()
        if kind in (I16, I32, I64):
            return self.signed()
        if kind == DOUBLE:
            (number,) = struct.unpack_from("<d", self.data, self.position)
            self.position += 8
            return number
        if kind == BINARY:
            size = self.varint()
            start = self.position
            self.position += size
            return self.data[start:self.position]
        if kind in (LIST, SET):
            header = self.byte()
            size, element = header >> 4, header & 0x0F
            if size == 15:
                size = self.varint()
            return (element, [self.value(element) for _ in range(size)])
        if kind == STRUCT:
            return self.struct()
        raise ValueError(f"thrift type {kind} is not used by Parquet")

    def struct(self) -> Struct:
        fields: Struct = {}
        last = 0
        while True:
            header = self.byte()
            if header == STOP:
                return fields
            delta, kind = header >> 4, header & 0x0F
            field = last + delta if delta else self.signed()
            last = field
            if kind in (TRUE, FALSE):
                fields[field] = (TRUE, kind == TRUE)
            else:
                fields[field] = (kind, self.value(kind))


def _encode_value(kind: int, value: Any) -> bytes:
    if kind in (TRUE, FALSE):
        return bytes([TRUE if value else FALSE])
    if kind == BYTE:
        return bytes([value])
    if kind in (I16, I32, I64):
        return _varint(_zigzag(value))
    if kind == DOUBLE:
        return struct.pack("<d", value)
    if kind == BINARY:
        return _varint(len(value)) + value
    if kind in (LIST, SET):
        element, items = value
        head = (bytes([(len(items) << 4) | element]) if len(items) < 15
                else bytes([0xF0 | element]) + _varint(len(items)))
        return head + b"".join(_encode_value(element, item) for item in items)
    if kind == STRUCT:
        return encode_struct(value)
    raise ValueError(f"thrift type {kind} is not used by Parquet")


def encode_struct(fields: Struct) -> bytes:
    out = bytearray()
    last = 0
    for field in sorted(fields):
        kind, value = fields[field]
        wire = (TRUE if value else FALSE) if kind in (TRUE, FALSE) else kind
        delta = field - last
        if 0 < delta <= 15:
            out.append((delta << 4) | wire)
        else:
            out.append(wire)
            out += _varint(_zigzag(field))
        if kind not in (TRUE, FALSE):
            out += _encode_value(kind, value)
        last = field
    out.append(STOP)
    return bytes(out)


def decode_struct(data: bytes, position: int = 0) -> tuple[Struct, int]:
    """The struct at `position` and the position after it."""
    reader = Reader(data, position)
    return reader.struct(), reader.position
