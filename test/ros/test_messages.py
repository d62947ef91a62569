"""Decoded detections → vision_msgs: the message objects and the NumPy CDR encoder.

The encoder's output is checked against rclpy's own (de)serialiser for the installed
vision_msgs type support: same length, and deserialising it gives exactly the message that
``detections_to_msg`` builds.
"""

from __future__ import annotations

import numpy as np
import pytest
from rclpy.serialization import deserialize_message, serialize_message
from std_msgs.msg import Header
from vision_msgs.msg import Classification, Detection2DArray

from vision_nodes.ros.outputs.classify_outputs import classification_to_cdr
from vision_nodes.ros.outputs.detection_outputs import detections_to_cdr
from vision_nodes.ros.outputs.label_info import label_info_msg
from vision_nodes.tasks.classify import Classification as ClassifyResult
from vision_nodes.tasks.detect import Detections
from vision_nodes.tasks.obb import OrientedBoxes
from vision_nodes.tasks.rotated import hull

from reference_messages import classification_to_msg, detections_to_msg, index_ids


def _header(frame_id: str = 'camera', sec: int = 17, nanosec: int = 250) -> Header:
    header = Header(frame_id=frame_id)
    header.stamp.sec, header.stamp.nanosec = sec, nanosec
    return header


def _random_detections(rng: np.random.Generator, count: int, classes: int) -> Detections:
    boxes = (rng.random((count, 4)) * 900).astype(np.float32)
    boxes[:, 2:] += boxes[:, :2]
    return Detections(boxes, rng.random(count).astype(np.float32),
                      rng.integers(0, classes, count))


def test_detections_to_msg_fields() -> None:
    dets = Detections(np.array([[10, 20, 50, 100], [0, 0, 4, 2]], np.float32),
                      np.array([0.9, 0.5], np.float32), np.array([5, 0]))
    header = _header()
    msg = detections_to_msg(dets, header)
    assert msg.header == header
    assert len(msg.detections) == 2
    first = msg.detections[0]
    assert first.header == header
    assert (first.bbox.center.position.x, first.bbox.center.position.y) == (30.0, 60.0)
    assert (first.bbox.size_x, first.bbox.size_y, first.bbox.center.theta) == (40.0, 80.0, 0.0)
    assert len(first.results) == 1
    assert first.results[0].hypothesis.class_id == '5'
    assert first.results[0].hypothesis.score == pytest.approx(0.9)
    assert first.results[0].pose.pose.orientation.w == 1.0
    assert [d.id for d in msg.detections] == ['0', '1']  # untracked: the index
    assert msg.detections[1].results[0].hypothesis.class_id == '0'


@pytest.mark.parametrize('frame_id', ['camera', '', 'cam', 'camer', 'base_link/optical',
                                      'kamera_\u00e9\u00df'])
@pytest.mark.parametrize('count', [0, 1, 2, 3, 7])
def test_cdr_matches_rclpy_serialisation(frame_id: str, count: int) -> None:
    # Frame ids of every length mod 4 and class ids of 1 to 4 digits move the padding around.
    rng = np.random.default_rng(count)
    dets = _random_detections(rng, count, 10 ** (1 + count % 4))
    header = _header(frame_id)
    reference = detections_to_msg(dets, header)
    encoded = detections_to_cdr(dets, header)
    assert isinstance(encoded, bytes)
    assert len(encoded) == len(serialize_message(reference))
    assert deserialize_message(encoded, Detection2DArray) == reference


@pytest.mark.parametrize('seed', range(12))
def test_cdr_with_track_ids_matches_rclpy_serialisation(seed: int) -> None:
    # Track ids of 1 to 9 digits move where each following detection starts modulo 8.
    rng = np.random.default_rng(100 + seed)
    count = int(rng.integers(1, 30))
    dets = _random_detections(rng, count, int(rng.choice([2, 80, 100000])))
    dets.track_ids = rng.integers(1, 10 ** int(rng.integers(1, 10)), count)
    header = _header('cam' * int(rng.integers(0, 4)))
    reference = detections_to_msg(dets, header)
    assert [d.id for d in reference.detections] == [str(i) for i in dets.track_ids]
    encoded = detections_to_cdr(dets, header)
    assert len(encoded) == len(serialize_message(reference))
    assert deserialize_message(encoded, Detection2DArray) == reference


@pytest.mark.parametrize('seed', range(20))
def test_cdr_matches_rclpy_serialisation_random(seed: int) -> None:
    rng = np.random.default_rng(seed)
    count = int(rng.integers(0, 400 if seed % 5 == 0 else 20))
    dets = _random_detections(rng, count, int(rng.choice([2, 80, 1000, 100000])))
    frame = ''.join(rng.choice(list('ab/_\u00e9z'), int(rng.integers(0, 14))))
    header = _header(frame, int(rng.integers(-2 ** 31, 2 ** 31)), int(rng.integers(0, 10 ** 9)))
    reference = detections_to_msg(dets, header)
    encoded = detections_to_cdr(dets, header)
    assert len(encoded) == len(serialize_message(reference))
    assert deserialize_message(encoded, Detection2DArray) == reference


@pytest.mark.parametrize('seed', range(12))
def test_rotated_boxes_cdr_matches_rclpy_serialisation(seed: int) -> None:
    """Oriented boxes go out with their centre, size and theta (the angle in radians)."""
    rng = np.random.default_rng(300 + seed)
    count = int(rng.integers(0, 40))
    xywhr = np.column_stack([rng.random((count, 4)) * 500 + 1,
                             rng.uniform(-np.pi / 4, 3 * np.pi / 4, count)]).astype(np.float32)
    dets = OrientedBoxes(hull(xywhr), rng.random(count).astype(np.float32),
                         rng.integers(0, 80, count), xywhr)
    if seed % 2:
        dets.track_ids = rng.integers(1, 10 ** 6, count)
    header = _header('cam' * (seed % 4))
    reference = detections_to_msg(dets, header)
    encoded = detections_to_cdr(dets, header)
    assert len(encoded) == len(serialize_message(reference))
    got = deserialize_message(encoded, Detection2DArray)
    assert got == reference
    assert [d.bbox.center.theta for d in got.detections] == xywhr[:, 4].astype(float).tolist()
    assert [d.bbox.size_x for d in got.detections] == xywhr[:, 2].astype(float).tolist()


@pytest.mark.parametrize('count', [0, 1, 2, 5, 80])
@pytest.mark.parametrize('frame_id', ['', 'cam', 'camera', 'kamera_\u00e9'])
def test_classification_cdr_matches_rclpy_serialisation(count: int, frame_id: str) -> None:
    """Top-k classes, highest first: class_id the index as a string, score the probability."""
    rng = np.random.default_rng(count)
    probs = rng.random(max(count, 1)).astype(np.float32)
    top = np.argsort(-probs)[:count]
    result = ClassifyResult(probs, top.astype(np.int64), probs[top])
    header = _header(frame_id, 5, 7)
    reference = classification_to_msg(result, header)
    assert [r.class_id for r in reference.results] == [str(int(i)) for i in top]
    encoded = classification_to_cdr(result, header)
    assert len(encoded) == len(serialize_message(reference))
    assert deserialize_message(encoded, Classification) == reference


def test_label_info_msg() -> None:
    msg = label_info_msg(['person', 'bicycle'], _header(), 0.25)
    names = [(c.class_id, c.class_name) for c in msg.class_map]
    assert names == [(0, 'person'), (1, 'bicycle')]
    assert msg.threshold == pytest.approx(0.25)


@pytest.mark.parametrize('seed', range(12))
def test_cdr_with_ids_matches_rclpy_serialisation(seed: int) -> None:
    """Ids of every length mod 8 (index ids, track ids, text) move the next detection."""
    rng = np.random.default_rng(100 + seed)
    count = int(rng.integers(1, 40))
    dets = _random_detections(rng, count, int(rng.choice([2, 80, 1000])))
    ids = [''.join(rng.choice(list('0123456789ab\u00e9'), int(rng.integers(0, 11))))
           for _ in range(count)]
    if seed % 3 == 0:
        ids = index_ids(count)
    header = _header('cam' * (seed % 4))
    reference = detections_to_msg(dets, header, ids)
    assert [d.id for d in reference.detections] == ids
    encoded = detections_to_cdr(dets, header, ids)
    assert len(encoded) == len(serialize_message(reference))
    assert deserialize_message(encoded, Detection2DArray) == reference
