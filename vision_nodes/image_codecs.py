"""Compressed images (JPEG, PNG) as ROS cameras send them → NumPy arrays. ROS-free.

A ``sensor_msgs/CompressedImage`` carries the compressed bytes and a ``format`` string. The
``compressed`` plugin of image_transport writes ``"<encoding>; jpeg compressed bgr8"`` (colour
sources), ``"<encoding>; jpeg compressed mono8"`` (mono sources, 16-bit ones reduced to 8
bits), ``"<encoding>; png compressed bgr8"`` / ``bgr16`` (colour) and ``"<encoding>; png
compressed "`` (mono8/mono16, kept as they are); older publishers and many drivers write just
``"jpeg"`` or ``"png"``. :func:`decode_compressed` reads all of them.

* The data's own signature decides the codec; the format string decides what the channels
  mean. As in image_transport's subscriber (so the node sees what ``rqt_image_view`` shows), a
  colour source whose format does not say ``compressed bgr...`` was handed to the encoder with
  red and blue swapped: the returned encoding says so (``rgb8`` instead of ``bgr8``), no pixel
  is moved.
* The array comes back as the decoder writes it, with the encoding that describes it
  (``rgb8``, ``bgr8``, ``bgra8``, ``mono8``, ``mono16``); the task converts channels itself, as
  for a raw image. JPEG goes through simplejpeg (libjpeg-turbo) straight to RGB or grey, else
  OpenCV (BGR); PNG through OpenCV. No copy is made after the decoder's own output.
* 16-bit colour PNG is decoded to 8-bit BGR (the models take 8-bit colour); a mono source
  that image_transport sent as JPEG (``mono16; jpeg compressed mono8``) comes back as the
  8-bit ``mono8`` it holds.
* The header is read before anything is allocated: an image larger than :data:`MAX_SIDE` on
  a side or :data:`MAX_PIXELS` in all is refused, as are empty, truncated (JPEG without its
  end-of-image marker, PNG cut short), garbage and unsupported data (``tiff``, ``compressedDepth``,
  12-bit JPEG), each with :class:`~vision_nodes.images.ImageConversionError` and a one-line
  reason. A JPEG whose entropy data is damaged but complete decodes with the damage visible,
  as in every ROS image viewer, rather than being dropped (cheap UVC cameras send frames with
  harmless libjpeg warnings on every frame). Data after a JPEG's end-of-image marker
  (metadata that phones and some encoders append) is ignored, however long.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import cv2
import numpy as np

from .images import ImageConversionError
from .limits import MAX_IMAGE_PIXELS
from .text import clip

try:
    import simplejpeg as _simplejpeg
except ImportError:  # pragma: no cover - depends on the installation
    _simplejpeg = None

#: Longest side, in pixels, of an image this module decodes.
MAX_SIDE = 16384
#: Most pixels (width x height) of an image this module decodes: the node's one bound on
#: images (``limits.MAX_IMAGE_PIXELS``, 64 MiP). Checked from the header, before any pixel
#: buffer is allocated.
MAX_PIXELS = MAX_IMAGE_PIXELS

#: JPEG decoders this module can use, fastest first (measurements: docs/field-io.md).
JPEG_DECODERS = ('simplejpeg', 'opencv')

_CODEC_NAMES = {'jpeg': 'jpeg', 'jpg': 'jpeg', 'png': 'png'}
#: Encodings image_transport treats as colour (``sensor_msgs::image_encodings::isColor``).
_COLOR_SOURCES = frozenset(('rgb8', 'bgr8', 'rgba8', 'bgra8', 'rgb16', 'bgr16', 'rgba16',
                            'bgra16'))
_MONO8_NAMES = ('mono8', '8UC1')
_MONO16_NAMES = ('mono16', '16UC1')

_JPEG_SOI = b'\xff\xd8'
_JPEG_EOI = b'\xff\xd9'
_PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'
#: Start-of-frame markers (SOF0-SOF15 without DHT, JPG and DAC).
_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
#: The end-of-image marker, searched in the message's own buffer (no copy).
_EOI_PATTERN = re.compile(re.escape(_JPEG_EOI))
#: Bounds on the header walk, so hostile data cannot make it loop for long.
_MAX_SEGMENTS = 4096
_MAX_SKIPPED = 4096
#: PNG colour type → channels as stored.
_PNG_CHANNELS = {0: 1, 2: 3, 3: 3, 4: 2, 6: 4}


@dataclass(frozen=True)
class CompressedFormat:
    """What a ``CompressedImage.format`` string says about its data."""

    #: 'jpeg', 'png', or None when the string does not say (the data's signature decides).
    codec: str | None
    #: Encoding of the raw image the publisher compressed (``rgb8`` in ``"rgb8; jpeg ..."``),
    #: or None for the bare ``"jpeg"`` / ``"png"`` form.
    source_encoding: str | None
    #: The encoder was given red and blue swapped (a colour source without ``compressed bgr``).
    swapped: bool


@dataclass(frozen=True)
class CompressedHeader:
    """Geometry of compressed data, read from its header without decoding it."""

    codec: str        # 'jpeg' or 'png'
    width: int
    height: int
    channels: int     # as stored: JPEG components, PNG samples per pixel (palette: 3)
    bit_depth: int    # JPEG sample precision, PNG bit depth
    #: JPEG: offset of the first scan's entropy-coded data (0 for PNG).
    data_offset: int = 0


def parse_format(fmt: str) -> CompressedFormat:
    """Read a ``CompressedImage.format`` string (image_transport's forms and the bare ones).

    Raises :class:`ImageConversionError` for a codec this module does not decode.
    """
    text = str(fmt).strip()
    source, sep, rest = text.partition(';')
    if not sep:
        name, rest = text.lower(), ''
        source = ''
    else:
        source = source.strip()
        words = rest.split()
        if any(w.lower().startswith('compresseddepth') for w in words):
            raise ImageConversionError(
                f"format '{clip(fmt)}' is compressed_depth_image_transport's: not supported; "
                'subscribe to the raw depth image instead')
        name = words[0].lower() if words else ''
    codec = _CODEC_NAMES.get(name)
    if codec is None and name:
        raise ImageConversionError(
            f"unsupported compressed format '{clip(fmt)}': this node decodes jpeg and png "
            "(set the camera's image_transport format to jpeg or png)")
    swapped = source in _COLOR_SOURCES and 'compressed bgr' not in rest
    return CompressedFormat(codec, source or None, swapped)


def _as_bytes(data) -> np.ndarray:
    """Return a flat uint8 view of ``data`` (bytes, array.array, memoryview or ndarray)."""
    if isinstance(data, np.ndarray):
        return data.reshape(-1).view(np.uint8)
    try:
        return np.frombuffer(data, dtype=np.uint8)
    except TypeError:  # a plain sequence of ints (slow, but correct)
        return np.asarray(data, dtype=np.uint8).reshape(-1)


def _truncated(codec: str) -> ImageConversionError:
    return ImageConversionError(f'{codec} data is truncated (its header is cut short)')


def _jpeg_header(raw: memoryview) -> CompressedHeader:
    """Walk a JPEG's marker segments up to its first scan; return the frame's geometry."""
    size = len(raw)
    pos, frame = 2, None
    for _ in range(_MAX_SEGMENTS):
        skipped = 0
        while pos < size and raw[pos] != 0xFF:  # extraneous bytes (libjpeg skips them too)
            pos += 1
            skipped += 1
            if skipped > _MAX_SKIPPED:
                raise ImageConversionError('jpeg data is corrupt (no marker where one belongs)')
        while pos < size and raw[pos] == 0xFF:  # fill bytes before a marker
            pos += 1
        if pos >= size:
            raise _truncated('jpeg')
        marker = raw[pos]
        pos += 1
        if marker == 0x01 or 0xD0 <= marker <= 0xD8:  # markers without a length
            continue
        if marker == 0xD9:
            raise ImageConversionError('jpeg data ends before any image data')
        if pos + 2 > size:
            raise _truncated('jpeg')
        length = raw[pos] << 8 | raw[pos + 1]
        if length < 2:
            raise ImageConversionError(f'jpeg data is corrupt (segment length {length})')
        if marker in _JPEG_SOF:
            if pos + 8 > size:
                raise _truncated('jpeg')
            frame = (raw[pos + 2], raw[pos + 3] << 8 | raw[pos + 4],
                     raw[pos + 5] << 8 | raw[pos + 6], raw[pos + 7])
        elif marker == 0xDA:
            if frame is None:
                raise ImageConversionError('jpeg data is corrupt (a scan before the frame header)')
            precision, height, width, components = frame
            return CompressedHeader('jpeg', width, height, components, precision, pos + length)
        pos += length
    raise ImageConversionError(f'jpeg data is corrupt (more than {_MAX_SEGMENTS} segments '
                               'before the image data)')


def _png_header(raw: memoryview) -> CompressedHeader:
    """Read a PNG's IHDR chunk."""
    if len(raw) < 33:  # signature, chunk length and type, 13 bytes of IHDR, CRC
        raise _truncated('png')
    if bytes(raw[12:16]) != b'IHDR':
        raise ImageConversionError('png data is corrupt (IHDR is not the first chunk)')
    width = int.from_bytes(raw[16:20], 'big')
    height = int.from_bytes(raw[20:24], 'big')
    depth, color_type = raw[24], raw[25]
    channels = _PNG_CHANNELS.get(color_type)
    if channels is None or depth not in (1, 2, 4, 8, 16):
        raise ImageConversionError(
            f'png data is corrupt (colour type {color_type}, bit depth {depth})')
    return CompressedHeader('png', width, height, channels, depth)


def read_header(data) -> CompressedHeader:
    """Return the geometry of JPEG or PNG ``data`` from its header, checked against the limits.

    Raises :class:`ImageConversionError` for empty, unknown, truncated or oversized data.
    """
    buf = _as_bytes(data)
    if buf.size == 0:
        raise ImageConversionError('compressed image has no data')
    raw = memoryview(buf)
    head = bytes(raw[:8])
    if head.startswith(_JPEG_SOI):
        header = _jpeg_header(raw)
    elif head == _PNG_SIGNATURE:
        header = _png_header(raw)
    else:
        raise ImageConversionError(
            f'compressed image data is neither JPEG nor PNG (it starts with {head.hex(" ")})')
    width, height = header.width, header.height
    if width <= 0 or height <= 0:
        raise ImageConversionError(
            f'{header.codec} image has no pixels ({width}x{height}); a JPEG whose height '
            'is only given after the data (DNL marker) is not supported')
    if width > MAX_SIDE or height > MAX_SIDE or width * height > MAX_PIXELS:
        raise ImageConversionError(
            f'{header.codec} image of {width}x{height} exceeds the decode limit '
            f'({MAX_SIDE} px a side, {MAX_PIXELS // (1 << 20)} MiP in all); not decoded')
    return header


def _has_end_of_image(buf: np.ndarray, scan_start: int) -> bool:
    """Whether an end-of-image marker follows the first scan's data (at ``scan_start``).

    A cut-off frame decodes "successfully" with grey rows in OpenCV and in non-strict
    libjpeg-turbo, so completeness is checked here. In entropy-coded data a 0xFF byte is
    always followed by 0x00 or a restart marker, and valid Huffman tables and scan headers
    between progressive scans cannot spell FF D9: the first FF D9 after the first scan is the
    image's end (only an odd comment or quantisation table between scans could hold one,
    and at worst let a cut-off frame through with grey rows). Whatever follows the end
    (metadata that phones and some encoders append, a second image) is left alone, at any
    length: the decoders stop at the marker. One linear search, in C, over the buffer as it is.
    """
    return _EOI_PATTERN.search(buf, scan_start) is not None


def default_jpeg_decoder() -> str:
    """Return the JPEG decoder used when none is named: simplejpeg if installed, else OpenCV."""
    return 'simplejpeg' if _simplejpeg is not None else 'opencv'


def _decode_jpeg(buf: np.ndarray, header: CompressedHeader, decoder: str
                 ) -> tuple[np.ndarray, str]:
    """Decode a checked JPEG; return the array and its colour order ('rgb', 'bgr', 'mono')."""
    if header.bit_depth != 8:
        raise ImageConversionError(
            f'{header.bit_depth}-bit JPEG is not supported (8-bit only)')
    if header.channels not in (1, 3, 4):
        raise ImageConversionError(f'JPEG with {header.channels} components is not supported')
    if not _has_end_of_image(buf, header.data_offset):
        raise ImageConversionError(
            f'jpeg data is truncated (no end-of-image marker; {buf.size} B received)')
    if decoder == 'simplejpeg' and header.channels != 4:  # CMYK/YCCK: OpenCV converts those
        mono = header.channels == 1
        # strict=False: libjpeg warnings (extraneous bytes, a damaged block) do not drop the
        # frame; truncation was ruled out above.
        image = _simplejpeg.decode_jpeg(buf, colorspace='GRAY' if mono else 'RGB',
                                        strict=False)
        return (image[:, :, 0], 'mono') if mono else (image, 'rgb')
    flag = cv2.IMREAD_GRAYSCALE if header.channels == 1 else cv2.IMREAD_COLOR
    image = cv2.imdecode(buf, flag)
    if image is None:
        raise ImageConversionError('jpeg data is corrupt (OpenCV could not decode it)')
    return image, ('mono' if image.ndim == 2 else 'bgr')


def _decode_png(buf: np.ndarray, header: CompressedHeader) -> tuple[np.ndarray, str]:
    """Decode a checked PNG; return the array and its colour order ('bgr', 'bgra', 'mono')."""
    # 16-bit colour to 8-bit BGR in the decoder itself; everything else as stored (palette
    # expanded, grey + alpha as BGRA).
    wide_color = header.bit_depth == 16 and header.channels > 1
    image = cv2.imdecode(buf, cv2.IMREAD_COLOR if wide_color else cv2.IMREAD_UNCHANGED)
    if image is None:
        raise ImageConversionError('png data is truncated or corrupt (OpenCV could not decode it)')
    if image.ndim == 2:
        return image, 'mono'
    return image, ('bgra' if image.shape[2] == 4 else 'bgr')


def _encoding(image: np.ndarray, order: str, fmt: CompressedFormat) -> str:
    """Name the ``sensor_msgs/Image`` encoding that describes a decoded array."""
    if order == 'mono':
        names = _MONO16_NAMES if image.dtype == np.uint16 else _MONO8_NAMES
        return fmt.source_encoding if fmt.source_encoding in names else names[0]
    if fmt.swapped:
        order = {'rgb': 'bgr', 'bgr': 'rgb', 'bgra': 'rgba'}[order]
    return f'{order}8'


def decode_compressed(data, fmt: str = '', jpeg_decoder: str | None = None
                      ) -> tuple[np.ndarray, str]:
    """Decode a compressed image; return ``(array, encoding)``.

    ``data`` is the message's ``data`` (bytes, ``array.array``, memoryview or uint8 array),
    ``fmt`` its ``format`` string. The array is ``(H, W)`` or ``(H, W, C)``, uint8 (uint16
    for 16-bit mono PNG), exactly as the decoder wrote it; ``encoding`` is the
    ``sensor_msgs/Image`` encoding that describes it. ``jpeg_decoder`` names one of
    :data:`JPEG_DECODERS` (default: :func:`default_jpeg_decoder`).
    Raises :class:`ImageConversionError` with a one-line reason for anything undecodable.
    """
    decoder = jpeg_decoder or default_jpeg_decoder()
    if decoder not in JPEG_DECODERS:
        raise ValueError(f"unknown JPEG decoder '{clip(decoder)}' "
                         f"(known: {', '.join(JPEG_DECODERS)})")
    if decoder == 'simplejpeg' and _simplejpeg is None:
        raise ValueError("JPEG decoder 'simplejpeg' is not installed (pip install simplejpeg)")
    parsed = parse_format(fmt)
    buf = _as_bytes(data)
    header = read_header(buf)
    try:
        if header.codec == 'jpeg':
            image, order = _decode_jpeg(buf, header, decoder)
        else:
            image, order = _decode_png(buf, header)
    except ImageConversionError:
        raise
    except (ValueError, RuntimeError, MemoryError, cv2.error) as exc:
        # simplejpeg reports libjpeg errors as ValueError, OpenCV as cv2.error (multi-line).
        raise ImageConversionError(
            f'{header.codec} data ({header.width}x{header.height}) could not be decoded: '
            f"{clip(' '.join(str(exc).split()) or type(exc).__name__)}") from None
    if image.shape[:2] != (header.height, header.width):
        raise ImageConversionError(
            f'{header.codec} decoded to {image.shape[1]}x{image.shape[0]} but its header says '
            f'{header.width}x{header.height}')
    return image, _encoding(image, order, parsed)
