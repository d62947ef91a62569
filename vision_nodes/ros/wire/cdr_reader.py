"""Serialized ``sensor_msgs/Image`` and ``CompressedImage`` read in place: a view, no copy.

A raw subscription (rclpy's ``raw=True``) hands its callback the message as the middleware
serialized it (CDR): one ``bytes`` object. :func:`read_image` and :func:`read_compressed`
walk those bytes and return an object with the fields of the typed message
(:class:`SerializedImage`, :class:`SerializedCompressedImage`) whose ``data`` is a memoryview
on the bytes, so the pixels are never copied again on their way to the network; the header
is a real ``std_msgs/Header``, equal to the one rclpy would build.

The layout (plain CDR; XCDR1 and XCDR2 lay these types out alike, as no field aligns to more
than 4 bytes): a 4-byte encapsulation header (``00 00`` big endian, ``00 01`` little endian,
``00 06`` / ``00 07`` the XCDR2 ones, then 2 option bytes), then the fields, each aligned to
its size counted from the end of the encapsulation header:

* ``Header``: ``stamp.sec`` int32, ``stamp.nanosec`` uint32, ``frame_id`` string;
* ``Image``: ``height``, ``width`` uint32, ``encoding`` string, ``is_bigendian`` uint8,
  ``step`` uint32, ``data`` uint8 sequence;
* ``CompressedImage``: ``format`` string, ``data`` uint8 sequence;

a string being a uint32 length that counts a final NUL, then its UTF-8 bytes and the NUL; a
sequence a uint32 count, then its items. Nothing the bytes say is trusted: every length is
checked against the bytes left and against :mod:`vision_nodes.limits` before it is used, and
anything else is refused with :class:`CdrError` (an ``ImageConversionError``) in one line.
The node's own images are written by :mod:`.image_cdr`.
"""

from __future__ import annotations

import struct

from builtin_interfaces.msg import Time
from std_msgs.msg import Header

from ...images import ImageConversionError
from ...limits import MAX_CDR_STRING_BYTES, MAX_IMAGE_BYTES, MAX_IMAGE_PIXELS

#: Encapsulation kinds read here → byte order (CDR_BE, CDR_LE, PLAIN_CDR2_BE, PLAIN_CDR2_LE).
_ORDERS = {b'\x00\x00': '>', b'\x00\x01': '<', b'\x00\x06': '>', b'\x00\x07': '<'}
_U32 = {order: struct.Struct(order + 'I') for order in '<>'}
_I32 = {order: struct.Struct(order + 'i') for order in '<>'}


class CdrError(ImageConversionError):
    """Serialized image bytes that are not a well-formed message: truncated, hostile, wrong."""


class SerializedImage:
    """A ``sensor_msgs/Image``'s fields, read from its bytes; ``data`` a view on them."""

    __slots__ = ('header', 'height', 'width', 'encoding', 'is_bigendian', 'step', 'data')


class SerializedCompressedImage:
    """A ``sensor_msgs/CompressedImage``'s fields, read from its bytes; ``data`` a view on them."""

    __slots__ = ('header', 'format', 'data')


class _Reader:
    """A cursor over CDR bytes that refuses to step past their end."""

    __slots__ = ('_buf', '_pos', '_u32', '_i32', '_what')

    def __init__(self, buf: bytes, what: str) -> None:
        self._what = what
        if not isinstance(buf, (bytes, bytearray, memoryview)):
            raise CdrError(f'{what}: expected serialized bytes, got {type(buf).__name__}')
        self._buf = memoryview(buf).cast('B') if not isinstance(buf, bytes) else buf
        if len(self._buf) < 4:
            raise self.error('shorter than a CDR header')
        order = _ORDERS.get(bytes(self._buf[:2]))
        if order is None:
            raise self.error(f'unknown CDR encapsulation {bytes(self._buf[:2]).hex()} '
                             '(not plain CDR)')
        self._u32, self._i32 = _U32[order], _I32[order]
        self._pos = 4

    def error(self, text: str) -> CdrError:
        """Return the one-line error for this message."""
        return CdrError(f'malformed serialized {self._what} ({len(self._buf)} B): {text}; '
                        'the publisher sends broken messages')

    def _take(self, size: int, field: str) -> int:
        """Return where ``size`` bytes of ``field`` start (aligned), past them afterwards."""
        start = (self._pos + size - 1) & -size if size > 1 else self._pos
        if start + size > len(self._buf):
            raise self.error(f'truncated in {field}')
        self._pos = start + size
        return start

    def uint32(self, field: str) -> int:
        """Read a uint32."""
        return self._u32.unpack_from(self._buf, self._take(4, field))[0]

    def int32(self, field: str) -> int:
        """Read an int32."""
        return self._i32.unpack_from(self._buf, self._take(4, field))[0]

    def uint8(self, field: str) -> int:
        """Read a uint8."""
        return self._buf[self._take(1, field)]

    def _span(self, field: str, limit: int) -> tuple[int, int]:
        """Read a length, check it against ``limit`` and the bytes left; return (start, end)."""
        size = self.uint32(field)
        if size > limit:
            raise self.error(f'{field} claims {size} B, more than {limit} B')
        start = self._pos
        if start + size > len(self._buf):
            raise self.error(f'{field} claims {size} B but {len(self._buf) - start} B are left')
        self._pos = start + size
        return start, start + size

    def string(self, field: str) -> str:
        """Read a string as rclpy does: up to its first NUL, bytes not UTF-8 as U+FFFD.

        Its length counts a final NUL, which must be there (0 is read as empty too).
        """
        start, end = self._span(field, MAX_CDR_STRING_BYTES + 1)
        if start == end:
            return ''
        if self._buf[end - 1] != 0:
            raise self.error(f'{field} is not NUL-terminated')
        chars = bytes(self._buf[start:end - 1])
        return chars.partition(b'\0')[0].decode('utf-8', 'replace')

    def octets(self, field: str) -> memoryview:
        """Read a uint8 sequence as a view on the bytes (no copy)."""
        start, end = self._span(field, MAX_IMAGE_BYTES)
        return memoryview(self._buf)[start:end]

    def header(self) -> Header:
        """Read a ``std_msgs/Header``."""
        sec = self.int32('header.stamp.sec')
        nanosec = self.uint32('header.stamp.nanosec')
        return Header(stamp=Time(sec=sec, nanosec=nanosec), frame_id=self.string('frame_id'))


def read_image(buf: bytes) -> SerializedImage:
    """Read a serialized ``sensor_msgs/Image``; its ``data`` is a view on ``buf``."""
    reader = _Reader(buf, 'sensor_msgs/Image')
    msg = SerializedImage()
    msg.header = reader.header()
    msg.height, msg.width = reader.uint32('height'), reader.uint32('width')
    if msg.height * msg.width > MAX_IMAGE_PIXELS:
        raise CdrError(f'image of {msg.width}x{msg.height} px is larger than this node accepts '
                       f'({MAX_IMAGE_PIXELS} px): send a smaller image')
    msg.encoding = reader.string('encoding')
    msg.is_bigendian = reader.uint8('is_bigendian')
    msg.step = reader.uint32('step')
    msg.data = reader.octets('data')
    return msg


def read_compressed(buf: bytes) -> SerializedCompressedImage:
    """Read a serialized ``sensor_msgs/CompressedImage``; its ``data`` is a view on ``buf``."""
    reader = _Reader(buf, 'sensor_msgs/CompressedImage')
    msg = SerializedCompressedImage()
    msg.header = reader.header()
    msg.format = reader.string('format')
    msg.data = reader.octets('data')
    return msg
