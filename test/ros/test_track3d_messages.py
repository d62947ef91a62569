"""Depth images read for 3D (ros/inputs/depth_topic.py) and Detection3DArray messages."""

from __future__ import annotations

import numpy as np
import pytest
from sensor_msgs.msg import Image
from std_msgs.msg import Header

from vision_nodes.geometry3d import Boxes3D
from vision_nodes.images import ImageConversionError
from vision_nodes.ros.inputs.depth_topic import depth_view
from vision_nodes.tasks.detect import Detections

from reference_messages import detections_3d_to_msg


def _depth(values: np.ndarray, encoding: str, pad: int = 0, big: bool = False) -> Image:
    dtype = np.dtype('>u2' if encoding == '16UC1' else '>f4') if big else \
        np.dtype('<u2' if encoding == '16UC1' else '<f4')
    rows = values.astype(dtype).view(np.uint8).reshape(values.shape[0], -1)
    rows = np.concatenate([rows, np.zeros((rows.shape[0], pad), np.uint8)], axis=1)
    return Image(height=values.shape[0], width=values.shape[1], encoding=encoding,
                 is_bigendian=int(big), step=rows.shape[1], data=rows.tobytes())


@pytest.mark.parametrize('big', [False, True])
@pytest.mark.parametrize('pad', [0, 6])
def test_16uc1_millimetres_and_32fc1_metres_are_read_in_place(big, pad):
    mm = np.array([[0, 1500, 65535], [2000, 1, 3000]])
    pixels, scale = depth_view(_depth(mm, '16UC1', pad, big))
    assert scale == 0.001 and (pixels == mm).all()
    metres = np.array([[np.nan, 1.5, 0.0], [2.0, np.inf, 3.25]], np.float32)
    pixels, scale = depth_view(_depth(metres, '32FC1', pad * 2, big))
    assert scale == 1.0 and np.array_equal(pixels, metres, equal_nan=True)


@pytest.mark.parametrize('change, words', [
    (dict(encoding='rgb8'), 'not 32FC1'), (dict(step=3), 'inconsistent'),
    (dict(height=5), 'inconsistent'), (dict(width=0), 'inconsistent'),
    (dict(height=100_000, width=100_000), 'larger than accepted')])
def test_bad_depth_images_are_refused_in_one_line(change, words):
    msg = _depth(np.ones((2, 3)), '16UC1')
    for key, value in change.items():
        setattr(msg, key, value)
    with pytest.raises(ImageConversionError, match=words):
        depth_view(msg)


def test_detection3d_array_keeps_the_2d_ids_and_header():
    dets = Detections(np.array([[0, 0, 10, 10], [5, 5, 20, 30], [1, 1, 2, 2]], np.float32),
                      np.array([0.9, 0.8, 0.3], np.float32), np.array([2, 0, 1]),
                      track_ids=np.array([7, 3, 11]))
    boxes = Boxes3D(np.array([0, 2]), np.array([[0.1, 0.2, 2.0], [1.0, -1.0, 5.0]]),
                    np.array([[0.5, 0.6, 0.1], [0.2, 0.3, 0.0]]))
    header = Header(frame_id='cam_optical')
    msg = detections_3d_to_msg(dets, boxes, header)
    assert msg.header == header and [d.id for d in msg.detections] == ['7', '11']
    first = msg.detections[0]
    assert first.header.frame_id == 'cam_optical'
    assert first.results[0].hypothesis.class_id == '2'
    assert first.results[0].hypothesis.score == pytest.approx(0.9)
    assert (first.bbox.center.position.x, first.bbox.center.position.z) == (0.1, 2.0)
    assert (first.bbox.size.x, first.bbox.size.y, first.bbox.size.z) == (0.5, 0.6, 0.1)
    assert first.bbox.center.orientation.w == 1.0
