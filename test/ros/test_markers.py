"""RViz markers of the 3D boxes (``publish_markers``, issue #33 item 9).

The message: a DELETEALL first, then per 3D box a translucent CUBE where detections_3d puts the
box and a label above it with the annotated image's text and colour. Through the node: with
``depth_source: topic``, ``publish_markers`` and a tracker, ``markers`` carries the same boxes
as ``detections_3d`` for the frame, labelled with the track ids; without depth_source the node
says in one line why there are none.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy', reason='rclpy (ROS 2) is not installed')
pytest.importorskip('vision_msgs.msg', reason='vision_msgs is not built (scripts/setup_env.sh)')

from std_msgs.msg import Header  # noqa: E402
from vision_msgs.msg import Detection3DArray  # noqa: E402
from visualization_msgs.msg import Marker, MarkerArray  # noqa: E402

from camera_rig import depth_camera, pinhole_info  # noqa: E402
from node_harness import Harness  # noqa: E402
from vision_nodes.drawing import colour  # noqa: E402
from vision_nodes.geometry3d import Boxes3D  # noqa: E402
from vision_nodes.ros.inputs.conversion import numpy_to_image  # noqa: E402
from vision_nodes.ros.outputs.detection3d_markers import BOX_ALPHA, markers_msg  # noqa: E402
from vision_nodes.tasks.detect import Detections  # noqa: E402

NAMES = ['person', 'bicycle', 'car', 'motorcycle', 'airplane', 'bus']


def _dets(track_ids=None) -> Detections:
    boxes = np.array([[0, 0, 10, 10], [5, 5, 20, 30], [1, 1, 2, 2]], np.float32)
    return Detections(boxes, np.array([0.9, 0.5, 0.3], np.float32), np.array([5, 0, 2]),
                      track_ids=track_ids)


def _boxes() -> Boxes3D:
    """3D boxes for detections 0 and 1 (the third had too little depth)."""
    return Boxes3D(index=np.array([0, 1]), centers=np.array([[0.1, -0.2, 3.0], [1, 0.5, 2]]),
                   sizes=np.array([[0.5, 0.4, 0.0], [0.3, 1.2, 0.2]]))


def _header() -> Header:
    header = Header(frame_id='cam_optical')
    header.stamp.sec = 7
    return header


def test_one_cube_and_one_label_per_3d_box_after_a_delete_all():
    msg = markers_msg(_dets(), _boxes(), _header(), NAMES)
    assert msg.markers[0].action == Marker.DELETEALL
    cubes = [m for m in msg.markers if m.ns == 'boxes']
    labels = [m for m in msg.markers if m.ns == 'labels']
    assert [m.type for m in cubes] == [Marker.CUBE] * 2
    assert [m.type for m in labels] == [Marker.TEXT_VIEW_FACING] * 2
    assert [m.id for m in cubes] == [m.id for m in labels] == [0, 1]
    assert all(m.header.frame_id == 'cam_optical' and m.header.stamp.sec == 7
               for m in msg.markers)
    first = cubes[0]
    assert [first.pose.position.x, first.pose.position.y, first.pose.position.z] == \
        pytest.approx([0.1, -0.2, 3.0])
    assert first.pose.orientation.w == 1.0
    assert [first.scale.x, first.scale.y] == pytest.approx([0.5, 0.4])
    assert first.scale.z > 0  # a flat box (no depth extent) still shows
    assert first.color.a == pytest.approx(BOX_ALPHA)
    blue, green, red = colour(5)  # the annotated image's colour for class 5
    assert [first.color.r, first.color.g, first.color.b] == \
        pytest.approx([red / 255, green / 255, blue / 255])
    assert [m.text for m in labels] == ['bus 0.90', 'person 0.50']
    assert labels[0].pose.position.y < first.pose.position.y - 0.2  # above the box (y down)


def test_tracked_labels_carry_the_track_id_and_its_colour():
    msg = markers_msg(_dets(track_ids=np.array([7, 3, 9])), _boxes(), _header(), NAMES)
    labels = [m for m in msg.markers if m.ns == 'labels']
    assert [m.text for m in labels] == ['#7 bus 0.90', '#3 person 0.50']
    blue, green, red = colour(3)
    assert [labels[1].color.r, labels[1].color.g, labels[1].color.b] == \
        pytest.approx([red / 255, green / 255, blue / 255])


def test_the_node_publishes_the_3d_boxes_as_markers(model_dir, engine_cache_dir, bus_bgr):
    h = Harness({'engine_cache_dir': str(engine_cache_dir), 'backend': 'onnx',
                 'tracker': 'bytetrack', 'depth_source': 'topic',
                 'depth_topic': 'aligned_depth', 'publish_markers': True}, 'vn_markers')
    try:
        c = h.client
        assert c.change_state('configure', timeout=600) and c.change_state('activate')
        dets3 = c.subscribe(Detection3DArray, '/detections_3d', 20)
        markers = c.subscribe(MarkerArray, '/markers', 20)
        images, depths, infos = depth_camera(c)
        height, width = bus_bgr.shape[:2]
        depth = numpy_to_image(np.full((height, width, 1), 3.0, np.float32), '32FC1')
        image = numpy_to_image(bus_bgr, 'bgr8')
        got3 = got = None
        deadline = time.monotonic() + 60.0
        while got is None and time.monotonic() < deadline:
            image.header.frame_id = depth.header.frame_id = 'cam_optical'
            image.header.stamp.sec += 1
            depth.header.stamp = image.header.stamp
            infos.publish(pinhole_info(width, height, 900.0, 880.0))
            depths.publish(depth)
            images.publish(image)
            got3 = dets3.get(2.0, lambda m: m.header.stamp == image.header.stamp)
            got = got3 and markers.get(5.0, lambda m: m.markers[0].header.stamp ==
                                       image.header.stamp)
        assert got is not None, h.node.output()[-3000:]
        cubes = [m for m in got.markers if m.ns == 'boxes']
        labels = [m for m in got.markers if m.ns == 'labels']
        assert len(cubes) == len(labels) == len(got3.detections) >= 3
        for cube, label, det in zip(cubes, labels, got3.detections):
            centre = det.bbox.center.position
            assert [cube.pose.position.x, cube.pose.position.y, cube.pose.position.z] == \
                pytest.approx([centre.x, centre.y, centre.z])
            assert label.text.startswith(f'#{det.id} ')  # the track id
            assert cube.header.frame_id == 'cam_optical'
        assert any(label.text.split()[1] == 'bus' for label in labels)
    finally:
        h.close()


def test_markers_without_depth_source_say_why_in_one_line(model_dir, engine_cache_dir):
    h = Harness({'engine_cache_dir': str(engine_cache_dir), 'backend': 'onnx',
                 'publish_markers': True}, 'vn_markers_no3d')
    try:
        c = h.client
        assert c.change_state('configure', timeout=600) and c.change_state('activate')
        assert h.node.wait_for_output(
            "model 'yolov8n': publish_markers is true but depth_source is empty", 30.0)
        assert c.node.count_publishers('/markers') == 0
    finally:
        h.close()
