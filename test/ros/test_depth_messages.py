"""Depth message builders against rclpy's own serialisation (REP 118 images, CameraInfo)."""

from __future__ import annotations

import array

import numpy as np
import pytest

pytest.importorskip('rclpy', reason='rclpy (ROS 2) is not installed')

from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402
from sensor_msgs.msg import CameraInfo, Image  # noqa: E402
from std_msgs.msg import Header  # noqa: E402

from vision_nodes.ros.outputs.depth_outputs import camera_info_for, described_shape  # noqa: E402
from vision_nodes.tasks.depth import DepthParams, DepthResult, colorize  # noqa: E402

from camera_rig import pinhole_info  # noqa: E402
from reference_messages import colored_to_msg, depth_to_msg  # noqa: E402


def _header(sec: int = 17, nanosec: int = 250, frame: str = 'camera_optical') -> Header:
    header = Header(frame_id=frame)
    header.stamp.sec, header.stamp.nanosec = sec, nanosec
    return header


def _depth(shape=(48, 64), seed: int = 0) -> np.ndarray:
    depth = np.random.default_rng(seed).uniform(0.2, 30.0, shape).astype(np.float32)
    depth[0, :3] = (np.nan, np.inf, -np.inf)
    return depth


def _reference_image(pixels: np.ndarray, encoding: str, header: Header) -> Image:
    """The slow, obvious way: every byte as a Python int."""
    msg = Image(header=header, height=pixels.shape[0], width=pixels.shape[1],
                encoding=encoding, is_bigendian=0, step=pixels.strides[0])
    msg.data = [int(b) for b in pixels.tobytes()]
    return msg


def _pixels(msg: Image, dtype, channels: int = 1) -> np.ndarray:
    shape = (msg.height, msg.width) + ((channels,) if channels > 1 else ())
    return np.frombuffer(bytes(msg.data), dtype=dtype).reshape(shape)


@pytest.mark.parametrize('metric', [True, False])
def test_depth_image_is_32fc1_and_round_trips_bit_exactly(metric):
    depth = _depth()
    header = _header()
    msg = depth_to_msg(DepthResult(depth, metric, 'depth' if metric else 'disparity'), header)
    assert (msg.height, msg.width, msg.step) == (48, 64, 64 * 4)
    assert msg.encoding == '32FC1' and msg.is_bigendian == 0
    wire = serialize_message(msg)
    back = deserialize_message(wire, Image)
    # Field by field (rclpy leaves padding bytes undefined, so the bytes may differ there).
    assert back == deserialize_message(
        serialize_message(_reference_image(depth, '32FC1', header)), Image)
    assert (back.header.stamp.sec, back.header.stamp.nanosec) == (17, 250)
    assert back.header.frame_id == 'camera_optical'
    decoded = _pixels(back, '<f4')
    assert decoded.tobytes() == depth.tobytes()  # NaN and +-Inf bits included
    assert np.isnan(decoded[0, 0]) and np.isposinf(decoded[0, 1])


def test_depth_image_takes_views_and_other_dtypes():
    """A strided view or a float64 map is written as contiguous float32 rows."""
    base = _depth((96, 128)).astype(np.float64)
    view = base[::2, 1::2]
    msg = depth_to_msg(DepthResult(view, True, 'depth'), _header())
    assert (msg.height, msg.width, msg.step) == (48, 64, 256)
    np.testing.assert_array_equal(_pixels(deserialize_message(serialize_message(msg), Image),
                                          '<f4'), view.astype(np.float32))
    with pytest.raises(ValueError, match='height, width'):
        depth_to_msg(DepthResult(np.zeros((2, 2, 2), np.float32), True, 'depth'), _header())


def test_header_is_carried_not_interpreted():
    """Two stamps, one result: identical pixel payloads, each with its own header."""
    result = DepthResult(_depth(), True, 'depth')
    a = depth_to_msg(result, _header(1, 2, 'a'))
    b = depth_to_msg(result, _header(3, 4, 'b'))
    assert bytes(a.data) == bytes(b.data)
    assert (a.header.frame_id, b.header.stamp.sec) == ('a', 3)


def test_colored_image_is_rgb8_and_round_trips():
    result = DepthResult(_depth(), True, 'depth')
    rgb = colorize(result, DepthParams())
    header = _header()
    msg = colored_to_msg(rgb, header)
    assert (msg.encoding, msg.step, msg.height, msg.width) == ('rgb8', 64 * 3, 48, 64)
    back = deserialize_message(serialize_message(msg), Image)
    assert back == deserialize_message(
        serialize_message(_reference_image(rgb, 'rgb8', header)), Image)
    np.testing.assert_array_equal(_pixels(back, np.uint8, 3), rgb)
    with pytest.raises(ValueError, match='height, width, 3'):
        colored_to_msg(rgb[:, :, 0], header)


def _camera_info(width=64, height=48) -> CameraInfo:
    """A calibrated camera (test/camera_rig.py's) with distortion, rectification, projection."""
    info = pinhole_info(width, height, 500.0, k=[500.0, 0, 32, 0, 500.0, 24, 0, 0, 1])
    info.header = _header(5, 6, 'camera_optical')
    info.d = array.array('d', [0.1, -0.2, 0.001, 0.002, 0.0])
    info.r = np.eye(3).ravel()
    info.p = np.array([500.0, 0, 32, 0, 0, 500.0, 24, 0, 0, 0, 1, 0])
    return info


def test_camera_info_gets_the_depth_stamp_and_keeps_the_calibration():
    info = _camera_info()
    depth_header = _header(99, 12345, 'camera_optical')
    out = camera_info_for(info, depth_header, (48, 64))
    back = deserialize_message(serialize_message(out), CameraInfo)
    assert (back.header.stamp.sec, back.header.stamp.nanosec) == (99, 12345)
    original = deserialize_message(serialize_message(info), CameraInfo)
    for name in ('height', 'width', 'distortion_model', 'binning_x', 'binning_y'):
        assert getattr(back, name) == getattr(original, name), name
    for name in ('d', 'k', 'r', 'p'):
        np.testing.assert_array_equal(np.asarray(getattr(back, name)),
                                      np.asarray(getattr(original, name)), err_msg=name)
    # A copy: changing the camera's message later does not change what was published.
    info.k[0] = 1.0
    info.d[0] = 9.0
    info.roi.width = 7
    assert out.k[0] == 500.0 and out.d[0] == 0.1 and out.roi.width == 0
    assert info.header.stamp.sec == 5


def test_camera_info_for_another_resolution_is_refused():
    info = _camera_info(width=1280, height=720)
    with pytest.raises(ValueError, match='1280x720 images but the depth image is 64x48'):
        camera_info_for(info, _header(), (48, 64))
    info.binning_x = info.binning_y = 2
    assert described_shape(info) == (360, 640)
    assert camera_info_for(info, _header(), (360, 640)).binning_x == 2
    info.roi.width, info.roi.height = 320, 240
    assert described_shape(info) == (120, 160)
    uncalibrated = CameraInfo()
    assert camera_info_for(uncalibrated, _header(), (48, 64)).width == 0
