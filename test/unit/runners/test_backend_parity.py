"""Backend parity on bus.jpg: PyTorch vs ONNX Runtime, and our pipeline vs Ultralytics.

Tolerances: raw outputs agree to 1e-2 absolute on box coordinates (pixels of the 640 input)
and 1e-3 on class scores (fp32 kernels of two runtimes); final detections have the same
classes in the same order, boxes within 0.5 px and scores within 1e-3.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip('torch', reason='PyTorch is not installed')
pytest.importorskip('onnxruntime', reason='ONNX Runtime is not installed')
pytest.importorskip('ultralytics', reason='ultralytics is not installed')

from vision_nodes.artifacts.onnx_export import ONNX_FILE  # noqa: E402
from vision_nodes.tasks import resolve_manifest  # noqa: E402
from vision_nodes.pipeline import build_pipeline  # noqa: E402
from vision_nodes.tasks.detect import DetectionParams  # noqa: E402


@pytest.fixture(scope='module')
def pipelines(model_dir, engine_cache_dir):
    manifest = resolve_manifest('yolov8n')
    built = {b: build_pipeline(manifest, b, model_dir=str(model_dir),
                               cache_dir=engine_cache_dir) for b in ('cpu', 'onnx')}
    yield built
    for p in built.values():
        p.close()


def test_raw_outputs_agree(pipelines, bus_bgr):
    """Same tensor in, same (1, 84, 8400) tensor out, within fp32 tolerance."""
    tensor, _ = pipelines['cpu'].task.preprocess(bus_bgr, 'bgr8')
    out_torch = pipelines['cpu'].runner.infer(tensor)[0]
    out_onnx = pipelines['onnx'].runner.infer(tensor)[0]
    assert out_torch.shape == out_onnx.shape == (1, 84, 8400)
    np.testing.assert_allclose(out_onnx[:, :4], out_torch[:, :4], atol=1e-2, rtol=0)
    np.testing.assert_allclose(out_onnx[:, 4:], out_torch[:, 4:], atol=1e-3, rtol=0)


def test_final_detections_agree(pipelines, bus_bgr):
    """Decoded detections on bus.jpg match between backends."""
    params = DetectionParams()
    a = pipelines['cpu'].process(bus_bgr, 'bgr8', params)
    b = pipelines['onnx'].process(bus_bgr, 'bgr8', params)
    assert len(a) == len(b) >= 4
    np.testing.assert_array_equal(a.class_ids, b.class_ids)
    np.testing.assert_allclose(a.boxes, b.boxes, atol=0.5)
    np.testing.assert_allclose(a.scores, b.scores, atol=1e-3)
    names = [pipelines['onnx'].labels[c] for c in b.class_ids]
    assert names.count('bus') == 1 and names.count('person') >= 3


def test_matches_ultralytics_predict_on_the_same_onnx(pipelines, bus_bgr):
    """An independent reference: Ultralytics' own pre/post-processing on our exported file.

    Ultralytics runs an .onnx with a fixed batch size at the square export shape, so ours
    runs at that shape here too (rect inference is compared in test_rect.py).
    """
    from ultralytics import YOLO

    onnx = pipelines['onnx']
    onnx_path = onnx.runner.model_path
    assert onnx_path.name == ONNX_FILE
    ref = YOLO(str(onnx_path), task='detect').predict(
        bus_bgr, imgsz=640, conf=0.25, iou=0.45, verbose=False, device='cpu')[0]
    tensor, meta = onnx.task.preprocess(bus_bgr, 'bgr8', (640, 640))
    ours = onnx.task.postprocess(onnx.runner.infer(tensor), meta,
                                 DetectionParams(0.25, 0.45, 300))
    ref_boxes = ref.boxes.xyxy.numpy()
    ref_cls = ref.boxes.cls.numpy().astype(int)
    ref_conf = ref.boxes.conf.numpy()
    order = np.argsort(-ref_conf, kind='stable')
    assert len(ours) == len(ref_conf)
    np.testing.assert_array_equal(ours.class_ids, ref_cls[order])
    np.testing.assert_allclose(ours.boxes, ref_boxes[order], atol=1.0)
    np.testing.assert_allclose(ours.scores, ref_conf[order], atol=1e-3)


def test_labels_come_from_the_weights_and_the_onnx_metadata(pipelines):
    """Class names: from the .pt for torch, from the exported file's metadata for ONNX."""
    assert pipelines['cpu'].labels == pipelines['onnx'].labels
    assert pipelines['onnx'].runner.labels[:3] == ['person', 'bicycle', 'car']
    assert len(pipelines['onnx'].labels) == 80
