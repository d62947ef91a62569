"""Oriented boxes and classification through the node, over real rclpy and DDS.

One node process per task walks cpu, onnx and openvino at fp32 (configure, activate, one
frame, cleanup) and checks each frame against Ultralytics' own ``predict`` on the same test
model (../shared/models: seeded angle and classifier heads, parity only):

- obb: every Ultralytics box scoring >= 0.5 has a published Detection2D of its class whose
  corners, ``cv2.boxPoints(((x, y), (size_x, size_y), degrees(theta)))``, are Ultralytics'
  ``xyxyxyxy`` (in reverse order, as documented) within 2 px; ``label_info`` names the classes;
- classify: ``classification`` lists the same top-5 classes in the same order as Ultralytics'
  ``probs.top5``, probabilities within 0.01, and ``classification_top_k`` applies live.

Then tracking (ids become track ids, stable over frames) with the annotated picture (rotated
boxes drawn), and several cameras (``image_topics``) with both models in one node.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy', reason='rclpy (ROS 2) is not installed')
pytest.importorskip('vision_msgs.msg', reason='vision_msgs is not built (scripts/setup_env.sh)')
pytest.importorskip('torch', reason='PyTorch is not installed (the reference)')

import cv2  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402
from vision_msgs.msg import Classification, Detection2DArray, LabelInfo  # noqa: E402

from node_harness import LATCHED, Harness  # noqa: E402
from ultralytics_reference import predict  # noqa: E402
from vision_nodes.tasks import resolve_manifest  # noqa: E402
from vision_nodes.pipeline import build_pipeline  # noqa: E402
from vision_nodes.ros.inputs.conversion import image_to_numpy, numpy_to_image  # noqa: E402
from vision_nodes.tasks.classify import ClassifyParams  # noqa: E402
from vision_nodes.tasks.detect import DetectionParams  # noqa: E402
from vision_nodes.tools.client import publish_until_answered, wait_for  # noqa: E402

BACKENDS = ['cpu', 'onnx', 'openvino']


def box_points(det) -> np.ndarray:
    """The documented convention: OpenCV's corners of a published rotated box."""
    box = det.bbox
    return cv2.boxPoints(((box.center.position.x, box.center.position.y),
                          (box.size_x, box.size_y), math.degrees(box.center.theta)))


def check_obb(msg: Detection2DArray, ref) -> int:
    """Each reference box scoring >= 0.5 matched (class, corners within 2 px); return count."""
    corners = [box_points(d) for d in msg.detections]
    classes = [int(d.results[0].hypothesis.class_id) for d in msg.detections]
    wanted = ref.obb.conf.numpy() >= 0.5
    for points, cls in zip(ref.obb.xyxyxyxy.numpy()[wanted], ref.obb.cls.numpy()[wanted]):
        errors = [np.abs(c[::-1] - points).max() if k == int(cls) else np.inf
                  for c, k in zip(corners, classes)]
        assert errors and min(errors) <= 2.0, (cls, points, min(errors, default=None))
    return int(wanted.sum())


def _walk(h: Harness, frame: Image, answers, check) -> None:
    c = h.client
    images = c.publisher(Image, '/image', 10)
    for backend in BACKENDS:
        if backend == 'openvino':
            pytest.importorskip('openvino', reason='OpenVINO is not installed')
        assert all(r.successful for r in c.set_parameters(backend=backend))
        assert c.change_state('configure', timeout=600), h.node.output()[-2000:]
        assert c.get_parameters('precision_in_use')['precision_in_use'] == 'fp32'
        assert c.change_state('activate')
        answers.clear()
        got = h.send(frame, answers, images)
        assert got is not None, backend
        check(backend, got)
        assert c.change_state('deactivate') and c.change_state('cleanup')


def test_obb_through_the_node(model_dir, engine_cache_dir, bus_bgr, bus_msg):
    ref = predict(model_dir / 'yolov8n-obb.pt', bus_bgr)
    h = Harness({'model': 'yolov8n_obb', 'model_dir': str(model_dir), 'precision': 'fp32',
                 'engine_cache_dir': str(engine_cache_dir)}, 'vn_obb')
    try:
        answers = h.client.subscribe(Detection2DArray, '/detections', 10)
        labels = h.client.subscribe(LabelInfo, '/label_info', LATCHED)

        def check(backend, msg):
            assert check_obb(msg, ref) >= 4, backend
            assert len(msg.detections) == len(ref.obb)
            assert [d.id for d in msg.detections] == [str(i) for i in range(len(ref.obb))]
            assert any(abs(d.bbox.center.theta) > 0.1 for d in msg.detections)
            info = labels.get(10.0)
            assert info is not None and len(info.class_map) == 80, backend
            assert info.class_map[0].class_name == 'person'

        _walk(h, bus_msg, answers, check)
    finally:
        h.close()


def test_classify_through_the_node(model_dir, engine_cache_dir, bus_bgr, bus_msg):
    ref = predict(model_dir / 'yolov8n-cls.pt', bus_bgr, imgsz=224)
    probs = ref.probs.data.numpy()
    h = Harness({'model': 'yolov8n_cls', 'model_dir': str(model_dir), 'precision': 'fp32',
                 'engine_cache_dir': str(engine_cache_dir)}, 'vn_classify')
    try:
        answers = h.client.subscribe(Classification, '/classification', 10)
        labels = h.client.subscribe(LabelInfo, '/label_info', LATCHED)

        def check(backend, msg):
            got = [int(r.class_id) for r in msg.results]
            assert got == list(ref.probs.top5), (backend, got, ref.probs.top5)
            np.testing.assert_allclose([r.score for r in msg.results], probs[got], atol=0.01)
            info = labels.get(10.0)
            assert info is not None and len(info.class_map) == 80, backend

        _walk(h, bus_msg, answers, check)
        c = h.client
        assert c.change_state('configure', timeout=600) and c.change_state('activate')
        assert all(r.successful for r in c.set_parameters(classification_top_k=3))
        images = c.publisher(Image, '/image', 10)
        got = h.send(bus_msg, answers, images)
        assert [int(r.class_id) for r in got.results] == list(ref.probs.top5[:3])
        refused = c.set_parameters(classification_top_k=0)
        assert not refused[0].successful and 'classification_top_k' in refused[0].reason
    finally:
        h.close()


def test_obb_tracks_and_draws_rotated_boxes(model_dir, engine_cache_dir, bus_bgr):
    """With a tracker, ids are track ids kept from frame to frame (the tracker follows the
    boxes around the rotated ones); the annotated picture shows the rotated boxes: the
    pixels along a published box's edge are drawn over, those of its axis-aligned hull's
    corners are not."""
    h = Harness({'model': 'yolov8n_obb', 'model_dir': str(model_dir), 'backend': 'onnx',
                 'engine_cache_dir': str(engine_cache_dir), 'tracker': 'bytetrack',
                 'publish_annotated': True}, 'vn_obb_track')
    try:
        c = h.client
        assert c.change_state('configure', timeout=600) and c.change_state('activate')
        answers = c.subscribe(Detection2DArray, '/detections', 10)
        pictures = c.subscribe(Image, '/annotated', 10)
        images = c.publisher(Image, '/image', 10)
        assert wait_for(lambda: c.node.count_subscribers('/image') == 1, 30.0)
        seen = []
        for index in range(3):
            msg = numpy_to_image(bus_bgr, 'bgr8')
            msg.header.frame_id = 'camera'
            msg.header.stamp.sec = 100 + index
            got = publish_until_answered(images, msg, answers,
                                         match=lambda m, s=100 + index: m.header.stamp.sec == s)
            assert got is not None
            seen.append(got)
        ids = [sorted(int(d.id) for d in m.detections) for m in seen[1:]]
        assert ids[0] and ids[0] == ids[1] and min(ids[0]) >= 1, ids
        picture = pictures.get(30.0, lambda m: m.header.stamp.sec == 102)
        assert picture is not None
        drawn = np.any(image_to_numpy(picture) != bus_bgr, axis=2)
        det = max(seen[-1].detections, key=lambda d: d.results[0].hypothesis.score)
        points = box_points(det)
        middle = np.round((points[0] + points[1]) / 2).astype(int)  # on an edge
        assert drawn[middle[1], middle[0]]
        hull_corner = np.round(points.min(axis=0) + 3).astype(int)
        assert not drawn[hull_corner[1], hull_corner[0]]
    finally:
        h.close()


def test_several_cameras_run_obb_and_classify(model_dir, engine_cache_dir, bus_bgr, assets):
    """Two cameras, both models in one node, frames sent together (one batch): each camera's
    results are on its own topics, with its frame's header, and equal each model's results
    on that frame alone."""
    zidane = cv2.imread(str(assets / 'zidane.jpg'))
    frames = {'front': bus_bgr, 'rear': zidane}
    h = Harness({'models': ['yolov8n_obb', 'yolov8n_cls'], 'model_dir': str(model_dir),
                 'engine_cache_dir': str(engine_cache_dir), 'backend': 'onnx',
                 'precision': 'fp32', 'batch_window': 200.0,
                 'image_topics': [f'/{n}/image_raw' for n in frames]}, 'vn_obb_cls_cams')
    references = {task: build_pipeline(resolve_manifest(name), 'onnx',
                                       model_dir=str(model_dir), cache_dir=engine_cache_dir)
                  for task, name in (('obb', 'yolov8n_obb'), ('cls', 'yolov8n_cls'))}
    try:
        c = h.client
        assert c.change_state('configure', timeout=600) and c.change_state('activate')
        boxes = {n: c.subscribe(Detection2DArray, f'/{n}/yolov8n_obb/detections', 10)
                 for n in frames}
        classes = {n: c.subscribe(Classification, f'/{n}/yolov8n_cls/classification', 10)
                   for n in frames}
        pubs = {n: c.publisher(Image, f'/{n}/image_raw', 10) for n in frames}
        for n, image in frames.items():  # discovery: each camera answered once
            hello = numpy_to_image(image, 'bgr8')
            hello.header.frame_id = f'{n}_hello'
            assert publish_until_answered(pubs[n], hello, classes[n]) is not None, n
        sent = {n: numpy_to_image(image, 'bgr8') for n, image in frames.items()}
        for n, msg in sent.items():
            msg.header.frame_id = f'{n}_frame'
        for n, msg in sent.items():
            pubs[n].publish(msg)
        for n, image in frames.items():
            mine = (lambda m, f=f'{n}_frame': m.header.frame_id == f)
            got, top = boxes[n].get(60.0, mine), classes[n].get(60.0, mine)
            assert got is not None and top is not None, n
            want = references['obb'].process(image, 'bgr8', DetectionParams())
            xywhr = np.array([(d.bbox.center.position.x, d.bbox.center.position.y,
                               d.bbox.size_x, d.bbox.size_y, d.bbox.center.theta)
                              for d in got.detections]).reshape(-1, 5)
            np.testing.assert_allclose(xywhr, want.xywhr, atol=1e-3)
            alone = references['cls'].process(image, 'bgr8', ClassifyParams())
            assert [int(r.class_id) for r in top.results] == alone.class_ids.tolist()
            np.testing.assert_allclose([r.score for r in top.results], alone.scores,
                                       atol=1e-5)
    finally:
        for reference in references.values():
            reference.close()
        h.close()
