"""Camera encodings (YUV 4:2:2, NV12/NV21/NV24, 8-bit Bayer) → RGB, as the node reads them.

Messages are built here byte by byte from the layouts ``sensor_msgs/image_encodings.hpp``
cites (V4L2's UYVY, YUYV, NV12, NV21, NV24; ROS's Bayer pattern names), from colours turned
into YUV with the BT.601 video-range formulas written out below, and compared with the source
colours and with OpenCV's own conversion of the same bytes.
"""

from __future__ import annotations

import array

import cv2
import numpy as np
import pytest
from sensor_msgs.msg import Image

from vision_nodes.images import CAMERA_ENCODINGS, COLOR_INPUTS, ImageConversionError
from vision_nodes.ros.inputs.conversion import image_to_array, image_to_numpy
from vision_nodes.tasks.preprocess import channel_map

YUV422 = {'uyvy': 'UYVY', 'yuv422': 'UYVY', 'yuyv': 'YUYV', 'yuv422_yuy2': 'YUYV'}
SEMI_PLANAR = {'nv12': ('UV', 2), 'nv21': ('VU', 2), 'nv24': ('UV', 1)}
BAYER = {'bayer_rggb8': 'rggb', 'bayer_bggr8': 'bggr', 'bayer_gbrg8': 'gbrg',
         'bayer_grbg8': 'grbg'}
#: Flat colours, one per 8 x 8 patch: saturated primaries, skin, sky, dark and light grey.
PATCH_COLOURS = [(220, 30, 30), (30, 200, 40), (20, 40, 210), (230, 180, 140), (120, 170, 230),
                 (40, 40, 40), (200, 200, 200), (250, 220, 30)]


def _patches(height: int = 16, width: int = 32) -> np.ndarray:
    """An RGB image of flat 8 x 8 patches (PATCH_COLOURS, row by row)."""
    image = np.zeros((height, width, 3), np.uint8)
    for n, colour in enumerate(PATCH_COLOURS):
        row, col = divmod(n, width // 8)
        image[row * 8:row * 8 + 8, col * 8:col * 8 + 8] = colour
    return image


def _bt601(rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """RGB → Y, U (Cb), V (Cr), ITU-R BT.601 video range, rounded to bytes."""
    r, g, b = (rgb[..., i].astype(np.float64) for i in range(3))
    y = 16 + (65.481 * r + 128.553 * g + 24.966 * b) / 255
    u = 128 + (-37.797 * r - 74.203 * g + 112.0 * b) / 255
    v = 128 + (112.0 * r - 93.786 * g - 18.214 * b) / 255
    return tuple(np.clip(np.round(c), 0, 255).astype(np.uint8) for c in (y, u, v))


def _message(encoding: str, height: int, width: int, step: int, data: bytes) -> Image:
    msg = Image(height=height, width=width, encoding=encoding, step=step)
    msg.data = array.array('B', data)
    return msg


def _rows(plane: np.ndarray, step: int) -> bytes:
    """The plane's rows, each padded with 0xEE to ``step`` bytes."""
    rows = plane.reshape(plane.shape[0], -1)
    pad = np.full((rows.shape[0], step - rows.shape[1]), 0xEE, np.uint8)
    return np.hstack([rows, pad]).tobytes()


def _yuv422(rgb: np.ndarray, order: str, pad: int = 0) -> tuple[bytes, int]:
    """Packed 4:2:2 bytes (each pair of pixels shares the mean of its U and V) and the step."""
    y, u, v = _bt601(rgb)
    u2 = ((u[:, 0::2].astype(int) + u[:, 1::2] + 1) // 2).astype(np.uint8)
    v2 = ((v[:, 0::2].astype(int) + v[:, 1::2] + 1) // 2).astype(np.uint8)
    samples = {'Y0': y[:, 0::2], 'Y1': y[:, 1::2], 'U': u2, 'V': v2}
    names = ['U', 'Y0', 'V', 'Y1'] if order == 'UYVY' else ['Y0', 'U', 'Y1', 'V']
    packed = np.stack([samples[n] for n in names], axis=2)  # (H, W/2, 4)
    step = rgb.shape[1] * 2 + pad
    return _rows(packed, step), step


def _semi_planar(rgb: np.ndarray, order: str, sub: int, pad: int = 0) -> tuple[bytes, int]:
    """Y plane, then interleaved chroma (``order``, subsampled by ``sub`` both ways)."""
    y, u, v = _bt601(rgb)
    if sub == 2:
        u, v = (((c[0::2, 0::2].astype(int) + c[1::2, 0::2] + c[0::2, 1::2] + c[1::2, 1::2]
                  + 2) // 4).astype(np.uint8) for c in (u, v))
    chroma = np.stack([u, v] if order == 'UV' else [v, u], axis=2)
    step = rgb.shape[1] + pad
    # 4:2:0 chroma rows are as long as Y rows (step apart); 4:4:4 ones twice as long.
    return _rows(y, step) + _rows(chroma, step * (3 - sub)), step


def _yuv_message(encoding: str, rgb: np.ndarray, pad: int = 0) -> Image:
    if encoding in YUV422:
        data, step = _yuv422(rgb, YUV422[encoding], pad)
    else:
        order, sub = SEMI_PLANAR[encoding]
        data, step = _semi_planar(rgb, order, sub, pad)
    return _message(encoding, rgb.shape[0], rgb.shape[1], step, data)


def _mosaic(rgb: np.ndarray, pattern: str) -> np.ndarray:
    """A Bayer mosaic as ROS names it: ``rggb`` is R G R G ... over G B G B ..."""
    channel = {'r': 0, 'g': 1, 'b': 2}
    out = np.empty(rgb.shape[:2], np.uint8)
    for dy in (0, 1):
        for dx in (0, 1):
            c = channel[pattern[dy * 2 + dx]]
            out[dy::2, dx::2] = rgb[dy::2, dx::2, c]
    return out


def _assert_patches(out: np.ndarray, expected: np.ndarray, tolerance: int, margin: int) -> None:
    """Each patch's inside (``margin`` px from its edges) is the source colour."""
    for row in range(0, expected.shape[0], 8):
        for col in range(0, expected.shape[1], 8):
            inside = (slice(row + margin, row + 8 - margin), slice(col + margin, col + 8 - margin))
            diff = np.abs(out[inside].astype(int) - expected[inside]).max()
            assert diff <= tolerance, (f'patch at ({row}, {col}): {out[inside][0, 0]} for '
                                       f'{expected[inside][0, 0]}')


def _assert_one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert text and '\n' not in text and len(text) < 600, text
    return text


# ----------------------------------------------------------------- YUV
@pytest.mark.parametrize('pad', [0, 6])
@pytest.mark.parametrize('encoding', sorted(YUV422) + sorted(SEMI_PLANAR))
def test_flat_colours_come_back(encoding: str, pad: int) -> None:
    """YUV built from known colours converts back to them (within BT.601 byte rounding)."""
    rgb = _patches()
    out, out_encoding = image_to_array(_yuv_message(encoding, rgb, pad))
    assert out_encoding == 'rgb8' and out.shape == rgb.shape and out.dtype == np.uint8
    # Chroma is shared by 2 (or 2 x 2) pixels: patch edges are on even pixels, so it is flat.
    _assert_patches(out, rgb, tolerance=3, margin=0)


@pytest.mark.parametrize('pad', [0, 6])
@pytest.mark.parametrize('encoding', sorted(YUV422) + ['nv12', 'nv21'])
def test_yuv_matches_opencv_on_the_same_bytes(encoding: str, pad: int) -> None:
    """Random bytes, padded rows: the node's RGB equals OpenCV's conversion of packed rows."""
    height, width = 6, 10
    rng = np.random.default_rng(5)
    if encoding in YUV422:
        packed = rng.integers(0, 256, (height, width, 2), np.uint8)
        code = {'UYVY': cv2.COLOR_YUV2RGB_UYVY, 'YUYV': cv2.COLOR_YUV2RGB_YUY2}[YUV422[encoding]]
        step = width * 2 + pad
        data = _rows(packed, step)
    else:
        packed = rng.integers(0, 256, (height * 3 // 2, width), np.uint8)
        code = {'nv12': cv2.COLOR_YUV2RGB_NV12, 'nv21': cv2.COLOR_YUV2RGB_NV21}[encoding]
        step = width + pad
        data = _rows(packed, step)
    out, _ = image_to_array(_message(encoding, height, width, step, data))
    np.testing.assert_array_equal(out, cv2.cvtColor(packed, code))


def test_nv24_matches_opencv_where_the_chroma_agrees() -> None:
    """NV24 (no OpenCV conversion of its own) agrees with OpenCV's NV12 on 2 x 2 flat chroma."""
    height, width = 8, 12
    rng = np.random.default_rng(6)
    y = rng.integers(0, 256, (height, width), np.uint8)
    uv = rng.integers(0, 256, (height // 2, width // 2, 2), np.uint8)
    nv12 = np.vstack([y, uv.reshape(height // 2, width)])
    full = uv.repeat(2, axis=0).repeat(2, axis=1)  # each chroma sample for its 2 x 2 pixels
    out, _ = image_to_array(_message('nv24', height, width, width,
                                     y.tobytes() + full.tobytes()))
    reference = cv2.cvtColor(nv12, cv2.COLOR_YUV2RGB_NV12).astype(int)
    assert np.abs(out.astype(int) - reference).max() <= 1


# ----------------------------------------------------------------- Bayer
@pytest.mark.parametrize('shape,pad', [((16, 32), 0), ((16, 32), 5), ((15, 31), 0)])
@pytest.mark.parametrize('encoding', sorted(BAYER))
def test_bayer_demosaics_to_the_mosaicked_colours(encoding: str, shape, pad: int) -> None:
    """Mosaic known colours by ROS's pattern definition; the node gives them back."""
    rgb = _patches(*shape) if shape == (16, 32) else _patches()[:shape[0], :shape[1]]
    mosaic = _mosaic(rgb, BAYER[encoding])
    step = shape[1] + pad
    msg = _message(encoding, shape[0], shape[1], step, _rows(mosaic, step))
    out, out_encoding = image_to_array(msg)
    assert out_encoding == 'rgb8' and out.shape == rgb.shape
    # Bilinear demosaicing is exact inside a flat patch (its neighbours are the same colour).
    _assert_patches(out, rgb, tolerance=0, margin=2)


def test_every_camera_encoding_is_tested() -> None:
    assert set(CAMERA_ENCODINGS) == set(YUV422) | set(SEMI_PLANAR) | set(BAYER)
    assert set(COLOR_INPUTS) >= set(CAMERA_ENCODINGS)


def test_a_full_hd_frame_converts_to_a_new_contiguous_array() -> None:
    height, width = 1080, 1920
    data = np.random.default_rng(7).integers(0, 256, height * width * 2, np.uint8).tobytes()
    msg = _message('yuv422', height, width, width * 2, data)
    out, _ = image_to_array(msg)
    assert out.shape == (height, width, 3) and out.flags.c_contiguous
    assert not np.shares_memory(out, np.frombuffer(msg.data, np.uint8))


# ----------------------------------------------------------------- refused
@pytest.mark.parametrize('encoding,height,width,step,size,words', [
    ('yuv422', 4, 5, 10, 40, 'odd width: YUV 4:2:2 needs an even one'),
    ('yuyv', 4, 3, 6, 24, 'odd width'),
    ('nv12', 4, 5, 5, 30, 'odd width: YUV 4:2:0'),
    ('nv21', 5, 4, 4, 30, 'odd height: YUV 4:2:0 needs an even one'),
    ('yuv422', 4, 4, 7, 64, 'step 7 is smaller than one row of 4 px x 2 ch x 1 B = 8 B'),
    ('nv21', 4, 4, 3, 64, 'step 3 is smaller than one row'),
    ('yuv422', 4, 4, 8, 31, 'data holds 31 B but 4 rows of step 8 need 32 B'),
    ('nv21', 4, 4, 4, 16, 'data holds 16 B but 4 rows of step 4 then 2 rows of step 4 need 24 B'),
    ('nv12', 4, 4, 8, 44, 'need 44 B'),  # the last chroma row need not be padded
    ('nv24', 2, 4, 4, 23, 'data holds 23 B but 2 rows of step 4 then 2 rows of step 8 need 24 B'),
    ('nv24', 2, 4, 8, 16, '2 rows of step 8 then 2 rows of step 16 need 40 B'),
    ('bayer_rggb8', 3, 3, 2, 9, 'step 2 is smaller than one row'),
    ('bayer_grbg8', 3, 3, 3, 8, 'data holds 8 B'),
    ('bayer_rggb16', 2, 2, 4, 8, "16-bit Bayer 'bayer_rggb16' is not converted"),
    ('yuv420', 2, 2, 2, 8, "unsupported image encoding 'yuv420'"),
    ('nv24', 0, 4, 4, 0, 'no pixels'),
])
def test_wrong_sizes_and_steps_are_one_line_errors(encoding, height, width, step, size, words):
    msg = _message(encoding, height, width, step, bytes(size))
    if words.startswith('need '):  # a boundary that is just enough
        out, _ = image_to_array(msg)
        assert out.shape == (height, width, 3)
        msg.data = array.array('B', bytes(size - 1))
        words = f'data holds {size - 1} B'
    with pytest.raises(ImageConversionError) as exc:
        image_to_array(msg)
    assert words in _assert_one_line(exc)


def test_unsupported_encodings_list_the_camera_encodings() -> None:
    with pytest.raises(ImageConversionError) as exc:
        image_to_array(_message('YUV422', 2, 2, 4, bytes(8)))
    text = _assert_one_line(exc)
    assert all(name in text for name in CAMERA_ENCODINGS)


def test_image_to_numpy_points_camera_encodings_to_image_to_array() -> None:
    with pytest.raises(ImageConversionError, match='use image_to_array'):
        image_to_numpy(_message('yuv422', 2, 2, 4, bytes(8)))


def test_a_colour_model_refusal_lists_what_it_accepts() -> None:
    with pytest.raises(ImageConversionError) as exc:
        channel_map('32FC1', 'rgb')
    text = _assert_one_line(exc)
    assert all(name in text for name in ('bgr8', 'mono8', 'yuv422', 'bayer_rggb8', 'nv21'))
    with pytest.raises(ImageConversionError, match='image_to_array'):
        channel_map('yuv422', 'rgb')
