"""The ONNX graph taking the u8 image (artifacts/onnx_u8_input.py) against the host float path.

The embedded pre-processing is checked on its own (wrapped around an Identity network, so the
graph's output *is* the network input) for bit-equality with ``tasks.preprocess.prepare``, and
through the pipeline on YOLOv8n: detections equal to the float path's and to Ultralytics'.
The u8 graph is meant for GPU providers (``U8_INPUT_PROVIDERS``); to run it here, the tests that
need it let the CPU provider take it as well.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip('onnx', reason='the onnx package is not installed')
ort = pytest.importorskip('onnxruntime', reason='ONNX Runtime is not installed')

import cv2  # noqa: E402
from onnx import helper  # noqa: E402

from detection_match import assert_same_detections  # noqa: E402
from pipeline_builds import PipelineBuilds  # noqa: E402
from vision_nodes.artifacts.cache import cache_key  # noqa: E402
from vision_nodes.artifacts.onnx_u8_input import (U8_ONNX_FILE, embed_u8_input,  # noqa: E402
                                                  onnx_u8_fields)
from vision_nodes.manifest import Preprocessing  # noqa: E402
from vision_nodes.tasks import resolve_manifest  # noqa: E402
from vision_nodes.runners import onnx_providers  # noqa: E402
from vision_nodes.tasks.detect import DetectionParams  # noqa: E402
from vision_nodes.tasks.preprocess import prepare, prepare_u8, rect_shape  # noqa: E402

IMAGES = ('bus.jpg', 'zidane.jpg')
PARAMS = DetectionParams(0.25, 0.45, 300)
PREPROCESSING = (Preprocessing(),  # YOLO: rgb, 1/255
                 Preprocessing(color_order='bgr'),
                 Preprocessing(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225)),
                 Preprocessing(scale=1.0, mean=(123.675, 116.28, 103.53),
                               std=(58.395, 57.12, 57.375), pad_value=0))


@pytest.fixture(scope='module')
def images(assets) -> dict[str, np.ndarray]:
    return {name: cv2.imread(str(assets / name)) for name in IMAGES}


def _identity(shape=('batch', 3, 'height', 'width')) -> 'onnx.ModelProto':
    """A float NCHW "network" that returns its input: the wrapped graph's output is its input."""
    given = helper.make_tensor_value_info('images', onnx.TensorProto.FLOAT, list(shape))
    out = helper.make_tensor_value_info('out', onnx.TensorProto.FLOAT, list(shape))
    graph = helper.make_graph([helper.make_node('Identity', ['images'], ['out'])], 'identity',
                              [given], [out])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid('', 17)], ir_version=8)


def _session(model: 'onnx.ModelProto'):
    return ort.InferenceSession(model.SerializeToString(), providers=['CPUExecutionProvider'])


@pytest.mark.parametrize('prep', PREPROCESSING, ids=('yolo', 'bgr', 'mean-std', 'scale-1'))
def test_the_graphs_network_input_is_the_host_tensor_bit_for_bit(images, prep):
    """Cast, flip, Mul, Sub, Div and Transpose in float32 give prepare's tensor exactly, at the
    rect shapes (letterbox border included) and for a batch of three frames."""
    session = _session(embed_u8_input(_identity(), prep))
    assert [i.type for i in session.get_inputs()] == ['tensor(uint8)']
    assert session.get_inputs()[0].shape == ['batch', 'height', 'width', 3]
    for name, image in images.items():
        size = rect_shape(image.shape[:2], (640, 640))
        want, _ = prepare(image, 'bgr8', size, prep)
        given, _ = prepare_u8(image, 'bgr8', size, prep)
        got = session.run(None, {'images_u8': given})[0]
        assert got.dtype == np.float32 and got.shape == want.shape
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), err_msg=name)
    image = images['bus.jpg']
    frames = [image, image[:, ::-1].copy(), cv2.GaussianBlur(image, (5, 5), 0)]
    want = np.concatenate([prepare(f, 'bgr8', (640, 480), prep)[0] for f in frames])
    given = np.concatenate([prepare_u8(f, 'bgr8', (640, 480), prep)[0] for f in frames])
    got = session.run(None, {'images_u8': given})[0]
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_fixed_dimensions_stay_fixed_and_models_that_do_not_fit_are_refused():
    wrapped = embed_u8_input(_identity((1, 3, 640, 640)), Preprocessing())
    dims = wrapped.graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_value for d in dims] == [1, 640, 640, 3]
    from vision_nodes.artifacts.cache import CacheError

    with pytest.raises(CacheError, match='1 channels'):
        embed_u8_input(_identity((1, 1, 64, 64)), Preprocessing())


def test_the_cache_key_holds_the_parent_and_every_embedded_number():
    base = onnx_u8_fields('a' * 64, Preprocessing())
    keys = {cache_key(onnx_u8_fields('b' * 64, Preprocessing()))}
    for changed in PREPROCESSING[1:] + (Preprocessing(scale=1.0),):
        keys.add(cache_key(onnx_u8_fields('a' * 64, changed)))
    assert len(keys) == len(PREPROCESSING) + 1 and cache_key(base) not in keys


@pytest.fixture(scope='module')
def cpu_takes_u8():
    """Let the CPU provider take the u8 graph too (by default only GPU providers do)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(onnx_providers, 'U8_INPUT_PROVIDERS',
                      onnx_providers.U8_INPUT_PROVIDERS + ('CPUExecutionProvider',))
        yield


@pytest.fixture(scope='module')
def build(model_dir, engine_cache_dir):
    builds = PipelineBuilds(model_dir, engine_cache_dir, resolve_manifest('yolov8n'), 'onnx')
    yield builds
    builds.close()


@pytest.fixture(scope='module')
def host(build):
    return build()


@pytest.fixture(scope='module')
def u8(build, cpu_takes_u8):
    return build(max_batch=3)


def test_the_cpu_provider_takes_the_float_tensor_by_default(host, engine_cache_dir):
    assert not host.task.u8_input and not host.runner.takes_u8
    assert host.runner.describe()['input'] == 'float32 NCHW'


@pytest.mark.parametrize('name', IMAGES)
def test_detections_equal_the_host_float_paths(host, u8, images, name):
    assert u8.task.u8_input and u8.runner.takes_u8
    assert u8.runner.describe()['input'] == 'u8 NHWC bgr, pre-processing in the model'
    want = host.process(images[name], 'bgr8', PARAMS)
    got = u8.process(images[name], 'bgr8', PARAMS)
    assert len(got) == len(want) >= 2
    np.testing.assert_array_equal(got.class_ids, want.class_ids)
    np.testing.assert_allclose(got.boxes, want.boxes, atol=1e-3)
    np.testing.assert_allclose(got.scores, want.scores, atol=1e-5)


def test_detections_equal_ultralytics_predict_on_the_same_onnx(u8, images):
    """The independent reference: Ultralytics' own pre/post-processing on the float export.

    The export has a free batch axis (``max_batch`` 3), so Ultralytics letterboxes at the
    rect shape as the pipeline does: the whole ``process`` is compared.
    """
    pytest.importorskip('ultralytics', reason='ultralytics is not installed')
    from ultralytics import YOLO

    reference = YOLO(str(u8.runner.model_path), task='detect')
    for name, image in images.items():
        ref = reference.predict(image, imgsz=640, conf=0.25, iou=0.45, verbose=False,
                                device='cpu')[0]
        ours = u8.process(image, 'bgr8', PARAMS)
        order = np.argsort(-ref.boxes.conf.numpy(), kind='stable')
        assert len(ours) == len(order) >= 2, name
        np.testing.assert_array_equal(ours.class_ids,
                                      ref.boxes.cls.numpy().astype(int)[order])
        np.testing.assert_allclose(ours.boxes, ref.boxes.xyxy.numpy()[order], atol=1.0)
        np.testing.assert_allclose(ours.scores, ref.boxes.conf.numpy()[order], atol=1e-3)


def test_a_batch_of_three_cameras(host, u8, images):
    frames = [(images['bus.jpg'], 'bgr8'), (images['zidane.jpg'], 'bgr8'),
              (images['bus.jpg'][:, ::-1].copy(), 'bgr8')]
    assert u8.runner.max_batch == 3
    got = u8.process_batch(frames, PARAMS)
    for (image, encoding), result in zip(frames, got):
        assert_same_detections(host.process(image, encoding, PARAMS), result, at_least=2)


def test_a_float_tensor_still_runs_on_the_float_graph(host, u8, images):
    tensor, _ = host.task.preprocess(images['bus.jpg'], 'bgr8')
    np.testing.assert_allclose(u8.runner.infer(tensor)[0], host.runner.infer(tensor)[0],
                               atol=1e-4)


def test_the_u8_graph_is_its_own_cache_entry_and_a_corrupt_one_is_rebuilt(
        build, u8, engine_cache_dir, tmp_path, images):
    """Keyed apart from the float export; tampered bytes are never loaded but rebuilt."""
    for entry in Path(engine_cache_dir).glob('yolov8n-onnx-*'):
        if entry.is_dir():  # not the lock files beside the entries
            shutil.copytree(entry, tmp_path / entry.name)
    twin = Path(u8.runner.config.artifact.u8.path).parent
    meta = json.loads((tmp_path / twin.name / 'entry.json').read_text())
    assert meta['kind'] == 'onnx-u8' and meta['fields']['color_order'] == 'rgb'
    exports = [p for p in tmp_path.glob('yolov8n-onnx-*') if '-u8-' not in p.name]
    assert exports and all(json.loads((p / 'entry.json').read_text())['key'] != meta['key']
                           for p in exports)
    graph = tmp_path / twin.name / U8_ONNX_FILE
    data = bytearray(graph.read_bytes())
    data[len(data) // 2:len(data) // 2 + 64] = bytes(64)  # same size, other weights
    graph.write_bytes(bytes(data))
    log: list[str] = []
    rebuilt = build(cache_dir=tmp_path, log=log.append, max_batch=3)
    assert rebuilt.runner.takes_u8
    assert any('u8 input embedded' in line for line in log), log
    assert graph.read_bytes() != bytes(data)
    want = u8.process(images['bus.jpg'], 'bgr8', PARAMS)
    got = rebuilt.process(images['bus.jpg'], 'bgr8', PARAMS)
    np.testing.assert_array_equal(got.boxes, want.boxes)
