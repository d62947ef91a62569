"""A little-endian plain CDR writer, for the outputs that publish their messages as bytes.

What ``rclpy.serialization.serialize_message`` writes, field by field: a 4-byte encapsulation
header (``00 01``, little endian), then each primitive aligned to its size counted from the
end of that header, a string as a uint32 length counting its final NUL, the UTF-8 bytes and
the NUL. Padding bytes are zeros (rclpy's serialiser leaves whatever was in memory).
"""

from __future__ import annotations

import struct

_CDR_LE = b'\x00\x01\x00\x00'


class CdrWriter:
    """Fields appended to a growing buffer, each aligned as CDR aligns it."""

    def __init__(self) -> None:
        self.out = bytearray(_CDR_LE)

    def align(self, size: int) -> None:
        """Pad with zeros until the next field of ``size`` bytes is aligned."""
        self.out += bytes(-(len(self.out) - len(_CDR_LE)) % size)

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
