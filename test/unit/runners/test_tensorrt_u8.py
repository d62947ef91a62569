"""The ``tensorrt`` backend taking the u8 image: its engine built from the u8-input ONNX graph.

Through the pipeline, a detection model's engine is built from ``artifacts/onnx_u8_input.py``'s
graph (Cast, channel order, scale, Transpose in front of the network), so the task hands the
letterboxed u8 NHWC image and a quarter of the float tensor's bytes is uploaded. Run against
the fake TensorRT (``test/fake_tensorrt.py``: the engine executes the ONNX it was built from
with ONNX Runtime, reading its input as the engine's ``DataType`` says), so detections are
the graph's own: compared with the float engine's and with Ultralytics' on ``yolov8n.pt``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np
import pytest

pytest.importorskip('onnx', reason='the onnx package builds the u8-input graph')
ort = pytest.importorskip('onnxruntime', reason='ONNX Runtime runs the fake engines')

from detection_match import assert_same_detections  # noqa: E402
from fake_tensorrt import make_fake_cudart, make_fake_tensorrt  # noqa: E402
from model_manifests import model_manifest  # noqa: E402
from tiny_onnx import tiny_detector  # noqa: E402
from ultralytics_reference import match_reference, predict  # noqa: E402
from vision_nodes.artifacts.cache import ArtifactCache  # noqa: E402
from vision_nodes.artifacts.onnx_u8_input import U8_ONNX_FILE  # noqa: E402
from vision_nodes.artifacts.types import embedded_preprocessing  # noqa: E402
from vision_nodes.pipeline import LoadedModel, build_pipeline, create_runner  # noqa: E402
from vision_nodes.runners.base import RunnerConfig, RunnerError  # noqa: E402
from vision_nodes.tasks import create_task, resolve_manifest  # noqa: E402
from vision_nodes.tasks.detect import DetectionParams  # noqa: E402

IMAGES = ('bus.jpg', 'zidane.jpg')
PARAMS = DetectionParams(0.25, 0.45, 300)
MAX_BATCH = 3


@pytest.fixture(scope='module')
def references(images, model_dir) -> dict:
    """Ultralytics' predict on yolov8n.pt per image (None without ultralytics)."""
    try:
        import ultralytics  # noqa: F401
    except ImportError:
        return {name: None for name in IMAGES}
    return {name: predict(model_dir / 'yolov8n.pt', images[name]) for name in IMAGES}


@pytest.fixture(scope='module')
def fakes(references):
    """A fake TensorRT 10.x and CUDA runtime for the whole module: (trt, cuda runtime).

    Ultralytics' references are made first: PyTorch's compiler looks for a real ``tensorrt``
    module when Ultralytics first imports it.
    """
    rt = make_fake_cudart()
    trt = make_fake_tensorrt(rt)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, 'cuda.bindings.runtime', rt)
        patch.setitem(sys.modules, 'tensorrt', trt)
        yield trt, rt


@pytest.fixture(scope='module')
def images(assets) -> dict[str, np.ndarray]:
    return {name: cv2.imread(str(assets / name)) for name in IMAGES}


@pytest.fixture(scope='module')
def manifest():
    """YOLOv8n batching up to three cameras (an export with a free batch axis)."""
    return replace(resolve_manifest('yolov8n'), backends=('onnx', 'tensorrt'),
                   max_batch=MAX_BATCH)


@pytest.fixture(scope='module')
def u8(fakes, manifest, model_dir, engine_cache_dir):
    """The pipeline's engine: the task hands the u8 image."""
    pipeline = build_pipeline(manifest, 'tensorrt', model_dir=str(model_dir),
                              cache_dir=engine_cache_dir, max_batch=MAX_BATCH)
    yield pipeline
    pipeline.close()


@pytest.fixture(scope='module')
def host(fakes, manifest, model_dir, engine_cache_dir):
    """The same model's engine built from the float graph, fed the host's float tensor."""
    config = RunnerConfig(manifest=manifest, weights=manifest.weights_path(str(model_dir)),
                          backend='tensorrt', cache=ArtifactCache(engine_cache_dir))
    runner = create_runner(config)
    model = LoadedModel(manifest, runner, create_task(manifest), list(runner.labels))
    yield model
    model.close()


def _calls(trt, what: str) -> list[dict]:
    return [details for name, details in trt.calls if name == what]


def _fields(runner) -> dict:
    return json.loads((runner.engine_path.parent / 'entry.json').read_text())['fields']


def test_the_engine_takes_the_u8_image_nhwc(fakes, u8, images):
    """UINT8 input, NHWC dims and profile, built from the onnx-u8 entry's exact bytes."""
    trt, rt = fakes
    runner = u8.runner
    assert runner.takes_u8 and u8.task.u8_input
    name = runner._io.input_name
    assert name == 'images_u8'
    assert runner._engine.get_tensor_dtype(name) == trt.DataType.UINT8
    assert tuple(runner._engine.get_tensor_shape(name)) == (-1, -1, -1, 3)
    built = json.loads((runner.engine_path.parent / 'build.json').read_text())
    assert built['input_layout'] == 'u8 NHWC'
    assert built['profile'] == {'min': [1, 32, 32, 3], 'opt': [3, 640, 640, 3],
                                'max': [3, 640, 640, 3]}
    assert runner.dynamic_shapes and runner.max_batch == MAX_BATCH
    assert runner.describe()['input'] == 'u8 NHWC bgr, pre-processing in the engine'
    # A frame is uploaded as its u8 letterboxed image: 640 x 480 x 3 bytes, a quarter of
    # the float tensor's.
    rt.state.copies.clear()
    u8.process(images['bus.jpg'], 'bgr8', PARAMS)
    uploads = [c['bytes'] for c in rt.state.copies if c['kind'] == 'cudaMemcpyHostToDevice']
    assert uploads == [640 * 480 * 3]
    assert _calls(trt, 'set_input_shape')[-1]['shape'] == (1, 640, 480, 3)
    tensor, _ = create_task(u8.manifest).preprocess(images['bus.jpg'], 'bgr8')
    with pytest.raises(RunnerError, match=r"'tensorrt': this engine takes the u8 \(N, H, W, "
                                          r'3\) bgr image .*, not a float32 array'):
        runner.infer(tensor)


def _u8_twins(cache_root: Path) -> dict[str, dict]:
    """The onnx-u8 entries in a cache: their graph's SHA-256 -> their key fields."""
    return {hashlib.sha256(graph.read_bytes()).hexdigest():
            json.loads((graph.parent / 'entry.json').read_text())['fields']
            for graph in cache_root.glob(f'*-onnx-u8-*/{U8_ONNX_FILE}')}


def test_the_cache_key_differs_from_the_float_engines(u8, host):
    """Two entries: the u8 engine's key holds the embedded pre-processing, the float's not;
    the u8 engine is built from the onnx-u8 twin of the float engine's graph."""
    ours, theirs = _fields(u8.runner), _fields(host.runner)
    twin = _u8_twins(Path(u8.runner.config.cache.root))[ours['onnx_sha256']]
    assert twin['parent_onnx_sha256'] == theirs['onnx_sha256']
    assert u8.runner.engine_path.parent != host.runner.engine_path.parent
    assert ours['embedded_preprocessing'] == embedded_preprocessing(
        u8.manifest.preprocessing)
    assert 'embedded_preprocessing' not in theirs
    assert ours['onnx_sha256'] != theirs['onnx_sha256']
    assert not host.runner.takes_u8 and host.runner.describe()['input'] == 'float32 NCHW'


@pytest.mark.parametrize('name', IMAGES)
def test_detections_equal_the_float_engines_and_ultralytics(u8, host, images, references,
                                                            name):
    """Rect inference (640 x 480, 384 x 640): the float engine's detections, and
    Ultralytics' own predict on yolov8n.pt (same classes, boxes IoU >= 0.9)."""
    assert u8.runner.takes_u8 and not host.runner.takes_u8
    image = images[name]
    want = host.process(image, 'bgr8', PARAMS)
    got = u8.process(image, 'bgr8', PARAMS)
    assert len(got) == len(want) >= 2
    np.testing.assert_array_equal(got.class_ids, want.class_ids)
    np.testing.assert_allclose(got.boxes, want.boxes, atol=1e-3)
    np.testing.assert_allclose(got.scores, want.scores, atol=1e-5)
    ref = references[name]
    if ref is None:
        pytest.skip('ultralytics is not installed')
    for j, i in enumerate(match_reference(got, ref)):
        assert abs(got.scores[i] - float(ref.boxes.conf[j])) < 0.01


def test_a_batch_of_three_cameras(fakes, u8, host, images):
    """Three frames of one shape run as one (3, 640, 480, 3) u8 batch."""
    trt, _ = fakes
    bus = images['bus.jpg']
    frames = [(bus, 'bgr8'), (bus[:, ::-1].copy(), 'bgr8'),
              (cv2.GaussianBlur(bus, (5, 5), 0), 'bgr8')]
    got = u8.process_batch(frames, PARAMS)
    assert _calls(trt, 'set_input_shape')[-1]['shape'] == (3, 640, 480, 3)
    for (image, encoding), result in zip(frames, got):
        assert_same_detections(host.process(image, encoding, PARAMS), result, at_least=2)


@pytest.mark.parametrize('version', ('10.13.0.35', '11.4.0.106'))
def test_fp16_takes_the_u8_image(monkeypatch, fake_gpu, manifest, model_dir, tmp_path, images,
                                 u8, version):
    """fp16: TensorRT 10's FP16 flag on the u8 graph; TensorRT 11 parses the u8 twin of the
    fp16-converted graph. Either way the same objects as the fp32 u8 engine."""
    trt = make_fake_tensorrt(fake_gpu, version)
    monkeypatch.setitem(sys.modules, 'tensorrt', trt)
    single = replace(manifest, max_batch=1)
    # Without the precision check, whose fp32 twin would add its own engine and u8 graph.
    fp16 = build_pipeline(single, 'tensorrt', model_dir=str(model_dir), precision='fp16',
                          cache_dir=tmp_path, check_precision=False)
    try:
        assert fp16.runner.takes_u8
        assert ('FP16' in trt.built[0]['flags']) is version.startswith('10.')
        twins = _u8_twins(tmp_path)
        assert list(twins) == [_calls(trt, 'parse')[0]['sha256']]
        parent = next(iter(twins.values()))['parent_onnx_sha256']
        fp16_graphs = list(tmp_path.glob('yolov8n-onnx-fp16-*/*.onnx'))
        assert len(fp16_graphs) == (0 if version.startswith('10.') else 1)
        if fp16_graphs:
            assert parent == hashlib.sha256(fp16_graphs[0].read_bytes()).hexdigest()
        for image in images.values():
            assert_same_detections(u8.process(image, 'bgr8', PARAMS),
                                   fp16.process(image, 'bgr8', PARAMS), at_least=2)
    finally:
        fp16.close()


def test_an_fp16_engine_is_measured_against_the_fp32_engine(monkeypatch, fake_gpu, manifest,
                                                            model_dir, tmp_path):
    """The precision check on TensorRT: an fp32 engine is built beside the fp16 one, both run
    the validation set, and the agreement is logged and kept for the next configure."""
    from vision_nodes.artifacts.validation import MIN_VALIDATION_IMAGES, package_images

    if len(package_images()) < MIN_VALIDATION_IMAGES:
        pytest.skip('no default validation set here (requirements/validation.txt)')
    trt = make_fake_tensorrt(fake_gpu, '10.13.2.6')
    monkeypatch.setitem(sys.modules, 'tensorrt', trt)
    lines: list[str] = []
    single = replace(manifest, max_batch=1)
    fp16 = build_pipeline(single, 'tensorrt', model_dir=str(model_dir), precision='fp16',
                          cache_dir=tmp_path, log=lines.append)
    try:
        check = fp16.precision_check
        assert check.compute_type == 'fp16' and check.agreement is not None
        assert check.agreement.measure == 'box mAP50-95' and check.agreement.images >= 10
        # Two engines: fp16 and its fp32 twin.
        assert sorted('FP16' in b['flags'] for b in trt.built) == [False, True]
        assert any(line.startswith('precision fp16: ') for line in lines)
    finally:
        fp16.close()
    again = build_pipeline(single, 'tensorrt', model_dir=str(model_dir), precision='fp16',
                           cache_dir=tmp_path)
    try:
        assert again.precision_check.cached and again.precision_check.agreement == \
            check.agreement
    finally:
        again.close()


#: The manifest fields of the tiny detector (test/tiny_onnx.py) served by TensorRT.
TINY = {'name': 'tiny', 'backends': ['onnx', 'tensorrt']}


def test_int8_calibrates_on_the_u8_images_the_engine_takes(fake_trt, tiny_onnx, assets,
                                                           tmp_path):
    """int8 on the u8 graph: the calibrator feeds each image as the task hands it to this
    engine (the letterboxed u8 NHWC image), the pre-processing running inside."""
    images = tmp_path / 'calibration'
    images.mkdir()
    for name in IMAGES:
        shutil.copy(assets / name, images / name)
    manifest = model_manifest(TINY, weights=tiny_onnx)
    config = RunnerConfig(manifest=manifest, weights=tiny_onnx, backend='tensorrt',
                          cache=ArtifactCache(tmp_path / 'cache'), precision='int8',
                          calibration_dir=str(images))
    runner = create_runner(config, u8_input=True)
    try:
        assert runner.supports_u8_input
        assert sorted(c['flag'] for c in _calls(fake_trt, 'set_flag')) == ['FP16', 'INT8']
        task = create_task(manifest)
        task.u8_input = True
        batches = fake_trt.calibration_batches
        assert len(batches) == 2
        for name, batch in zip(IMAGES, batches):
            expected, _ = task.preprocess(cv2.imread(str(images / name)), 'bgr8', (640, 640))
            assert batch.dtype == np.uint8 and batch.shape == (1, 640, 640, 3)
            np.testing.assert_array_equal(batch, expected)
    finally:
        runner.unload()


def test_a_model_that_cannot_take_the_u8_image_runs_on_the_float_tensor(
        fake_trt, tiny_onnx, tmp_path):
    """Weights in external files: a float engine, the task's float tensor, one log line.
    A 1-channel input: the same line (then TensorRT refuses the 3-channel profile)."""
    onnx = pytest.importorskip('onnx')
    folder = tmp_path / 'external'
    folder.mkdir()
    onnx.save(onnx.load(str(tiny_onnx)), str(folder / 'tiny.onnx'), save_as_external_data=True,
              all_tensors_to_one_file=True, location='tiny.weights', size_threshold=0)
    log: list[str] = []
    model = build_pipeline(model_manifest(TINY, weights=folder / 'tiny.onnx'), 'tensorrt',
                           cache_dir=tmp_path / 'cache', log=log.append)
    try:
        assert "'tiny' takes the host's float tensor, not the u8 image: it keeps its weights " \
            'in external files' in log
        assert not model.runner.takes_u8 and not model.task.u8_input
        name = model.runner._io.input_name
        assert model.runner._engine.get_tensor_dtype(name) == fake_trt.DataType.FLOAT
        assert 'embedded_preprocessing' not in _fields(model.runner)
        model.process(np.zeros((360, 640, 3), np.uint8), 'bgr8', PARAMS)
        assert _calls(fake_trt, 'set_input_shape')[-1]['shape'] == (1, 3, 384, 640)
    finally:
        model.close()
    gray = tiny_detector(tmp_path / 'gray.onnx', channels=1)
    log.clear()
    manifest = model_manifest(TINY, name='gray', weights=gray)
    with pytest.raises(RunnerError, match='TensorRT failed to build the engine'):
        build_pipeline(manifest, 'tensorrt', cache_dir=tmp_path / 'cache', log=log.append)
    assert "'gray' takes the host's float tensor, not the u8 image: its input has 1 " \
        'channels' in log
    assert _calls(fake_trt, 'parse')[-1]['sha256'] == hashlib.sha256(
        gray.read_bytes()).hexdigest()
