"""The one little-endian plain CDR writer, for the outputs that publish their messages as bytes.

What ``rclpy.serialization.serialize_message`` writes, field by field: the 4-byte encapsulation
header :data:`CDR_LE`, then each primitive aligned to its size counted from the end of that
header, a string as a uint32 length counting its final NUL, the UTF-8 bytes and the NUL.
Padding bytes are zeros (rclpy's serialiser leaves whatever was in memory). :class:`CdrWriter`
appends field by field; an encoder that places every field at once with NumPy
(:mod:`.detection2d_cdr`) computes its offsets with :func:`align`.
"""

from __future__ import annotations

import struct

#: Encapsulation header: plain CDR, little endian, no options.
CDR_LE = b'\x00\x01\x00\x00'


def align(offset, alignment: int):
    """Round ``offset`` (an int or an integer array) up to a multiple of ``alignment``."""
    return (offset + alignment - 1) // alignment * alignment


class CdrWriter:
    """Fields appended to a growing buffer, each aligned as CDR aligns it."""

    def __init__(self) -> None:
        self.out = bytearray(CDR_LE)

    def align(self, size: int) -> None:
        """Pad with zeros until the next field of ``size`` bytes is aligned."""
        self.out += bytes(-(len(self.out) - len(CDR_LE)) % size)

    def uint8(self, value: int) -> None:
        """Write a uint8."""
        self.out.append(value)

    def uint32(self, value: int) -> None:
        """Write a uint32."""
        self.align(4)
        self.out += struct.pack('<I', value)

    def string(self, text: str) -> None:
        """Write a string: its length counting the NUL, its UTF-8 bytes, the NUL."""
        chars = text.encode('utf-8')
        self.uint32(len(chars) + 1)
        self.out += chars + b'\0'

    def header(self, sec: int, nanosec: int, frame_id: str) -> None:
        """Write a ``std_msgs/Header``."""
        self.align(4)
        self.out += struct.pack('<iI', sec, nanosec)
        self.string(frame_id)

    def float64s(self, data: bytes) -> None:
        """Write float64s already packed little endian (8-aligned first)."""
        self.align(8)
        self.out += data

    def bytes(self) -> bytes:
        """Return the message's bytes."""
        return bytes(self.out)
