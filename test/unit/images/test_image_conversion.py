"""Tests for vision_nodes.ros.inputs.conversion: sensor_msgs/Image <-> NumPy, no cv_bridge."""

from __future__ import annotations

import array

import numpy as np
import pytest
from sensor_msgs.msg import Image

from vision_nodes.images import COLOR_ENCODINGS, ImageConversionError, to_rgb
from vision_nodes.ros.inputs.conversion import image_to_numpy, numpy_to_image

# encoding -> (dtype, channels), written out independently of vision_nodes.ENCODINGS.
ROUND_TRIP_CASES: dict[str, tuple[type, int]] = {
    'rgb8': (np.uint8, 3),
    'bgr8': (np.uint8, 3),
    'mono8': (np.uint8, 1),
    'rgba8': (np.uint8, 4),
    'bgra8': (np.uint8, 4),
    '16UC1': (np.uint16, 1),
    '32FC1': (np.float32, 1),
}


def _random_image(encoding: str, height: int = 5, width: int = 7, seed: int = 0) -> np.ndarray:
    dtype, channels = ROUND_TRIP_CASES[encoding]
    rng = np.random.default_rng(seed)
    shape = (height, width) if channels == 1 else (height, width, channels)
    if dtype is np.float32:
        return (rng.standard_normal(shape) * 1000).astype(np.float32)
    return rng.integers(0, np.iinfo(dtype).max, size=shape, endpoint=True).astype(dtype)


def _padded_msg(image: np.ndarray, encoding: str, pad: int, fill: int = 0xAB,
                big_endian: bool = False) -> Image:
    """Build an Image by hand whose rows carry ``pad`` garbage bytes after the pixels."""
    h, w = image.shape[:2]
    dtype = image.dtype.newbyteorder('>' if big_endian else '<')
    rows = image.astype(dtype).reshape(h, -1)
    row_bytes = rows.shape[1] * dtype.itemsize
    data = bytearray()
    for r in range(h):
        data += rows[r].tobytes()
        data += bytes([fill]) * pad
    msg = Image()
    msg.height, msg.width = h, w
    msg.encoding = encoding
    msg.is_bigendian = int(big_endian)
    msg.step = row_bytes + pad
    msg.data = array.array('B', bytes(data))
    return msg


@pytest.mark.parametrize('encoding', sorted(ROUND_TRIP_CASES))
def test_round_trip(encoding: str) -> None:
    dtype, channels = ROUND_TRIP_CASES[encoding]
    src = _random_image(encoding)
    msg = numpy_to_image(src, encoding)
    assert isinstance(msg, Image)
    assert (msg.height, msg.width, msg.encoding) == (5, 7, encoding)
    assert msg.step == 7 * channels * np.dtype(dtype).itemsize
    assert msg.is_bigendian == 0
    assert len(msg.data) == msg.step * msg.height
    out = image_to_numpy(msg)
    assert out.shape == src.shape
    assert out.dtype.newbyteorder('=') == np.dtype(dtype)
    np.testing.assert_array_equal(out, src)


def test_numpy_to_image_keeps_header() -> None:
    from std_msgs.msg import Header

    header = Header()
    header.frame_id = 'camera_optical'
    header.stamp.sec = 12
    msg = numpy_to_image(np.zeros((2, 3, 3), np.uint8), 'rgb8', header)
    assert msg.header.frame_id == 'camera_optical'
    assert msg.header.stamp.sec == 12


def test_numpy_to_image_converts_big_endian_input() -> None:
    src = np.array([[1, 258, 65535]], dtype='>u2')
    msg = numpy_to_image(src, '16UC1')
    out = image_to_numpy(msg)
    np.testing.assert_array_equal(out, [[1, 258, 65535]])


@pytest.mark.parametrize('encoding', ['rgb8', 'bgra8', 'mono8', '32FC1'])
def test_padded_rows_are_skipped(encoding: str) -> None:
    src = _random_image(encoding, height=4, width=5, seed=1)
    msg = _padded_msg(src, encoding, pad=3)
    out = image_to_numpy(msg)
    assert out.shape == src.shape
    np.testing.assert_array_equal(out, src)


def test_padded_16uc1_with_odd_step() -> None:
    src = np.array([[1, 2, 3], [1000, 40000, 65535], [7, 256, 512]], dtype=np.uint16)
    msg = _padded_msg(src, '16UC1', pad=1, fill=0xFF)
    assert msg.step == 7  # 3 px * 2 B + 1 garbage byte: rows start at odd offsets
    out = image_to_numpy(msg)
    np.testing.assert_array_equal(out, src)


def test_view_shares_memory_with_message() -> None:
    src = np.zeros((3, 4, 3), np.uint8)
    msg = numpy_to_image(src, 'rgb8')
    view = image_to_numpy(msg)
    assert isinstance(msg.data, array.array)
    assert not view.flags.writeable
    # Pixel (row 1, col 2), green channel: byte offset 1 * 12 + 2 * 3 + 1 = 19.
    msg.data[19] = 200
    assert view[1, 2, 1] == 200
    assert int(view.sum()) == 200


def test_big_endian_16uc1() -> None:
    values = np.array([[1, 256, 65535], [4660, 0, 513]], dtype=np.uint16)
    raw = bytes()
    for v in values.ravel():
        raw += int(v).to_bytes(2, 'big')
    msg = Image(height=2, width=3, encoding='16UC1', is_bigendian=1, step=6,
                data=array.array('B', raw))
    np.testing.assert_array_equal(image_to_numpy(msg), values)
    # The same bytes read as little-endian are byte-swapped: 0x0001 -> 0x0100 etc.
    msg.is_bigendian = 0
    swapped = [[256, 1, 65535], [0x3412, 0, 0x0102]]
    np.testing.assert_array_equal(image_to_numpy(msg), swapped)


def test_big_endian_32fc1_padded() -> None:
    values = np.array([[1.5, -2.25], [3.0e6, 0.0]], dtype=np.float32)
    msg = _padded_msg(values, '32FC1', pad=2, big_endian=True)
    np.testing.assert_array_equal(image_to_numpy(msg), values)


def test_unsupported_encoding() -> None:
    msg = Image(height=2, width=2, encoding='8UC2', step=4, data=array.array('B', bytes(8)))
    with pytest.raises(ImageConversionError, match="unsupported image encoding '8UC2'"):
        image_to_numpy(msg)
    # Camera encodings are read (converted to rgb8: test_camera_encodings), never written.
    with pytest.raises(ImageConversionError, match="unsupported image encoding 'yuv422'"):
        numpy_to_image(np.zeros((2, 2, 2), np.uint8), 'yuv422')


def test_step_smaller_than_row() -> None:
    msg = Image(height=2, width=4, encoding='rgb8', step=11, data=array.array('B', bytes(24)))
    with pytest.raises(ImageConversionError, match=r'step 11 is smaller than one row.*= 12 B'):
        image_to_numpy(msg)


def test_truncated_data() -> None:
    msg = Image(height=2, width=4, encoding='rgb8', step=12, data=array.array('B', bytes(23)))
    with pytest.raises(ImageConversionError, match=r'data holds 23 B .* need 24 B'):
        image_to_numpy(msg)


def test_truncated_16uc1() -> None:
    msg = Image(height=3, width=2, encoding='16UC1', step=4, data=array.array('B', bytes(10)))
    with pytest.raises(ImageConversionError, match=r'data holds 10 B .* need 12 B'):
        image_to_numpy(msg)


@pytest.mark.parametrize('height,width', [(0, 4), (4, 0), (0, 0)])
def test_zero_size(height: int, width: int) -> None:
    msg = Image(height=height, width=width, encoding='mono8', step=width, data=array.array('B'))
    with pytest.raises(ImageConversionError, match='no pixels'):
        image_to_numpy(msg)


def test_numpy_to_image_shape_and_dtype_errors() -> None:
    with pytest.raises(ImageConversionError, match=r'does not match rgb8 \(3 channels\)'):
        numpy_to_image(np.zeros((2, 2), np.uint8), 'rgb8')
    with pytest.raises(ImageConversionError, match='dtype float32 does not match 16UC1'):
        numpy_to_image(np.zeros((2, 2), np.float32), '16UC1')


# Four pixels (RGB): red, green, blue, (10, 20, 30).
_RGB = np.array([[[255, 0, 0], [0, 255, 0]], [[0, 0, 255], [10, 20, 30]]], np.uint8)
_TO_RGB_CASES: dict[str, tuple[np.ndarray, np.ndarray]] = {
    'rgb8': (_RGB, _RGB),
    'bgr8': (np.array([[[0, 0, 255], [0, 255, 0]], [[255, 0, 0], [30, 20, 10]]], np.uint8),
             _RGB),
    '8UC3': (np.array([[[0, 0, 255], [0, 255, 0]], [[255, 0, 0], [30, 20, 10]]], np.uint8),
             _RGB),
    'rgba8': (np.array([[[255, 0, 0, 1], [0, 255, 0, 2]], [[0, 0, 255, 3], [10, 20, 30, 4]]],
                       np.uint8), _RGB),
    'bgra8': (np.array([[[0, 0, 255, 1], [0, 255, 0, 2]], [[255, 0, 0, 3], [30, 20, 10, 4]]],
                       np.uint8), _RGB),
    'mono8': (np.array([[0, 7], [128, 255]], np.uint8),
              np.array([[[0, 0, 0], [7, 7, 7]], [[128, 128, 128], [255, 255, 255]]], np.uint8)),
    '8UC1': (np.array([[0, 7], [128, 255]], np.uint8),
             np.array([[[0, 0, 0], [7, 7, 7]], [[128, 128, 128], [255, 255, 255]]], np.uint8)),
}


def test_to_rgb_cases_cover_every_colour_encoding() -> None:
    assert set(_TO_RGB_CASES) == set(COLOR_ENCODINGS)


@pytest.mark.parametrize('encoding', sorted(_TO_RGB_CASES))
def test_to_rgb(encoding: str) -> None:
    src, expected = _TO_RGB_CASES[encoding]
    image = image_to_numpy(numpy_to_image(src, encoding))
    out = to_rgb(image, encoding)
    assert out.shape == (2, 2, 3)
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize('encoding', ['16UC1', '32FC1', 'mono16', 'nv12'])
def test_to_rgb_rejects_non_colour(encoding: str) -> None:
    with pytest.raises(ImageConversionError, match=f"encoding '{encoding}' is not a colour"):
        to_rgb(np.zeros((2, 2), np.uint16), encoding)
