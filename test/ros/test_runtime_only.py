"""A runtime-only install: the node runs an exported model and tracks without torch (#33, 4).

A robot with only ONNX Runtime or OpenVINO (``requirements/runtime.txt`` and
``requirements/openvino.txt``: no torch, torchvision, Ultralytics, transformers, onnx or
onnxslim) runs a model exported beforehand on a machine that has them. Here the export is made
in the test process, where torch is there; the node then runs in a process where those packages
are not installed as far as Python can tell: ``test/absent_packages/sitecustomize.py``, first
on its ``PYTHONPATH``, wraps every finder of ``sys.meta_path``, so each of them finds nothing
for those names (``import torch`` raises ModuleNotFoundError,
``importlib.util.find_spec('torch')`` is None, as on a machine without them). At exit the
node's process writes which of them it asked for and which are in ``sys.modules``; none may
be loaded.

The node configures the exported model with backend ``onnx`` and ``openvino`` (which converts
the ONNX to an IR itself), publishes the detections the same model gives in the normal process
(the ``.pt`` manifest through the same backend and precision, class ids equal, boxes within a
pixel), and with ``tracker: bytetrack`` publishes track ids on the frames that follow.
"""

from __future__ import annotations

import array
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy', reason='rclpy (ROS 2) is not installed')
pytest.importorskip('vision_msgs.msg', reason='vision_msgs is not built (scripts/setup_env.sh)')

from sensor_msgs.msg import Image  # noqa: E402
from vision_msgs.msg import Detection2DArray  # noqa: E402

from absent_packages import absent_env  # noqa: E402
from node_harness import Harness, manifest_copy  # noqa: E402
from vision_nodes.tasks import resolve_manifest  # noqa: E402
from vision_nodes.tasks.detect import DetectionParams  # noqa: E402
from vision_nodes.tools.client import publish_until_answered, wait_for  # noqa: E402

#: What a runtime-only install lacks: the torch path's packages (setup.py's ``torch`` extra).
ABSENT = ('torch', 'torchvision', 'ultralytics', 'transformers', 'onnx', 'onnxslim')
#: The backends a runtime-only install runs an exported model on, and the module each needs.
RUNTIMES = {'onnx': 'onnxruntime', 'openvino': 'openvino'}
#: The node's precision_in_use → the precision parameter that gives it.
REQUESTED = {'fp32': 'fp32', 'bf16': 'fp16', 'fp16': 'fp16'}


@pytest.fixture(scope='module')
def robot(model_dir, engine_cache_dir, tmp_path_factory) -> dict[str, Path]:
    """A robot's folders: the model exported here (torch present) and a manifest naming it.

    The export is the node's own (the engine cache's ``model.onnx`` of the ``.pt`` manifest);
    the robot's engine cache starts empty, so nothing made with torch is found there.
    """
    from vision_nodes.pipeline import build_pipeline

    folder = tmp_path_factory.mktemp('robot')
    pipeline = build_pipeline(resolve_manifest('yolov8n'), 'onnx', model_dir=str(model_dir),
                              cache_dir=engine_cache_dir, precision='fp32',
                              check_precision=False)
    try:
        exported = Path(pipeline.runner.model_path)
    finally:
        pipeline.close()
    assert exported.suffix == '.onnx', exported
    shutil.copyfile(exported, folder / 'yolov8n.onnx')
    manifest = manifest_copy(folder, 'yolov8n_exported', weights='yolov8n.onnx',
                             architecture='onnx', backends=list(RUNTIMES))
    return {'folder': folder, 'manifest': Path(manifest)}


def _env(report: Path) -> dict[str, str]:
    """Return the node's environment: the sitecustomize first, where to write at exit."""
    return {**absent_env(ABSENT), 'VISION_NODES_TEST_REPORT': str(report)}


def _boxes(msg: Detection2DArray) -> np.ndarray:
    """Return the message's boxes as (N, 4) xyxy source pixels."""
    return np.array([[d.bbox.center.position.x - d.bbox.size_x / 2,
                      d.bbox.center.position.y - d.bbox.size_y / 2,
                      d.bbox.center.position.x + d.bbox.size_x / 2,
                      d.bbox.center.position.y + d.bbox.size_y / 2]
                     for d in msg.detections], np.float64).reshape(-1, 4)


def _assert_same(msg: Detection2DArray, reference) -> None:
    """Same detections as ``reference`` (a ``Detections``): classes, boxes within a pixel."""
    classes = [int(d.results[0].hypothesis.class_id) for d in msg.detections]
    assert sorted(classes) == sorted(reference.class_ids.tolist()), (classes, reference)
    boxes, expected = _boxes(msg), reference.boxes.astype(np.float64)
    unmatched = list(range(len(boxes)))
    for box, cls in zip(expected, reference.class_ids.tolist()):
        same = [i for i in unmatched if classes[i] == cls]
        best = min(same, key=lambda i: np.abs(boxes[i] - box).max())
        assert np.abs(boxes[best] - box).max() <= 1.0, (boxes[best], box, cls)
        unmatched.remove(best)


def _reference(model_dir, cache, backend: str, precision: str, image: np.ndarray):
    """The ``.pt`` model's detections in this process (torch present), as the node runs it."""
    from vision_nodes.pipeline import build_pipeline

    pipeline = build_pipeline(resolve_manifest('yolov8n'), backend, model_dir=str(model_dir),
                              cache_dir=cache, precision=REQUESTED[precision],
                              check_precision=False)
    try:
        return pipeline.process(image, 'bgr8', DetectionParams())
    finally:
        pipeline.close()


def _frame(image: np.ndarray, sec: int) -> Image:
    """Return ``image`` (BGR) as a camera frame stamped ``sec`` seconds."""
    height, width = image.shape[:2]
    msg = Image(height=height, width=width, encoding='bgr8', step=width * 3)
    msg.data = array.array('B', np.ascontiguousarray(image).tobytes())
    msg.header.frame_id = 'camera'
    msg.header.stamp.sec = sec
    return msg


def _exchange(images, answers, msg: Image) -> Detection2DArray | None:
    """Publish ``msg`` until the detections of its stamp arrive (discovery may drop some)."""
    return publish_until_answered(images, msg, answers, 60.0, match=lambda m: (
        m.header.stamp == msg.header.stamp and m.header.frame_id == msg.header.frame_id))


def _ids(msg: Detection2DArray) -> list[str]:
    return [d.id for d in msg.detections]


def _report(report: Path, pid: int) -> dict:
    """What the node's process said at exit about the absent packages."""
    path = report / f'{pid}.json'
    assert path.is_file(), f'the node wrote no {path.name}: it did not exit normally'
    return json.loads(path.read_text())


@pytest.mark.parametrize('backend', list(RUNTIMES))
def test_an_exported_model_detects_and_tracks_without_torch_or_ultralytics(
        backend, robot, model_dir, engine_cache_dir, bus_bgr, tmp_path):
    """Configure, activate, detect as the normal process does, then track; torch never loads."""
    pytest.importorskip(RUNTIMES[backend], reason=f'backend {backend} is not installed')
    report = tmp_path / 'report'
    report.mkdir()
    h = Harness({'model': str(robot['manifest']), 'model_dir': str(robot['folder']),
                 'engine_cache_dir': str(tmp_path / 'robot_cache'), 'backend': backend},
                f'vn_runtime_only_{backend}', env=_env(report))
    try:
        c = h.client
        assert c.change_state('configure', timeout=600), h.node.output()[-3000:]
        assert c.change_state('activate'), h.node.output()[-3000:]
        used = c.get_parameters('backend_in_use', 'precision_in_use')
        assert used['backend_in_use'] == backend, used
        answers = c.subscribe(Detection2DArray, '/detections', 10)
        images = c.publisher(Image, '/image', 10)
        assert wait_for(lambda: c.node.count_subscribers('/image') == 1, 30.0)
        got = _exchange(images, answers, _frame(bus_bgr, 1))
        assert got is not None, h.node.output()[-3000:]
        expected = _reference(model_dir, engine_cache_dir, backend,
                              used['precision_in_use'], bus_bgr)
        assert len(expected) >= 4
        _assert_same(got, expected)
        assert _ids(got) == [str(i) for i in range(len(got.detections))]  # untracked: indices
        assert all(r.successful for r in c.set_parameters(tracker='bytetrack'))
        first = _exchange(images, answers, _frame(bus_bgr, 2))
        second = _exchange(images, answers, _frame(bus_bgr, 3))
        assert first is not None and second is not None, h.node.output()[-3000:]
        ids = _ids(second)
        assert ids and all(i.isdigit() and int(i) >= 1 for i in ids), \
            (ids, h.node.output()[-3000:])
        assert len(set(ids)) == len(ids) and set(_ids(first)) <= set(ids), (_ids(first), ids)
    finally:
        h.close()
    seen = _report(report, h.node.process.pid)
    assert seen['main'] == 'vision_nodes.ros.main', seen
    assert seen['found'] == [] and seen['loaded'] == [], seen
