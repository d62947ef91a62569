"""The TensorRT runner and the GPU facts, against fakes of TensorRT and the CUDA runtime.

TensorRT and an NVIDIA GPU cannot exist on the machines these tests run on, so the runner is
exercised against ``fake_tensorrt`` (TensorRT 10.x's and 11.x's Python API, recording every
call, its "engine" running the ONNX with ONNX Runtime) and a fake cuda-python runtime (host
memory behind fake device addresses). Everything else is real: the ONNX export, the engine
cache, the task's preprocessing for calibration, the fp16 conversion. The tests that need
neither fake check that this machine, which has no TensorRT, refuses the backend with its
reason.

The fake is kept from drifting by ``test_fake_follows_the_real_bindings``: every public name
and enum value of the fake, and every ``trt.X.Y`` the runner's code names, is checked against
``test/data/tensorrt_api.json``. That list was made by ``scripts/tensorrt_api_names.py`` from
the real ``tensorrt-cu12-bindings`` wheels (10.3.0, JetPack 6's TensorRT; 10.16.1.11;
11.4.0.106), imported with empty stand-ins for the TensorRT libraries they link to, names read
with ``dir()`` and enum values from ``__members__``; the script's docstring says how to
refresh it. Nothing is downloaded by the tests.
"""

from __future__ import annotations

import ast
import gc
import json
import shutil
import sys
import threading
import types
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from fake_tensorrt import FAKE_ONLY, make_fake_cudart, make_fake_tensorrt
from hostile_files import png_header
from model_manifests import model_manifest
from vision_nodes.artifacts import tensorrt_build, tensorrt_calibrator
from vision_nodes.artifacts.calibration import calibration_set
from vision_nodes.artifacts.chain import ArtifactChain
from vision_nodes.artifacts.cache import ArtifactCache, CacheError, file_sha256
from vision_nodes.artifacts.onnx_export import ONNX_FILE, ensure_onnx
from vision_nodes.artifacts.onnx_fp16 import FP16_ONNX_FILE
from vision_nodes.pipeline import (LoadedModel, build_pipeline, create_runner,
                                   build_pipelines, calibration_preprocessor)
from vision_nodes.platform import cuda
from vision_nodes.runners.base import RunnerConfig, RunnerError
from vision_nodes.runners import tensorrt_io, tensorrt_plan, tensorrt_runner
from vision_nodes.runners.tensorrt_runner import TensorRTRunner
from vision_nodes.tasks import create_task, resolve_manifest
from vision_nodes.tasks.detect import DetectionParams

ort = pytest.importorskip('onnxruntime', reason='ONNX Runtime runs the fake engines')

GPU_A = {'name': 'NVIDIA Fake RTX 4090', 'cc': (8, 9), 'memory': 24 << 30}
GPU_B = {'name': 'NVIDIA Fake A2000', 'cc': (8, 6), 'memory': 12 << 30}
#: What the real bindings register (see the module docstring for how it was made).
REAL_API = json.loads(
    (Path(__file__).resolve().parents[2] / 'data' / 'tensorrt_api.json').read_text())
#: The fake's versions, and the real versions each must match (10.3: JetPack 6).
FAKE_VERSIONS = {'10.13.0.35': ('10.3.0', '10.16.1.11'), '11.4.0.106': ('11.4.0.106',)}
#: The manifest fields of a detector served by TensorRT (640 x 640 unless a test says).
TRT = {'name': 'tiny', 'backends': ['onnx', 'tensorrt']}


def _real_tensorrt() -> bool:
    try:
        import tensorrt  # noqa: F401
    except Exception:  # noqa: BLE001
        return False
    return True


@pytest.fixture(scope='module')
def yolo_onnx(model_dir, engine_cache_dir) -> Path:
    """YOLOv8n exported to ONNX once, in the session's engine cache."""
    manifest = resolve_manifest('yolov8n')
    entry = ensure_onnx(manifest, manifest.weights_path(str(model_dir)),
                        ArtifactCache(engine_cache_dir))
    return entry.file(ONNX_FILE)


@pytest.fixture
def log() -> list[str]:
    return []


@pytest.fixture
def config(yolo_onnx, tmp_path, log) -> RunnerConfig:
    manifest = model_manifest(TRT, name='yolov8n_trt', weights=yolo_onnx)
    cache = ArtifactCache(tmp_path / 'cache')
    return RunnerConfig(manifest=manifest, weights=yolo_onnx, backend='tensorrt', cache=cache,
                        log=log.append)


@pytest.fixture
def tiny_config(tiny_onnx, tmp_path, log) -> RunnerConfig:
    """The small dynamic model at 640 x 640: fast where the network itself does not matter."""
    manifest = model_manifest(TRT, weights=tiny_onnx)
    cache = ArtifactCache(tmp_path / 'cache')
    return RunnerConfig(manifest=manifest, weights=tiny_onnx, backend='tensorrt', cache=cache,
                        log=log.append)


def _calls(trt, what: str) -> list[dict]:
    return [details for name, details in trt.calls if name == what]


def _reference(onnx_path: Path, tensor: np.ndarray) -> list[np.ndarray]:
    session = ort.InferenceSession(str(onnx_path), providers=['CPUExecutionProvider'])
    return session.run(None, {session.get_inputs()[0].name: np.ascontiguousarray(tensor)})


# -- this machine: no TensorRT, no GPU -------------------------------------------------------

def test_tensorrt_is_refused_here_with_its_reason(config):
    """Without TensorRT the backend is refused at once, naming what to install."""
    if _real_tensorrt():
        pytest.skip('TensorRT is installed here')
    reason = TensorRTRunner.unavailable_reason('tensorrt')
    assert reason and reason.startswith("TensorRT is not installed (pip install "
                                        "'vision_nodes[cuda12]' or 'vision_nodes[cuda13]'")
    with pytest.raises(RunnerError, match="backend 'tensorrt' is not available: TensorRT is "
                                          'not installed'):
        create_runner(config)


def test_auto_skips_tensorrt_cleanly(model_dir, engine_cache_dir):
    """backend auto logs why tensorrt was skipped and loads the next usable backend."""
    if _real_tensorrt():
        pytest.skip('TensorRT is installed here')
    manifest = replace(resolve_manifest('yolov8n'),
                       backends=('tensorrt', 'cpu', 'cuda', 'rocm', 'onnx'))
    lines: list[str] = []
    pipeline = build_pipelines([manifest], 'auto', model_dir=str(model_dir),
                               cache_dir=engine_cache_dir, log=lines.append)
    try:
        assert pipeline.backend == 'onnx'
        assert lines[0].startswith("backend auto: skipping 'tensorrt': TensorRT is not "
                                   'installed')
        assert lines[-1] == "backend auto: chose 'onnx'"
    finally:
        pipeline.close()


def test_no_gpu_is_a_clear_reason(monkeypatch, config):
    """TensorRT present but no GPU (real cuda-python here, no driver): a clear refusal."""
    if cuda.device_count(('cuda-python',))[0]:
        pytest.skip('cuda-python sees a GPU here')
    trt = make_fake_tensorrt(make_fake_cudart())
    monkeypatch.setitem(sys.modules, 'tensorrt', trt)
    reason = TensorRTRunner.unavailable_reason('tensorrt')
    assert reason.startswith('no NVIDIA GPU is visible (')
    with pytest.raises(RunnerError, match="'tensorrt' is not available: no NVIDIA GPU"):
        create_runner(config)
    # The same through a fake runtime that reports no device.
    monkeypatch.setitem(sys.modules, 'cuda.bindings.runtime', make_fake_cudart([]))
    assert 'cudaErrorNoDevice' in TensorRTRunner.unavailable_reason('tensorrt')
    assert trt.calls == []


def test_old_tensorrt_or_missing_cuda_python_are_refused(monkeypatch, fake_gpu):
    """TensorRT before 10 and a missing cuda-python each name the fix."""
    monkeypatch.setitem(sys.modules, 'tensorrt', make_fake_tensorrt(fake_gpu, '8.6.1'))
    assert TensorRTRunner.unavailable_reason('tensorrt') == (
        'TensorRT 8.6.1 is too old: this runner needs TensorRT 10 or newer')
    monkeypatch.setitem(sys.modules, 'tensorrt', make_fake_tensorrt(fake_gpu))
    assert TensorRTRunner.unavailable_reason('tensorrt') is None
    monkeypatch.setitem(sys.modules, 'cuda.bindings.runtime', None)
    monkeypatch.setitem(sys.modules, 'cuda.cudart', None)
    assert TensorRTRunner.unavailable_reason('tensorrt').startswith(
        "cuda-python is not installed (pip install 'cuda-python<13' for CUDA 12")


# -- build, cache, load, run, release ---------------------------------------------------------

def test_build_on_miss_load_on_hit_and_release(fake_trt, fake_gpu, config, log, yolo_onnx):
    """A miss builds from the ONNX and caches; a hit loads the verified bytes; unload frees."""
    runner = create_runner(config)
    # The export has dynamic height and width: the engine's profile covers rect shapes.
    assert runner.cache_hit is False and runner.dynamic_shapes is True
    assert runner.engine_path.name == 'yolov8n_trt_fp32.engine'
    assert len(_calls(fake_trt, 'Builder')) == 1
    assert _calls(fake_trt, 'set_flag') == []
    built = fake_trt.built[0]
    assert built['onnx_sha256'] == file_sha256(yolo_onnx)
    assert built['profile'] == [[1, 3, 32, 32], [1, 3, 640, 640], [1, 3, 640, 640]]
    assert not any('fixed at 640x640' in line for line in log)
    assert any(line.startswith("building a TensorRT 10.13.0.35 fp32 engine for 'yolov8n_trt' "
                               'on NVIDIA Fake RTX 4090 (sm 8.9)') for line in log)
    assert 'TensorRT build: Building engine (2 steps)' in log
    assert any(line.startswith('TensorRT build: Building engine done in') for line in log)
    entry = json.loads((runner.engine_path.parent / 'entry.json').read_text())
    recorded = entry['files'][runner.engine_path.name]['sha256']
    assert _calls(fake_trt, 'deserialize_cuda_engine')[-1]['sha256'] == recorded
    assert entry['fields']['gpu'] == 'NVIDIA Fake RTX 4090'
    assert entry['fields']['compute_capability'] == '8.9'
    assert entry['fields']['tensorrt'] == '10.13.0.35'

    tensor = np.random.default_rng(1).random((1, 3, 640, 640), dtype=np.float32)
    out = runner.infer(tensor)
    np.testing.assert_allclose(out[0], _reference(yolo_onnx, tensor)[0], rtol=1e-5, atol=1e-4)
    info = runner.describe()
    assert info['gpu']['name'] == 'NVIDIA Fake RTX 4090' and info['tensorrt'] == '10.13.0.35'
    assert info['gpu']['memory_used'] > 1 << 30 and info['input_shape'] == [1, 3, 640, 640]

    assert fake_gpu.state.memory and fake_gpu.state.streams
    runner.unload()
    assert fake_gpu.state.memory == {} and not fake_gpu.state.streams
    assert runner._io is None and runner._engine is None and runner._runtime is None
    with pytest.raises(RunnerError, match='not loaded'):
        runner.infer(tensor)

    again = create_runner(config)
    try:
        assert again.cache_hit is True
        assert len(_calls(fake_trt, 'Builder')) == 1  # loaded, not rebuilt
        np.testing.assert_array_equal(again.infer(tensor)[0], out[0])
    finally:
        again.unload()


def test_pipeline_detects_through_the_engine(fake_trt, model_dir, bus_bgr, engine_cache_dir):
    """The Ultralytics manifest (ONNX exported through the cache) gives ONNX's detections."""
    manifest = replace(resolve_manifest('yolov8n'), backends=('onnx', 'tensorrt'))
    params = DetectionParams()
    results, labels = {}, {}
    for backend in ('tensorrt', 'onnx'):
        pipeline = build_pipeline(manifest, backend, model_dir=str(model_dir),
                                  cache_dir=engine_cache_dir)
        try:
            results[backend] = pipeline.process(bus_bgr, 'bgr8', params)
            labels[backend] = pipeline.labels
        finally:
            pipeline.close()
    trt_dets, onnx_dets = results['tensorrt'], results['onnx']
    assert len(trt_dets) >= 4 and labels['tensorrt'] == labels['onnx']
    assert labels['tensorrt'][:2] == ['person', 'bicycle']
    np.testing.assert_array_equal(trt_dets.class_ids, onnx_dets.class_ids)
    np.testing.assert_allclose(trt_dets.boxes, onnx_dets.boxes, atol=1e-3)


def test_noncontiguous_input_is_copied_contiguously(fake_trt, tiny_onnx, tmp_path):
    """A strided view reaches the GPU as its values, not as the raw memory behind it."""
    manifest = model_manifest(TRT, weights=tiny_onnx, input_size=[64, 128])
    runner = create_runner(RunnerConfig(manifest=manifest, weights=tiny_onnx,
                                        backend='tensorrt', cache=ArtifactCache(tmp_path)))
    try:
        big = np.random.default_rng(2).random((1, 3, 64, 256), dtype=np.float32)
        view = big[..., ::2]
        assert not view.flags.c_contiguous
        np.testing.assert_allclose(runner.infer(view)[0], _reference(tiny_onnx, view)[0],
                                   rtol=1e-5)
    finally:
        runner.unload()


def test_key_changes_with_gpu_and_tensorrt_version(monkeypatch, fake_trt, fake_gpu,
                                                   tiny_config, log):
    """Another GPU model, compute capability or TensorRT version builds its own engine."""
    def load(cfg=tiny_config):
        runner = create_runner(cfg)
        hit, folder = runner.cache_hit, runner.engine_path.parent
        runner.unload()
        return hit, folder

    first_hit, first = load()
    assert first_hit is False
    assert load() == (True, first)
    fake_gpu.state.gpus[0] = dict(GPU_A, name='NVIDIA Fake RTX 5090')
    hit, renamed = load()
    assert hit is False and renamed != first
    fake_gpu.state.gpus[0] = dict(GPU_A, cc=(9, 0))
    hit, newer_sm = load()
    assert hit is False and newer_sm not in (first, renamed)
    fake_gpu.state.gpus[0] = dict(GPU_A)
    assert load() == (True, first)
    monkeypatch.setitem(sys.modules, 'tensorrt', make_fake_tensorrt(fake_gpu, '10.14.1.48'))
    hit, upgraded = load()
    assert hit is False and upgraded not in (first, renamed, newer_sm)
    fields = json.loads((upgraded / 'entry.json').read_text())['fields']
    assert fields['tensorrt'] == '10.14.1.48'
    # No engine was ever offered to a GPU or TensorRT it was not built for.
    assert not any('another TensorRT or GPU' in line for line in log)


def test_corrupt_engine_is_rebuilt(fake_trt, tiny_config):
    """An engine file that no longer matches its recorded hash is rebuilt, not loaded."""
    runner = create_runner(tiny_config)
    path = runner.engine_path
    runner.unload()
    path.write_bytes(path.read_bytes()[:-10] + b'0123456789')
    again = create_runner(tiny_config)
    try:
        assert again.cache_hit is False and len(fake_trt.built) == 2
    finally:
        again.unload()


def test_a_manifest_copy_loads_the_engine_its_first_name_built(fake_trt, tiny_config):
    """The same ONNX under another manifest name: the engine built for 'tiny' is loaded (no
    second build), found through the entry's listing though its file carries 'tiny'."""
    first = create_runner(tiny_config)
    path = first.engine_path
    first.unload()
    copy = replace(tiny_config, manifest=replace(tiny_config.manifest, name='tiny_copy'))
    again = create_runner(copy)
    try:
        assert again.cache_hit is True and len(fake_trt.built) == 1
        assert again.engine_path == path and path.name == 'tiny_fp32.engine'
        tensor = np.random.default_rng(2).random((1, 3, 640, 640), dtype=np.float32)
        np.testing.assert_allclose(again.infer(tensor)[0],
                                   _reference(tiny_config.weights, tensor)[0],
                                   rtol=1e-5, atol=1e-4)
    finally:
        again.unload()


def test_another_names_entry_without_one_engine_is_passed_over(tmp_path):
    """engine_name reads the entry's listing: this model's engine, else the one engine of
    another name's entry; none or two is a one-line CacheError. ensure_engine passes such an
    entry over and builds this name's own."""
    cache = ArtifactCache(tmp_path)
    fields = {'precision': 'fp16', 'onnx_sha256': '0' * 64}
    for count in (0, 2):
        def write(folder, count=count):
            (folder / tensorrt_build.BUILD_FACTS).write_text('{}')
            for i in range(count):
                (folder / f'm{i}_fp16.engine').write_bytes(b'x')
        entry = cache.get_or_build(f'm{count}', 'tensorrt', {**fields, 'n': count}, write,
                                   files=(tensorrt_build.BUILD_FACTS,))
        with pytest.raises(CacheError, match=f'lists {count} engine files, not one') as info:
            tensorrt_build.engine_name(entry, 'other', 'fp16')
        assert '\n' not in str(info.value)
    assert tensorrt_build.engine_name(entry, 'm1', 'fp16') == 'm1_fp16.engine'

    def no_engine(folder):
        (folder / tensorrt_build.BUILD_FACTS).write_text('{}')
    cache.get_or_build('first', 'tensorrt', fields, no_engine,
                       files=(tensorrt_build.BUILD_FACTS,))  # the key ensure_engine looks up
    builds = []

    def build():
        builds.append(1)
        return b'engine', {'labels': None}
    entry = tensorrt_build.ensure_engine(cache, 'copy', fields, build)
    assert builds == [1] and entry.path.name.startswith('copy-tensorrt-')
    assert tensorrt_build.engine_name(entry, 'copy', 'fp16') == 'copy_fp16.engine'
    assert entry.read_verified('copy_fp16.engine') == b'engine'


def test_fp16_sets_the_builder_flag(fake_trt, tiny_config):
    """fp16 on TensorRT 10 is the builder's FP16 flag on the fp32 ONNX (TF32 stays on)."""
    runner = create_runner(replace(tiny_config, precision='fp16'))
    try:
        assert [c['flag'] for c in _calls(fake_trt, 'set_flag')] == ['FP16']
        assert _calls(fake_trt, 'clear_flag') == []
        assert fake_trt.built[0]['flags'] == ['FP16', 'TF32']
        assert runner.engine_path.name == 'tiny_fp16.engine'
        assert _calls(fake_trt, 'create_network')[0]['flags'] == 0
    finally:
        runner.unload()


def test_int8_calibrates_on_task_preprocessed_images(fake_trt, tiny_config, assets, tmp_path,
                                                     log):
    """int8: INT8 (+FP16) flags, the entropy calibrator fed each image as the task makes it."""
    images = tmp_path / 'calibration'
    images.mkdir()
    for name in ('bus.jpg', 'zidane.jpg'):
        shutil.copy(assets / name, images / name)
    (images / 'notes.txt').write_text('not an image')
    cfg = replace(tiny_config, precision='int8', calibration_dir=str(images))
    runner = create_runner(cfg)
    try:
        assert sorted(c['flag'] for c in _calls(fake_trt, 'set_flag')) == ['FP16', 'INT8']
        assert len(_calls(fake_trt, 'int8_calibrator')) == 1
        import cv2

        task = create_task(cfg.manifest)
        batches = fake_trt.calibration_batches
        assert len(batches) == 2
        for name, batch in zip(('bus.jpg', 'zidane.jpg'), batches):
            expected, _ = task.preprocess(cv2.imread(str(images / name)), 'bgr8', (640, 640))
            np.testing.assert_array_equal(batch, expected)
        folder = runner.engine_path.parent
        assert (folder / 'calibration.cache').read_bytes() == b'fake calibration table'
        assert json.loads((folder / 'build.json').read_text())['calibration_images'] == 2
        assert 'TensorRT int8 calibration: image 2/2' in log
        first = folder
    finally:
        runner.unload()
    # Other calibration images make another engine.
    shutil.copy(assets / 'bus.jpg', images / 'bus2.jpg')
    runner = create_runner(cfg)
    try:
        assert runner.cache_hit is False and runner.engine_path.parent != first
        assert len(fake_trt.calibration_batches) == 5
    finally:
        runner.unload()


def test_int8_without_calibration_images_is_refused(fake_trt, tiny_config, tmp_path):
    """int8 needs a folder of images; each problem names the parameter and the fix."""
    config = tiny_config
    with pytest.raises(RunnerError, match="'int8' needs calibration images: set the "
                                          '`calibration_dir` parameter'):
        create_runner(replace(config, precision='int8'))
    with pytest.raises(RunnerError, match="calibration_dir '.*nowhere' is not a folder"):
        create_runner(replace(config, precision='int8',
                              calibration_dir=str(tmp_path / 'nowhere')))
    with pytest.raises(RunnerError, match='holds no images'):
        create_runner(replace(config, precision='int8', calibration_dir=str(tmp_path)))
    assert fake_trt.built == []
    (tmp_path / 'garbage.jpg').write_bytes(b'not a jpeg')
    with pytest.raises(RunnerError, match=r"holds no usable image: all 1 were skipped \(first: "
                                          r".*garbage\.jpg: compressed image data is neither"):
        create_runner(replace(config, precision='int8', calibration_dir=str(tmp_path)))
    (tmp_path / 'garbage.jpg').unlink()
    (tmp_path / 'broken.png').write_bytes(png_header(64, 48) + b'no image data')
    with pytest.raises(RunnerError, match=r"'tensorrt': int8 calibration failed: calibration "
                                          r"image '.*broken\.png' cannot be decoded"):
        create_runner(replace(config, precision='int8', calibration_dir=str(tmp_path)))


def _recording_chain(cache: ArtifactCache, log, seen: list[np.ndarray]) -> ArtifactChain:
    """The pipeline's chain, keeping a copy of every calibration tensor it makes."""
    def preprocessor_for(manifest):
        real = calibration_preprocessor(manifest)

        def prepare(image, shape):
            tensor = real.prepare(image, shape)
            seen.append(np.array(tensor, copy=True))
            return tensor

        return replace(real, prepare=prepare)

    return ArtifactChain(cache, log, preprocessor_for=preprocessor_for)


def test_tensorrt_and_openvino_int8_calibrate_on_the_same_set(fake_trt, tiny_onnx, assets,
                                                              tmp_path, log):
    """One calibration_dir, one set: the same images (fingerprint and count) and the same
    preprocessed tensors reach TensorRT's calibrator and OpenVINO's NNCF quantizer."""
    pytest.importorskip('openvino', reason='OpenVINO is not installed')
    pytest.importorskip('nncf', reason='NNCF is not installed (int8 quantization)')
    images = tmp_path / 'calibration'
    images.mkdir()
    for name in ('bus.jpg', 'zidane.jpg'):
        shutil.copy(assets / name, images / name)
    (images / 'notes.txt').write_text('not an image')
    (images / 'huge.png').write_bytes(png_header(30000, 30000) + b'\0' * 64)
    # A fixed-shape model: both runtimes calibrate at input_size (TensorRT always does, at its
    # calibration profile's opt shape; OpenVINO does at rect shapes for rect models).
    manifest = model_manifest(TRT, weights=tiny_onnx, input_size=[320, 320], rect=False,
                              backends=['onnx', 'tensorrt', 'openvino'])
    cache = ArtifactCache(tmp_path / 'cache')
    fed: dict[str, list[np.ndarray]] = {'tensorrt': [], 'openvino': []}
    entries = {}
    for backend in ('tensorrt', 'openvino'):
        config = RunnerConfig(manifest=manifest, weights=tiny_onnx, backend=backend,
                              cache=cache, precision='int8', calibration_dir=str(images),
                              log=log.append)
        runner = create_runner(config, chain=_recording_chain(cache, log.append, fed[backend]))
        try:
            path = runner.engine_path if backend == 'tensorrt' else Path(runner.model_path)
            entries[backend] = json.loads((path.parent / 'entry.json').read_text())['fields']
        finally:
            runner.unload()
    listed = calibration_set(images)
    assert len(listed.images) == 2 and listed.skipped == 1
    assert entries['tensorrt']['calibration_sha256'] == listed.sha256
    assert entries['openvino']['calibration_sha256'] == listed.sha256
    assert entries['openvino']['calibration_images'] == 2
    assert len(fake_trt.calibration_batches) == 2
    built = json.loads((runner_folder(cache, 'tensorrt') / 'build.json').read_text())
    assert built['calibration_images'] == 2
    # NNCF may pass over the set more than once: its first pass is the set, in order.
    assert len(fed['tensorrt']) == 2 and len(fed['openvino']) >= 2
    for trt_batch, ours, ov_tensor in zip(fake_trt.calibration_batches, fed['tensorrt'],
                                          fed['openvino']):
        np.testing.assert_array_equal(trt_batch, ours)
        np.testing.assert_array_equal(ov_tensor, ours)
        assert ours.shape == (1, 3, 320, 320)


def runner_folder(cache: ArtifactCache, kind: str) -> Path:
    """The one entry of ``kind`` in ``cache`` (e.g. 'tensorrt')."""
    found = [d for d in cache.root.iterdir() if d.is_dir() and f'-{kind}-' in d.name]
    assert len(found) == 1, found
    return found[0]


def test_rect_calibration_uses_the_manifest_stride(tiny_onnx, assets):
    """Rect calibration tensors are shaped with the manifest's stride, as frames are."""
    bus = assets / 'bus.jpg'  # 1080 high, 810 wide: fits 640 x 640 as 640 x 480
    for stride, width in ((32, 480), (64, 512)):
        manifest = model_manifest(TRT, weights=tiny_onnx, stride=stride)
        tensor = calibration_preprocessor(manifest).tensor(bus, rect=True)
        assert tensor.shape == (1, 3, 640, width)


def test_int8_calibration_images_are_bounded_like_frames(fake_trt, tiny_config, assets,
                                                         tmp_path, log):
    """The calibrator shares OpenVINO's listing: an image beyond the frame bounds is skipped
    (one log line), never decoded; the others calibrate."""
    images = tmp_path / 'calibration'
    images.mkdir()
    shutil.copy(assets / 'bus.jpg', images / 'bus.jpg')
    (images / 'huge.png').write_bytes(png_header(30000, 30000) + b'\0' * 64)
    runner = create_runner(replace(tiny_config, precision='int8', calibration_dir=str(images)))
    try:
        assert len(fake_trt.calibration_batches) == 1
        skipped = [line for line in log if 'skipped' in line]
        assert len(skipped) == 1 and 'skipped 1 of 2 image files' in skipped[0]
        assert '30000x30000 exceeds the decode limit' in skipped[0]
    finally:
        runner.unload()


def test_tensorrt_11_builds_fp16_from_the_converted_graph(monkeypatch, fake_gpu, config):
    """Without the FP16 flag (TensorRT 11) fp16 parses the fp16 ONNX, strongly typed."""
    pytest.importorskip('onnx', reason='the fp16 conversion needs onnx')
    trt = make_fake_tensorrt(fake_gpu, '11.4.0.106')
    monkeypatch.setitem(sys.modules, 'tensorrt', trt)
    runner = create_runner(replace(config, precision='fp16'))
    try:
        assert _calls(trt, 'set_flag') == [] and _calls(trt, 'clear_flag') == []
        # Always strongly typed; its STRONGLY_TYPED flag (value 0 there) is deprecated.
        assert _calls(trt, 'create_network')[0]['flags'] == 0
        assert trt.built[0]['flags'] == ['TF32']
        fp16 = [p for p in config.cache.root.glob('yolov8n_trt-onnx-fp16-*/' + FP16_ONNX_FILE)]
        assert len(fp16) == 1
        assert _calls(trt, 'parse')[0]['sha256'] == file_sha256(fp16[0])
        fields = json.loads((runner.engine_path.parent / 'entry.json').read_text())['fields']
        assert fields['strongly_typed'] is True
    finally:
        runner.unload()
    with pytest.raises(RunnerError, match=r'TensorRT 11\.4\.0\.106 has no implicit int8 '
                                          'calibration'):
        create_runner(replace(config, precision='int8', calibration_dir='/tmp'))


def test_unparsable_onnx_is_a_clear_error(fake_trt, fake_gpu, tmp_path):
    """TensorRT's parser errors come back in one RunnerError; nothing is cached or leaked."""
    broken = tmp_path / 'broken.onnx'
    broken.write_bytes(b'not an onnx model')
    cache = ArtifactCache(tmp_path / 'cache')
    manifest = model_manifest(TRT, name='yolov8n_trt', weights=broken)
    with pytest.raises(RunnerError, match="'tensorrt': TensorRT cannot parse the ONNX model: "
                                          'ModelImporter'):
        create_runner(RunnerConfig(manifest=manifest, weights=broken, backend='tensorrt',
                                   cache=cache))
    assert not [p for p in cache.root.glob('*tensorrt*') if p.is_dir()]
    assert fake_gpu.state.memory == {} and not fake_gpu.state.streams


# -- rect inference: the optimisation profile -------------------------------------------------

def test_rect_profile_and_prepare_shape(fake_trt, tiny_onnx, tmp_path):
    """A dynamic ONNX gets a min/opt/max profile; prepare_shape sets the context's shape."""
    manifest = model_manifest(TRT, weights=tiny_onnx, input_size=[128, 128])
    runner = create_runner(RunnerConfig(manifest=manifest, weights=tiny_onnx,
                                        backend='tensorrt', cache=ArtifactCache(tmp_path)))
    try:
        profile = _calls(fake_trt, 'set_shape')[0]
        assert (profile['min'], profile['opt'], profile['max']) == (
            (1, 3, 32, 32), (1, 3, 128, 128), (1, 3, 128, 128))
        assert runner.dynamic_shapes is True
        model = LoadedModel(manifest, runner, create_task(manifest), [])
        image = np.zeros((360, 640, 3), np.uint8)
        assert model.input_shape(image.shape[:2]) == (96, 128)
        model.process(image, 'bgr8', DetectionParams(confidence=1.0))
        assert _calls(fake_trt, 'set_input_shape')[-1]['shape'] == (1, 3, 96, 128)
        tensor = np.random.default_rng(3).random((1, 3, 96, 128), dtype=np.float32)
        out = runner.infer(tensor)[0]
        assert out.shape == (1, 84, 12 * 16)
        np.testing.assert_allclose(out, _reference(tiny_onnx, tensor)[0], rtol=1e-5)
        with pytest.raises(RunnerError, match='outside the optimisation profile'):
            runner.prepare_shape((160, 128))
    finally:
        runner.unload()


def test_fixed_shape_engine_when_rect_is_off(fake_trt, tiny_onnx, tmp_path):
    """rect: false builds min = opt = max and refuses other shapes clearly."""
    manifest = model_manifest(TRT, weights=tiny_onnx, input_size=[128, 128], rect=False)
    runner = create_runner(RunnerConfig(manifest=manifest, weights=tiny_onnx,
                                        backend='tensorrt', cache=ArtifactCache(tmp_path)))
    try:
        profile = _calls(fake_trt, 'set_shape')[0]
        assert profile['min'] == profile['opt'] == profile['max'] == (1, 3, 128, 128)
        assert runner.dynamic_shapes is False
        with pytest.raises(RunnerError, match=r'only takes input shape \(128, 128\)'):
            runner.prepare_shape((96, 128))
    finally:
        runner.unload()


# -- devices and GPU facts -------------------------------------------------------------------

def test_device_selects_the_gpu(fake_trt, fake_gpu, tiny_config):
    """device 'cuda:1' builds and runs on the second GPU; bad devices are refused clearly."""
    config = tiny_config
    fake_gpu.state.gpus.append(dict(GPU_B))
    runner = create_runner(replace(config, device='cuda:1'))
    try:
        assert ('cudaSetDevice', 1) in fake_gpu.state.calls
        # Frames may arrive on another thread: the GPU is made current there first.
        before = fake_gpu.state.calls.count(('cudaSetDevice', 1))
        worker = threading.Thread(target=runner.infer,
                                  args=(np.zeros((1, 3, 640, 640), np.float32),))
        worker.start()
        worker.join()
        assert fake_gpu.state.calls.count(('cudaSetDevice', 1)) == before + 1
        assert fake_trt.built[0]['gpu'] == 'NVIDIA Fake A2000'
        assert runner.describe()['device'] == 'cuda:1'
        assert runner.describe()['gpu']['compute_capability'] == '8.6'
    finally:
        runner.unload()
    with pytest.raises(RunnerError, match=r'GPU 3 does not exist \(2 GPU\(s\) visible\)'):
        create_runner(replace(config, device='3'))
    with pytest.raises(RunnerError, match="parameter device 'cpu': backend 'tensorrt' cannot "
                                          r"use it; it takes '' \(the default\) or a GPU"):
        create_runner(replace(config, device='cpu'))


def test_auto_precision_follows_the_gpu(fake_trt, fake_gpu, tiny_config):
    """precision auto: fp16 with tensor cores (sm 7.0+), else fp32."""
    config = tiny_config
    assert tensorrt_plan.auto_precision(config) == 'fp16'
    fake_gpu.state.gpus[0] = dict(GPU_A, cc=(6, 1))
    assert tensorrt_plan.auto_precision(config) == 'fp32'


def test_gpu_facts_here_and_from_cuda_python(monkeypatch):
    """No GPU here: None and a reason. Through cuda-python: name, sm, memory of a device."""
    if cuda.gpu_info(0) is None:
        assert cuda.gpu_unavailable_reason(0).startswith('no NVIDIA GPU is visible')
    rt = make_fake_cudart([dict(GPU_A), dict(GPU_B)])
    monkeypatch.setitem(sys.modules, 'cuda.bindings.runtime', rt)
    info = cuda.gpu_info(1, ('cuda-python',))
    assert (info.index, info.name, info.compute_capability, info.sm) == (
        1, 'NVIDIA Fake A2000', (8, 6), '8.6')
    assert info.memory_total == 12 << 30 and info.memory_used == 1 << 30
    assert info.source == 'cuda-python' and rt.state.device == 0  # current device restored
    assert cuda.gpu_info(2, ('cuda-python',)) is None
    assert cuda.gpu_unavailable_reason(2, ('cuda-python',)) == (
        'GPU 2 does not exist (2 GPU(s) visible)')


def test_gpu_facts_prefer_torch_when_it_sees_the_gpu(monkeypatch):
    """torch.cuda answers first by default (a faked GPU: this machine has none)."""
    torch = pytest.importorskip('torch')
    props = types.SimpleNamespace(name='NVIDIA Fake H100', major=9, minor=0,
                                  total_memory=80 << 30)
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    monkeypatch.setattr(torch.cuda, 'device_count', lambda: 1)
    monkeypatch.setattr(torch.cuda, 'get_device_properties', lambda index: props)
    monkeypatch.setattr(torch.cuda, 'mem_get_info', lambda index: (70 << 30, 80 << 30))
    info = cuda.gpu_info(0)
    assert info.as_dict() == {'index': 0, 'name': 'NVIDIA Fake H100',
                              'compute_capability': '9.0', 'memory_total': 80 << 30,
                              'memory_used': 10 << 30, 'source': 'torch'}
    assert cuda.gpu_unavailable_reason(0) is None


# -- what real installs need: logger, external weights, precision honesty, build settings ----

def test_one_logger_for_every_runner(fake_trt, tiny_onnx, tmp_path):
    """TensorRT keeps the first logger of the process: each runner's messages still reach
    its own log, and the logger outlives the runner that created it."""
    logs: dict[str, list[str]] = {'a': [], 'b': []}
    cache = ArtifactCache(tmp_path / 'cache')

    def load(name, size):  # each size its own engine: both runners build
        manifest = model_manifest(TRT, name=name, weights=tiny_onnx, input_size=list(size))
        return create_runner(RunnerConfig(manifest=manifest, weights=tiny_onnx,
                                          backend='tensorrt', cache=cache,
                                          log=logs[name].append))

    load('a', (64, 64)).unload()
    gc.collect()  # a logger owned by runner 'a' would be freed here
    runner = load('b', (96, 96))
    runner.unload()
    warning = 'TensorRT warning: fake build of images: no kernels are timed'
    assert logs['a'].count(warning) == 1 and logs['b'].count(warning) == 1
    assert not any('informational' in line for line in logs['a'] + logs['b'])
    assert len(fake_trt.loggers) == 1  # every Builder and Runtime got the same one
    # Messages on a thread with no runner's log go to Python's logging.
    assert tensorrt_build.tensorrt_logger(fake_trt) is fake_trt.loggers[0]


def test_external_weights_are_found_beside_the_model(fake_trt, tiny_onnx, tmp_path,
                                                     monkeypatch):
    """An .onnx with external data is parsed with its path, from any working directory;
    the weight files are part of the engine's key."""
    onnx = pytest.importorskip('onnx', reason='onnx writes the external data')
    model_dir = tmp_path / 'model'
    model_dir.mkdir()
    model = onnx.load(str(tiny_onnx))
    onnx.save(model, str(model_dir / 'tiny.onnx'), save_as_external_data=True,
              all_tensors_to_one_file=True, location='tiny.weights', size_threshold=0)
    assert (model_dir / 'tiny.weights').is_file()
    elsewhere = tmp_path / 'elsewhere'
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    weights = model_dir / 'tiny.onnx'
    config = RunnerConfig(manifest=model_manifest(TRT, weights=weights, input_size=[64, 64]),
                          weights=weights, backend='tensorrt',
                          cache=ArtifactCache(tmp_path / 'cache'))
    runner = create_runner(config)
    try:
        assert _calls(fake_trt, 'parse')[0]['path'] == str(weights)
        tensor = np.random.default_rng(4).random((1, 3, 64, 64), dtype=np.float32)
        np.testing.assert_allclose(runner.infer(tensor)[0], _reference(tiny_onnx, tensor)[0],
                                   rtol=1e-5)
        fields = json.loads((runner.engine_path.parent / 'entry.json').read_text())['fields']
        assert len(fields['external_data_sha256']) == 64
    finally:
        runner.unload()
    data = (model_dir / 'tiny.weights').read_bytes()
    (model_dir / 'tiny.weights').write_bytes(bytes(4) + data[4:])  # another weight
    again = create_runner(config)
    try:
        assert again.cache_hit is False  # not the engine of the old weights
    finally:
        again.unload()
    (model_dir / 'tiny.weights').unlink()
    with pytest.raises(RunnerError, match=r"external data file '.*tiny\.weights' is missing"):
        create_runner(config)


def test_fp32_is_exact_fp32_and_the_workspace_is_bounded(fake_trt, fake_gpu, tiny_config):
    """fp32 clears TF32 (on by default in TensorRT); every build sets a workspace limit that
    is part of the key: a quarter of the GPU's memory, at most 4 GiB."""
    runner = create_runner(tiny_config)
    try:
        assert [c['flag'] for c in _calls(fake_trt, 'clear_flag')] == ['TF32']
        assert fake_trt.built[0]['flags'] == []
        assert _calls(fake_trt, 'set_memory_pool_limit') == [
            {'pool': 'WORKSPACE', 'size': 4 << 30}]
        facts = json.loads((runner.engine_path.parent / 'build.json').read_text())
        assert facts['tf32'] is False and facts['workspace_bytes'] == 4 << 30
        first = runner.engine_path.parent
    finally:
        runner.unload()
    fake_gpu.state.gpus[0] = dict(GPU_A, memory=8 << 30)  # e.g. a Jetson Orin Nano
    runner = create_runner(tiny_config)
    try:
        assert fake_trt.built[-1]['workspace'] == 2 << 30
        fields = json.loads((runner.engine_path.parent / 'entry.json').read_text())['fields']
        assert fields['workspace_bytes'] == 2 << 30 and runner.engine_path.parent != first
    finally:
        runner.unload()


def test_timing_cache_is_kept_per_gpu_and_version(fake_trt, fake_gpu, tiny_config, log):
    """Builds share one timing cache per GPU model and TensorRT version in the cache folder;
    a damaged one is replaced, never fatal."""
    for precision in ('fp32', 'fp16'):
        create_runner(replace(tiny_config, precision=precision)).unload()
    assert [b['timing_cache_builds'] for b in fake_trt.built] == [0, 1]
    folder = tiny_config.cache.root / tensorrt_build.TIMING_CACHE_DIR
    files = sorted(p.name for p in folder.iterdir())
    assert files == ['NVIDIA_Fake_RTX_4090-sm8.9-trt10.13.0.35.cache']
    fake_gpu.state.gpus[0] = dict(GPU_B)
    create_runner(tiny_config).unload()
    assert fake_trt.built[-1]['timing_cache_builds'] == 0  # another GPU: its own cache
    assert len(list(folder.iterdir())) == 2
    path = folder / files[0]
    path.write_bytes(b'garbage')
    fake_gpu.state.gpus[0] = dict(GPU_A)
    other = model_manifest(TRT, name='tiny2', weights=tiny_config.weights,
                           input_size=[608, 608])  # a build, not a hit
    create_runner(replace(tiny_config, manifest=other)).unload()
    assert any('does not fit this GPU or TensorRT version: starting empty' in line
               for line in log)
    assert json.loads(path.read_bytes())['builds'] == 1  # rewritten, valid again


def test_frames_are_copied_through_pinned_memory(fake_trt, fake_gpu, tiny_config):
    """Every per-frame copy has pinned host memory on its host side; cleanup frees it."""
    runner = create_runner(tiny_config)
    try:
        fake_gpu.state.copies.clear()
        tensor = np.random.default_rng(5).random((1, 3, 640, 640), dtype=np.float32)
        first = runner.infer(tensor)[0]
        second = runner.infer(tensor * 0.5)[0]
        assert len(fake_gpu.state.copies) == 4
        assert all(c['pinned'] for c in fake_gpu.state.copies)
        assert not np.array_equal(first, second)  # results are copies, not the buffer
        assert fake_gpu.state.pinned
    finally:
        runner.unload()
    assert fake_gpu.state.pinned == {}


def test_fake_follows_the_real_bindings():
    """Every public name and enum value of the fake exists in the real bindings it imitates,
    and every ``trt.X.Y`` the runner's code names exists in a supported TensorRT."""
    versions = REAL_API['versions']
    assert set(versions) == {'10.3.0', '10.16.1.11', '11.4.0.106'}
    for fake_version, references in FAKE_VERSIONS.items():
        trt = make_fake_tensorrt(make_fake_cudart(), fake_version)
        for ref in references:
            real = versions[ref]
            fake_names = {n for n in vars(trt) if not n.startswith('_')} - set(FAKE_ONLY)
            assert fake_names <= set(real['module']), (ref, fake_names - set(real['module']))
            for name, kind in _fake_enums(trt).items():
                assert {m.name: int(m) for m in kind} == {
                    k: v for k, v in real['enums'][name].items() if k in kind.__members__}, \
                    (ref, name)
                assert set(kind.__members__) <= set(real['enums'][name]), (ref, name)
            for name, members in _fake_members(trt).items():
                missing = members - set(real['classes'][name])
                assert not missing, (ref, name, missing)
    _check_runner_names(versions)


def _fake_enums(trt) -> dict:
    names = ('NetworkDefinitionCreationFlag', 'BuilderFlag', 'MemoryPoolType', 'TensorIOMode',
             'DataType')
    found = {n: getattr(trt, n) for n in names}
    found['ILogger.Severity'] = trt.ILogger.Severity
    return found


def _fake_members(trt) -> dict[str, set[str]]:
    """Public members of each fake class, including those its instances set."""
    network = trt.INetworkDefinition(0)
    instances = {'ITensor': trt.ITensor('x', (1,)), 'INetworkDefinition': network,
                 'IBuilderConfig': trt.IBuilderConfig(),
                 'IOptimizationProfile': trt.IOptimizationProfile(),
                 'OnnxParser': trt.OnnxParser(network, None)}
    members = {}
    for name in REAL_API['versions']['10.3.0']['classes']:
        cls = getattr(trt, name, None)
        if cls is None or name in ('ILogger', 'IHostMemory'):
            continue
        found = {n for n in dir(cls) if not n.startswith('_')}
        if name in instances:
            found |= {n for n in vars(instances[name]) if not n.startswith('_')}
        members[name] = found
    members['ILogger'] = {n for n in dir(trt.ILogger) if not n.startswith('_')} - {'Severity'}
    return members


def _check_runner_names(versions: dict) -> None:
    """``trt.X`` and ``trt.X.Y`` in the runner's code, and the methods its subclasses of
    TensorRT's interfaces override, exist in at least one supported real version."""
    module = set().union(*(v['module'] for v in versions.values()))
    nested: dict[str, set[str]] = {}
    for v in versions.values():
        for group in ('classes', 'enums'):
            for name, members in v[group].items():
                nested.setdefault(name, set()).update(members)
    for source in (tensorrt_runner, tensorrt_io, tensorrt_build, tensorrt_calibrator):
        tree = ast.parse(Path(source.__file__).read_text())
        for node in ast.walk(tree):
            chain = _trt_chain(node)
            if not chain:
                continue
            assert chain[0] in module or chain[0] == '__version__', chain
            if len(chain) > 1 and chain[0] in nested:
                inner = '.'.join(chain[:2]) if chain[1] == 'Severity' else chain[0]
                leaf = chain[2] if chain[1] == 'Severity' and len(chain) > 2 else chain[1]
                if leaf not in ('__init__', 'Severity'):
                    assert leaf in nested[inner], chain
    trt = make_fake_tensorrt(make_fake_cudart())
    ours = {'IProgressMonitor': tensorrt_build._progress_monitor(trt, print),
            'IInt8EntropyCalibrator2': tensorrt_calibrator.entropy_calibrator(
                trt, None, [], 0, np.float32, print),
            'ILogger': tensorrt_build._make_logger(trt)}
    helpers = {'close', 'batches', 'pointer', 'nbytes', 'done', 'table', 'error', 'steps',
               'started', 'last'}
    for name, obj in ours.items():
        overrides = {n for n in type(obj).__dict__ if not n.startswith('_')} - helpers
        assert overrides <= nested[name], (name, overrides - nested[name])


def _trt_chain(node) -> list[str]:
    """['X', 'Y'] for an expression ``trt.X.Y`` (outermost attribute only), else []."""
    if not isinstance(node, ast.Attribute):
        return []
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not (isinstance(node, ast.Name) and node.id == 'trt'):
        return []
    return parts[::-1]


# -- installs: extras that pin one CUDA major ------------------------------------------------

#: First onnxruntime-gpu on PyPI built for CUDA 13 (1.26.0 needs nvidia-cuda-runtime-cu12,
#: 1.27.0 nvidia-cuda-runtime-cu13: read from their metadata on PyPI).
ORT_FIRST_CUDA13 = '1.27.0'


def _extras() -> dict[str, list]:
    import contextlib
    import io

    import setuptools  # noqa: F401 - provides distutils on Python 3.12 and later
    from distutils.core import run_setup

    from packaging.requirements import Requirement

    root = Path(__file__).resolve().parents[3]
    with contextlib.redirect_stdout(io.StringIO()):
        dist = run_setup(str(root / 'setup.py'), stop_after='init')
    return {name: [Requirement(r) for r in reqs]
            for name, reqs in dist.extras_require.items()}


def _spec(reqs, name):
    from packaging.specifiers import SpecifierSet

    found = [r.specifier for r in reqs if r.name == name]
    return found[0] if found else SpecifierSet('<0')  # absent: allows nothing


def test_gpu_extras_pin_one_cuda_major():
    """cuda12 / cuda13 pick builds of their CUDA major only (the plain `tensorrt` and recent
    onnxruntime-gpu resolve to CUDA 13, which CUDA 12 drivers and JetPack 6 refuse); jetson
    leaves TensorRT and PyTorch to JetPack; every TensorRT extra has the fp16 converter."""
    extras = _extras()
    names = {k: {r.name for r in v} for k, v in extras.items()}
    cuda12, cuda13, jetson = extras['cuda12'], extras['cuda13'], extras['jetson']
    assert {'tensorrt-cu12', 'cuda-python', 'onnxruntime-gpu'} <= names['cuda12']
    assert not names['cuda12'] & {'tensorrt', 'tensorrt-cu13'}
    assert _spec(cuda12, 'tensorrt-cu12').contains('10.3.0')  # JetPack 6's version, on x86
    assert _spec(cuda12, 'cuda-python').contains('12.9.10')
    assert not _spec(cuda12, 'cuda-python').contains('13.0.0')
    assert _spec(cuda12, 'onnxruntime-gpu').contains('1.26.0')
    assert not _spec(cuda12, 'onnxruntime-gpu').contains(ORT_FIRST_CUDA13)
    assert not _spec(extras['onnx-gpu'], 'onnxruntime-gpu').contains(ORT_FIRST_CUDA13)
    assert {'tensorrt-cu13', 'cuda-python', 'onnxruntime-gpu'} <= names['cuda13']
    assert not _spec(cuda13, 'cuda-python').contains('12.9.10')
    assert not _spec(cuda13, 'onnxruntime-gpu').contains('1.26.0')
    assert not names['jetson'] & {'tensorrt', 'tensorrt-cu12', 'tensorrt-cu13', 'torch',
                                  'onnxruntime-gpu'}
    assert _spec(jetson, 'cuda-python').contains('12.6.2.post1')
    assert not _spec(jetson, 'cuda-python').contains('12.9.10')  # JetPack 6 has CUDA 12.6
    assert any(r.name == 'numpy' and not r.specifier.contains('2.0.0') for r in jetson)
    for extra in ('cuda12', 'cuda13', 'jetson', 'tensorrt'):
        assert {'onnx', 'onnxconverter-common'} <= names[extra], extra


# -- batches: an optimisation profile up to max_batch -------------------------------------------

def test_batch_profile_runs_several_frames(fake_trt, model_dir, tmp_path):
    """max_batch 3: the export has a batch axis, the profile's batch runs 1..3, the key has it."""
    base = resolve_manifest('yolov8n')
    cache = ArtifactCache(tmp_path / 'cache')
    batched = replace(base, max_batch=3)
    onnx_path = ensure_onnx(batched, base.weights_path(str(model_dir)), cache).file(ONNX_FILE)
    manifest = replace(model_manifest(TRT, name='yolov8n_trt', weights=onnx_path),
                       max_batch=3)
    runner = create_runner(RunnerConfig(manifest=manifest, weights=onnx_path,
                                        backend='tensorrt', cache=cache))
    try:
        profile = _calls(fake_trt, 'set_shape')[0]
        assert [s[0] for s in (profile['min'], profile['opt'], profile['max'])] == [1, 3, 3]
        assert runner.max_batch == 3
        rng = np.random.default_rng(5)
        tensor = rng.random((3, 3, 640, 480), dtype=np.float32)
        out = runner.infer(tensor)[0]
        assert out.shape[0] == 3
        np.testing.assert_allclose(out, _reference(onnx_path, tensor)[0], rtol=1e-4, atol=1e-3)
        single = runner.infer(tensor[1:2])[0]
        np.testing.assert_allclose(single, out[1:2], rtol=1e-4, atol=1e-3)
    finally:
        runner.unload()
    entries = [json.loads(p.read_text()) for p in cache.root.rglob('entry.json')]
    profiles = [str(e) for e in entries if "'profile'" in str(e)]
    assert profiles and all("'max': [3, 3, 640, 640]" in p for p in profiles)


def test_int8_calibrates_one_image_a_batch_in_a_batch_profile(fake_trt, model_dir, assets,
                                                              tmp_path):
    """max_batch 2 with int8: the calibration profile's opt is one image (what the calibrator
    feeds), while the engine's profile runs batches of 1..2."""
    base = resolve_manifest('yolov8n')
    cache = ArtifactCache(tmp_path / 'cache')
    onnx_path = ensure_onnx(replace(base, max_batch=2), base.weights_path(str(model_dir)),
                            cache).file(ONNX_FILE)
    images = tmp_path / 'calibration'
    images.mkdir()
    shutil.copy(assets / 'bus.jpg', images / 'bus.jpg')
    manifest = replace(model_manifest(TRT, name='yolov8n_trt', weights=onnx_path),
                       max_batch=2)
    runner = create_runner(RunnerConfig(
        manifest=manifest, weights=onnx_path, backend='tensorrt', cache=cache,
        precision='int8', calibration_dir=str(images)))
    try:
        shapes = _calls(fake_trt, 'set_shape')
        assert shapes[0]['opt'] == (2, 3, 640, 640)
        assert shapes[1]['opt'] == (1, 3, 640, 640)  # the calibration profile
        assert [b.shape for b in fake_trt.calibration_batches] == [(1, 3, 640, 640)]
        assert runner.max_batch == 2
    finally:
        runner.unload()
