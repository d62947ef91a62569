"""Compressed images → arrays: vision_nodes.image_codecs and the CompressedImage adapter.

Reference pixels come from OpenCV (``cv2.imread`` / ``cv2.imdecode``) and from the arrays the
test data was encoded from; messages are real ``sensor_msgs/CompressedImage`` objects put
through rclpy's serialiser.
"""

from __future__ import annotations

import array
import io
import tracemalloc

import cv2
import numpy as np
import pytest
from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs.msg import CompressedImage
from std_msgs.msg import Header

from vision_nodes import image_codecs as codecs
from vision_nodes.image_codecs import (MAX_PIXELS, MAX_SIDE, CompressedFormat, decode_compressed,
                                       default_jpeg_decoder, parse_format, read_header)
from vision_nodes.images import ImageConversionError, to_rgb
from vision_nodes.ros.inputs.conversion import compressed_to_numpy, numpy_to_compressed

DECODERS = ('simplejpeg', 'opencv')


def _rgb_pattern(height: int = 96, width: int = 128) -> np.ndarray:
    """Smooth gradients plus solid red, green and blue blocks (survives JPEG, shows swaps)."""
    y, x = np.mgrid[0:height, 0:width]
    image = np.stack([x * 255 // width, y * 255 // height, (x + y) * 255 // (width + height)],
                     axis=2).astype(np.uint8)
    image[8:40, 8:40] = (230, 20, 20)
    image[8:40, 48:80] = (20, 230, 20)
    image[48:80, 8:40] = (20, 20, 230)
    return image


RGB = _rgb_pattern()
BGR = np.ascontiguousarray(RGB[:, :, ::-1])
GREY = cv2.cvtColor(BGR, cv2.COLOR_BGR2GRAY)
GREY16 = (np.arange(96 * 128, dtype=np.uint32).reshape(96, 128) * 7 % 65536).astype(np.uint16)


def _jpeg(image: np.ndarray, quality: int = 95) -> bytes:
    return cv2.imencode('.jpg', image, [cv2.IMWRITE_JPEG_QUALITY, quality])[1].tobytes()


def _png(image: np.ndarray) -> bytes:
    return cv2.imencode('.png', image)[1].tobytes()


def _assert_one_line(exc: pytest.ExceptionInfo) -> None:
    text = str(exc.value)
    assert text and '\n' not in text and '\r' not in text and len(text) < 400, text


# ----------------------------------------------------------------- real images vs OpenCV
@pytest.mark.parametrize('decoder', DECODERS)
@pytest.mark.parametrize('name', ['bus.jpg', 'zidane.jpg'])
def test_bundled_jpeg_matches_opencv(assets, name, decoder):
    data = (assets / name).read_bytes()
    reference = cv2.imread(str(assets / name), cv2.IMREAD_COLOR)  # BGR
    image, encoding = decode_compressed(data, 'jpeg', jpeg_decoder=decoder)
    assert image.shape == reference.shape and image.dtype == np.uint8
    assert encoding == ('rgb8' if decoder == 'simplejpeg' else 'bgr8')
    diff = np.abs(to_rgb(image, encoding).astype(int) - reference[:, :, ::-1])
    if decoder == 'opencv':
        assert diff.max() == 0
    else:
        # Both bundle libjpeg-turbo here and agree exactly; another libjpeg may round the
        # IDCT or the chroma upsampling differently by a level or two.
        assert diff.max() <= 4 and diff.mean() < 0.05


@pytest.mark.parametrize('decoder', DECODERS)
def test_mono_jpeg_matches_opencv(bus_bgr, decoder):
    grey = cv2.cvtColor(bus_bgr, cv2.COLOR_BGR2GRAY)
    data = _jpeg(grey, 90)
    reference = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_GRAYSCALE)
    image, encoding = decode_compressed(data, 'mono8; jpeg compressed mono8', decoder)
    assert encoding == 'mono8' and image.shape == grey.shape and image.dtype == np.uint8
    assert np.abs(image.astype(int) - reference).max() <= 4


def _cmyk_jpeg(bgr: np.ndarray) -> bytes:
    pil = pytest.importorskip('PIL.Image', reason='Pillow writes CMYK JPEGs')
    out = io.BytesIO()
    pil.fromarray(np.ascontiguousarray(bgr[:, :, ::-1])).convert('CMYK').save(out, 'JPEG')
    return out.getvalue()


JPEG_VARIANTS = {
    'progressive': [cv2.IMWRITE_JPEG_PROGRESSIVE, 1],
    'restart markers': [cv2.IMWRITE_JPEG_RST_INTERVAL, 4],
    '4:4:4': [cv2.IMWRITE_JPEG_SAMPLING_FACTOR, cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444],
    '4:2:2': [cv2.IMWRITE_JPEG_SAMPLING_FACTOR, cv2.IMWRITE_JPEG_SAMPLING_FACTOR_422],
    'optimised tables': [cv2.IMWRITE_JPEG_OPTIMIZE, 1],
    'cmyk': None,
}


@pytest.mark.parametrize('decoder', DECODERS)
@pytest.mark.parametrize('variant', sorted(JPEG_VARIANTS))
def test_jpeg_variants_match_opencv(bus_bgr, variant, decoder):
    params = JPEG_VARIANTS[variant]
    if params is None:
        data = _cmyk_jpeg(bus_bgr)
    else:
        data = cv2.imencode('.jpg', bus_bgr, [cv2.IMWRITE_JPEG_QUALITY, 90] + params)[1]
        data = data.tobytes()
    reference = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    image, encoding = decode_compressed(data, 'jpeg', decoder)
    assert image.shape == reference.shape
    diff = np.abs(to_rgb(image, encoding).astype(int) - reference[:, :, ::-1])
    assert diff.max() <= 4 and diff.mean() < 0.05


def test_colour_png_is_lossless(bus_bgr):
    image, encoding = decode_compressed(_png(bus_bgr), 'bgr8; png compressed bgr8')
    assert encoding == 'bgr8'
    np.testing.assert_array_equal(image, bus_bgr)


def test_png_with_alpha_and_grey_alpha():
    bgra = np.dstack([BGR, np.full(GREY.shape, 77, np.uint8)])
    image, encoding = decode_compressed(_png(bgra), 'png')
    assert encoding == 'bgra8'
    np.testing.assert_array_equal(image, bgra)
    pil = pytest.importorskip('PIL.Image', reason='Pillow writes grey + alpha PNGs')
    out = io.BytesIO()
    pil.fromarray(np.dstack([GREY, GREY // 2]), 'LA').save(out, format='PNG')
    image, encoding = decode_compressed(out.getvalue(), 'png')
    assert encoding == 'bgra8'
    np.testing.assert_array_equal(image[:, :, 0], GREY)
    np.testing.assert_array_equal(image[:, :, 3], GREY // 2)


def test_16_bit_pngs():
    image, encoding = decode_compressed(_png(GREY16), 'mono16; png compressed ')
    assert encoding == 'mono16' and image.dtype == np.uint16
    np.testing.assert_array_equal(image, GREY16)
    image, encoding = decode_compressed(_png(GREY16), '16UC1; png compressed ')
    assert encoding == '16UC1'
    bgr16 = np.dstack([GREY16, GREY16[::-1], GREY16[:, ::-1]])
    image, encoding = decode_compressed(_png(bgr16), 'rgb16; png compressed bgr16')
    assert encoding == 'bgr8' and image.dtype == np.uint8  # models take 8-bit colour
    np.testing.assert_array_equal(image, (bgr16 >> 8).astype(np.uint8))


# ----------------------------------------------------------------- format strings
# format -> (codec, source encoding, swapped), per image_transport's compressed subscriber.
FORMATS = {
    'jpeg': ('jpeg', None, False),
    ' JPEG ': ('jpeg', None, False),
    'jpg': ('jpeg', None, False),
    'png': ('png', None, False),
    '': (None, None, False),
    'bgr8; jpeg compressed bgr8': ('jpeg', 'bgr8', False),
    'rgb8; jpeg compressed bgr8': ('jpeg', 'rgb8', False),
    'rgba8; jpeg compressed bgr8': ('jpeg', 'rgba8', False),
    'rgb8; jpeg compressed rgb8': ('jpeg', 'rgb8', True),
    'mono8; jpeg compressed mono8': ('jpeg', 'mono8', False),
    'mono16; jpeg compressed mono8': ('jpeg', 'mono16', False),
    'bgr8; png compressed bgr8': ('png', 'bgr8', False),
    'rgb8; png compressed rgb8': ('png', 'rgb8', True),
    'rgb16; png compressed bgr16': ('png', 'rgb16', False),
    'mono8; png compressed ': ('png', 'mono8', False),
    'mono16; png compressed ': ('png', 'mono16', False),
    '16UC1; png compressed ': ('png', '16UC1', False),
}


@pytest.mark.parametrize('fmt', sorted(FORMATS))
def test_parse_format(fmt):
    assert parse_format(fmt) == CompressedFormat(*FORMATS[fmt])


# format -> (data as that publisher makes it, expected encoding, expected pixels as RGB or mono)
def _format_cases():
    bgr16 = BGR.astype(np.uint16) * 257
    return {
        'jpeg': (_jpeg(BGR), None, RGB),
        'bgr8; jpeg compressed bgr8': (_jpeg(BGR), None, RGB),
        'rgb8; jpeg compressed bgr8': (_jpeg(BGR), None, RGB),
        'rgba8; jpeg compressed bgr8': (_jpeg(BGR), None, RGB),
        # The encoder was handed RGB as if it were BGR: the file's colours are swapped.
        'rgb8; jpeg compressed rgb8': (_jpeg(RGB), None, RGB),
        'png': (_png(BGR), 'bgr8', RGB),
        'bgr8; png compressed bgr8': (_png(BGR), 'bgr8', RGB),
        'rgb8; png compressed rgb8': (_png(RGB), 'rgb8', RGB),
        'rgb16; png compressed bgr16': (_png(bgr16), 'bgr8', RGB),
        'mono8; jpeg compressed mono8': (_jpeg(GREY), 'mono8', GREY),
        'mono16; jpeg compressed mono8': (_jpeg(GREY), 'mono8', GREY),
        'mono8; png compressed ': (_png(GREY), 'mono8', GREY),
        'mono16; png compressed ': (_png(GREY16), 'mono16', GREY16),
        '': (_png(GREY), 'mono8', GREY),
    }


@pytest.mark.parametrize('decoder', DECODERS)
@pytest.mark.parametrize('fmt', sorted(_format_cases()))
def test_every_format_decodes_to_the_right_pixels(fmt, decoder):
    data, expected_encoding, expected = _format_cases()[fmt]
    image, encoding = decode_compressed(data, fmt, decoder)
    if expected_encoding is not None:
        assert encoding == expected_encoding
    lossless = fmt == '' or 'png' in fmt
    if expected.ndim == 2:
        assert image.shape == expected.shape and image.dtype == expected.dtype
        got = image.astype(int)
    else:
        got = to_rgb(image, encoding).astype(int)
    diff = np.abs(got - expected)
    if lossless:
        assert diff.max() == 0
    else:
        assert diff.mean() < 3
        if expected.ndim == 3:  # the solid blocks keep their colour: no red/blue swap
            red, blue = got[24, 24], got[64, 24]
            assert red[0] > 180 and red[2] < 70 and blue[2] > 180 and blue[0] < 70


@pytest.mark.parametrize('fmt', ['tiff', 'bgr8; tiff compressed bgr8', 'h264',
                                 '16UC1; compressedDepth png', '16UC1; compressedDepth rvl',
                                 'bgr8; qoi compressed bgr8'])
def test_unsupported_formats_are_refused(fmt):
    with pytest.raises(ImageConversionError) as exc:
        decode_compressed(_jpeg(BGR), fmt)
    _assert_one_line(exc)
    assert ('not supported' in str(exc.value) or 'unsupported' in str(exc.value))


def test_hostile_format_string_is_clipped_to_one_line():
    fmt = 'evil\n\x1b[31mFAKE LOG LINE ' + 'x' * 5000
    with pytest.raises(ImageConversionError) as exc:
        decode_compressed(_jpeg(BGR), fmt)
    _assert_one_line(exc)
    assert '\\x0a' in str(exc.value) and 'chars)' in str(exc.value)


# ----------------------------------------------------------------- bad data
def _patched(data: bytes, offset: int, value: bytes) -> bytes:
    return data[:offset] + value + data[offset + len(value):]


def _sof_offset(data: bytes) -> int:
    """Offset of the SOF0 segment's length field in a baseline JPEG."""
    return data.index(b'\xff\xc0') + 2


JPEG = _jpeg(BGR)
PNG = _png(BGR)
SOF = _sof_offset(JPEG)


def _bad_data_cases() -> dict[str, tuple[bytes, str]]:
    rng = np.random.default_rng(0)
    return {
        'empty': (b'', 'no data'),
        'garbage': (rng.integers(0, 256, 5000, dtype=np.uint8).tobytes(), 'neither JPEG'),
        'text': (b'hello, world', 'neither JPEG'),
        'jpeg signature only': (JPEG[:2], 'truncated'),
        'jpeg header cut': (JPEG[:SOF + 4], 'truncated'),
        'jpeg half': (JPEG[:len(JPEG) // 2], 'truncated'),
        'jpeg without EOI': (JPEG[:-2], 'truncated'),
        'jpeg scan before frame': (b'\xff\xd8\xff\xda\x00\x08' + b'\x00' * 64, 'corrupt'),
        'jpeg zero-length segment': (b'\xff\xd8\xff\xe0\x00\x00' + b'\x00' * 64, 'corrupt'),
        'jpeg EOI first': (b'\xff\xd8\xff\xd9', 'ends before'),
        'jpeg no marker': (b'\xff\xd8' + b'\x01' * 9000, 'corrupt'),
        'jpeg 12-bit': (_patched(JPEG, SOF + 2, b'\x0c'), '12-bit'),
        'jpeg height 0 (DNL)': (_patched(JPEG, SOF + 3, b'\x00\x00'), 'no pixels'),
        'png signature only': (PNG[:8], 'truncated'),
        'png half': (PNG[:len(PNG) // 2], 'truncated or corrupt'),
        'png no IHDR': (_patched(PNG, 12, b'IDAT'), 'IHDR'),
        'png bad colour type': (_patched(PNG, 25, b'\x05'), 'colour type'),
        'png data garbage': (PNG[:41] + b'\x00' * 200, 'truncated or corrupt'),
    }


@pytest.mark.parametrize('decoder', DECODERS)
@pytest.mark.parametrize('case', sorted(_bad_data_cases()))
def test_bad_data_raises_a_one_line_error(case, decoder):
    data, words = _bad_data_cases()[case]
    with pytest.raises(ImageConversionError) as exc:
        decode_compressed(data, '', decoder)
    _assert_one_line(exc)
    assert words in str(exc.value)


@pytest.mark.parametrize('size', [(MAX_SIDE + 1, 8), (8, MAX_SIDE + 1), (9000, 9000)])
@pytest.mark.parametrize('codec', ['jpeg', 'png'])
def test_oversized_images_are_refused_before_allocating(codec, size):
    width, height = size
    assert width * height > MAX_PIXELS or max(size) > MAX_SIDE
    if codec == 'jpeg':
        dims = height.to_bytes(2, 'big') + width.to_bytes(2, 'big')
        data = _patched(JPEG, SOF + 3, dims)
    else:
        data = _patched(PNG, 16, width.to_bytes(4, 'big') + height.to_bytes(4, 'big'))
    tracemalloc.start()
    try:
        with pytest.raises(ImageConversionError) as exc:
            decode_compressed(data, codec)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    _assert_one_line(exc)
    assert f'{width}x{height}' in str(exc.value) and 'limit' in str(exc.value)
    assert peak < 1 << 20  # the pixels would need hundreds of MiB


def test_header_of_real_files(assets):
    header = read_header((assets / 'bus.jpg').read_bytes())
    assert (header.codec, header.width, header.height, header.channels) == ('jpeg', 810, 1080, 3)
    header = read_header(_png(GREY16))
    assert (header.codec, header.width, header.height, header.bit_depth) == ('png', 128, 96, 16)


@pytest.mark.parametrize('decoder', DECODERS)
def test_harmless_libjpeg_warnings_do_not_drop_the_frame(decoder):
    """Bytes between the scan and EOI (common from UVC cameras) only make libjpeg warn."""
    padded = JPEG[:-2] + b'\x00\x00\x00' + JPEG[-2:]
    reference = cv2.imdecode(np.frombuffer(JPEG, np.uint8), cv2.IMREAD_COLOR)
    image, encoding = decode_compressed(padded, 'jpeg', decoder)
    assert np.abs(to_rgb(image, encoding).astype(int) - reference[:, :, ::-1]).max() <= 4
    # Padding after EOI, as some encoders write, is fine as well.
    image, _ = decode_compressed(JPEG + b'\x00' * 100, 'jpeg', decoder)
    assert image.shape == BGR.shape


def _trailers() -> dict[str, bytes]:
    """What cameras and encoders put after a JPEG's end-of-image marker, beyond 4 KiB."""
    rng = np.random.default_rng(3)
    return {
        'zero padding': b'\x00' * 5000,
        'maker data': rng.integers(0, 256, 1 << 20, dtype=np.uint8).tobytes(),
        'second image (MPF)': _jpeg(GREY, 80),
        'trailer with markers': (b'\xff\xd8\xff\xe1' + b'\xff' * 3000 + b'\xff\xd9SEFT') * 3,
    }


@pytest.mark.parametrize('decoder', DECODERS)
@pytest.mark.parametrize('trailer', sorted(_trailers()))
@pytest.mark.parametrize('variant', ['baseline', 'progressive', 'restart markers'])
def test_data_after_the_end_of_image_is_ignored(variant, trailer, decoder):
    """A complete JPEG decodes to the same pixels whatever follows its end-of-image marker."""
    params = {'baseline': [], 'progressive': [cv2.IMWRITE_JPEG_PROGRESSIVE, 1],
              'restart markers': [cv2.IMWRITE_JPEG_RST_INTERVAL, 2]}[variant]
    jpeg = cv2.imencode('.jpg', BGR, params)[1].tobytes()
    expected, _ = decode_compressed(jpeg, 'jpeg', decoder)
    image, _ = decode_compressed(jpeg + _trailers()[trailer], 'jpeg', decoder)
    np.testing.assert_array_equal(image, expected)


@pytest.mark.parametrize('decoder', DECODERS)
@pytest.mark.parametrize('cut', [0.5, 0.99])
def test_a_cut_jpeg_followed_by_data_is_still_truncated(cut, decoder):
    """Bytes after a JPEG cut before its end-of-image marker do not complete it."""
    cut_jpeg = JPEG[:int(len(JPEG) * cut)]
    for trailer in (b'\x00' * 10_000, b'\xff' * 10_000, b'\xd9' * 100):
        with pytest.raises(ImageConversionError, match='truncated') as exc:
            decode_compressed(cut_jpeg + trailer, 'jpeg', decoder)
        _assert_one_line(exc)


@pytest.mark.parametrize('decoder', DECODERS)
def test_damaged_but_complete_jpeg_decodes_with_the_damage(decoder):
    """Valid headers, garbage entropy data, an EOI: decoded like every ROS viewer does."""
    sos = JPEG.index(b'\xff\xda')
    start = sos + 2 + (JPEG[sos + 2] << 8 | JPEG[sos + 3])
    noise = np.random.default_rng(1).integers(0, 255, 3000, dtype=np.uint8).tobytes()
    damaged = JPEG[:start] + noise.replace(b'\xff', b'\xfe') + b'\xff\xd9'
    image, encoding = decode_compressed(damaged, 'jpeg', decoder)
    assert image.shape == BGR.shape
    assert np.abs(to_rgb(image, encoding).astype(int) - RGB).mean() > 20  # visibly damaged


# ----------------------------------------------------------------- decoders, buffers
def test_default_decoder_and_fallback(monkeypatch):
    assert default_jpeg_decoder() == 'simplejpeg'
    monkeypatch.setattr(codecs, '_simplejpeg', None)  # as on a machine without simplejpeg
    assert default_jpeg_decoder() == 'opencv'
    image, encoding = decode_compressed(JPEG, 'bgr8; jpeg compressed bgr8')
    assert encoding == 'bgr8' and image.shape == BGR.shape
    with pytest.raises(ValueError, match='not installed'):
        decode_compressed(JPEG, 'jpeg', 'simplejpeg')


def test_unknown_decoder_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown JPEG decoder 'pillow'"):
        decode_compressed(JPEG, 'jpeg', 'pillow')


@pytest.mark.parametrize('wrap', [bytes, bytearray, memoryview, lambda d: array.array('B', d),
                                  lambda d: np.frombuffer(d, np.uint8), list])
def test_every_buffer_type_decodes_alike(wrap):
    reference, _ = decode_compressed(JPEG, 'jpeg')
    image, encoding = decode_compressed(wrap(JPEG), 'jpeg')
    np.testing.assert_array_equal(image, reference)


def test_decoded_array_is_the_decoders_own():
    """No copy after decode: a colour array is the decoder's buffer, a mono one a view of it."""
    image, _ = decode_compressed(JPEG, 'jpeg', 'simplejpeg')
    assert image.flags.c_contiguous and image.flags.owndata
    image, _ = decode_compressed(_jpeg(GREY), 'jpeg', 'simplejpeg')
    assert image.ndim == 2 and image.base is not None and image.base.shape == GREY.shape + (1,)


# ----------------------------------------------------------------- the ROS message adapter
@pytest.mark.parametrize('encoding,codec', [('bgr8', 'jpeg'), ('rgb8', 'jpeg'),
                                            ('rgba8', 'png'), ('mono8', 'jpeg'),
                                            ('mono8', 'png'), ('mono16', 'png')])
def test_compressed_message_round_trips_through_rclpy(encoding, codec):
    source = {'bgr8': BGR, 'rgb8': RGB, 'rgba8': np.dstack([RGB, RGB[:, :, 0]]),
              'mono8': GREY, 'mono16': GREY16}[encoding]
    header = Header(frame_id='camera_optical')
    header.stamp.sec, header.stamp.nanosec = 42, 7
    msg = numpy_to_compressed(source, encoding, codec, header=header)
    target = 'bgr8' if source.ndim == 3 else ('mono8' if codec == 'jpeg' else '')
    assert msg.format == f'{encoding}; {codec} compressed {target}'
    wire = serialize_message(msg)
    back = deserialize_message(wire, CompressedImage)
    assert back.header == header and back.format == msg.format
    image, got_encoding = compressed_to_numpy(back)
    if source.ndim == 3:
        truth = source[:, :, :3] if encoding != 'bgr8' else source[:, :, ::-1]
        got = to_rgb(image, got_encoding).astype(int)
        limit = 0 if codec == 'png' else 3
        assert np.abs(got - truth).mean() <= limit
    else:
        assert got_encoding == encoding and image.dtype == source.dtype
        if codec == 'png':
            np.testing.assert_array_equal(image, source)
        else:
            assert np.abs(image.astype(int) - source).mean() < 3


def test_message_built_by_hand_decodes(assets):
    msg = CompressedImage(format='rgb8; jpeg compressed bgr8',
                          data=(assets / 'bus.jpg').read_bytes())
    back = deserialize_message(serialize_message(msg), CompressedImage)
    image, encoding = compressed_to_numpy(back)
    assert image.shape == (1080, 810, 3)
    reference = cv2.imread(str(assets / 'bus.jpg'))
    assert np.abs(to_rgb(image, encoding).astype(int) - reference[:, :, ::-1]).max() <= 4


def test_numpy_to_compressed_refuses_float_images():
    with pytest.raises(ImageConversionError, match='32FC1'):
        numpy_to_compressed(np.zeros((4, 4), np.float32), '32FC1')


@pytest.mark.parametrize('args,expected', [
    ([], '/robot/image/compressed'),
    (['-r', 'image:=/cam/image_raw'], '/cam/image_raw/compressed'),
    (['-r', 'image:=camera/color'], '/robot/camera/color/compressed'),
])
def test_compressed_topic_follows_the_remapped_base(args, expected):
    """Like image_transport: remap the base name, then append /compressed."""
    import rclpy

    from vision_nodes.ros.inputs.subscription import compressed_topic

    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = rclpy.create_node('vision_node', namespace='/robot', context=context,
                                 cli_args=['--ros-args', *args] if args else None)
        assert compressed_topic(node) == expected
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)
