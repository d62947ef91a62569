"""The backend map, runner errors, ``auto`` selection and the ONNX export cache."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from vision_nodes import backends
from vision_nodes.backends import AUTO_ORDER
from vision_nodes.runners.registry import BACKEND_MAP, check_supported, runner_class, select
from vision_nodes.artifacts.cache import ArtifactCache
from vision_nodes.manifest import KNOWN_BACKENDS
from vision_nodes.tasks import resolve_manifest
from vision_nodes.pipeline import build_pipeline, create_runner
from vision_nodes.loaders import ModelLoadError
from vision_nodes.runners.base import RunnerConfig, RunnerError

ort = pytest.importorskip('onnxruntime', reason='ONNX Runtime is not installed')


@pytest.fixture(scope='module')
def manifest():
    return resolve_manifest('yolov8n')


@pytest.fixture
def config(manifest, model_dir, engine_cache_dir) -> RunnerConfig:
    return RunnerConfig(manifest=manifest, weights=manifest.weights_path(str(model_dir)),
                        backend='onnx', cache=ArtifactCache(engine_cache_dir))


def test_backend_map_covers_every_known_backend():
    """Every manifest backend name is in the map; implemented ones resolve to a class."""
    assert set(BACKEND_MAP) == set(KNOWN_BACKENDS)
    assert runner_class('onnx').__name__ == 'OnnxRunner'
    assert runner_class('cpu') is runner_class('cuda') is runner_class('rocm')
    assert 'onnx' in runner_class('onnx').backends
    assert AUTO_ORDER[:3] == ('tensorrt', 'cuda', 'rocm')


def test_reserved_and_unknown_backends_say_so():
    """A reserved name without a runner says so; unknown names list the choices."""
    assert runner_class('tensorrt').__name__ == 'TensorRTRunner'
    assert runner_class('openvino').__name__ == 'OpenVinoRunner'
    for reserved in [name for name, target in BACKEND_MAP.items() if target is None]:
        with pytest.raises(RunnerError, match=f"'{reserved}' is reserved but has no runner"):
            runner_class(reserved)
    with pytest.raises(RunnerError, match="unknown backend 'tpu'.*auto, cpu, cuda"):
        runner_class('tpu')


def test_manifest_backends_are_checked(manifest):
    """A backend the manifest does not list fails with the valid ones named."""
    check_supported('onnx', manifest)
    check_supported('auto', manifest)
    with pytest.raises(RunnerError, match='valid backends for it: cpu, cuda, rocm, onnx'):
        check_supported('openvino', replace(manifest, backends=('cpu', 'cuda', 'rocm',
                                                                'onnx')))


def test_auto_prefers_the_fastest_available(manifest, config, model_dir, engine_cache_dir):
    """On a machine without a GPU, auto skips cuda/rocm and loads OpenVINO (before ONNX)."""
    assert AUTO_ORDER.index('openvino') < AUTO_ORDER.index('onnx')
    considered = select([manifest], 'auto').considered
    assert [c.backend for c in considered] == [
        b for b in ('tensorrt', 'cuda', 'rocm', 'openvino', 'onnx', 'cpu')
        if BACKEND_MAP[b] is not None]
    torch = pytest.importorskip('torch')
    pytest.importorskip('openvino', reason='OpenVINO is not installed')
    if torch.cuda.is_available():
        pytest.skip('a GPU is visible: auto would pick it')
    chosen = []
    model = build_pipeline(manifest, 'auto', model_dir=str(model_dir),
                           cache_dir=engine_cache_dir, log=chosen.append)
    try:
        assert model.runner.config.backend == 'openvino'
        assert chosen[-1] == "backend auto: chose 'openvino'"
    finally:
        model.close()


def test_auto_falls_back_when_a_backend_fails_to_load(manifest, model_dir, engine_cache_dir,
                                                      monkeypatch):
    """If the best candidate fails at load, auto logs it and takes the next."""
    onnx_cls = runner_class('onnx')

    def broken_load(self):
        raise RunnerError('simulated failure')

    monkeypatch.setattr(onnx_cls, '_load', broken_load)
    monkeypatch.setattr(backends, 'AUTO_ORDER', ('onnx', 'cpu'))
    pytest.importorskip('torch')
    log = []
    model = build_pipeline(manifest, 'auto', model_dir=str(model_dir),
                           cache_dir=engine_cache_dir, log=log.append)
    try:
        assert model.runner.config.backend == 'cpu'
        assert any("'onnx' failed to load (simulated failure)" in line for line in log)
    finally:
        model.close()


def test_gpu_backends_fail_clearly_without_a_gpu(config):
    """cuda/rocm on a CPU-only machine: a clear error, not a crash."""
    torch = pytest.importorskip('torch')
    if torch.cuda.is_available():
        pytest.skip('a GPU is visible here')
    with pytest.raises(RunnerError, match="backend 'cuda' is not available: no CUDA GPU"):
        create_runner(replace(config, backend='cuda'))
    with pytest.raises(RunnerError, match='ROCm'):
        create_runner(replace(config, backend='rocm'))


def test_missing_execution_provider_is_a_clear_error(config):
    """An EP this ONNX Runtime build lacks: error naming the available ones."""
    if 'TensorrtExecutionProvider' in ort.get_available_providers():
        pytest.skip('this ONNX Runtime has the TensorRT EP')
    with pytest.raises(RunnerError, match=r"'TensorrtExecutionProvider' is not available.*"
                                          r'CPUExecutionProvider'):
        create_runner(replace(config, execution_provider='tensorrt'))
    with pytest.raises(RunnerError, match="unknown execution_provider 'tpu'"):
        create_runner(replace(config, execution_provider='tpu'))


def test_precision_errors(config):
    """Precisions a runner cannot honour are refused, never silently ignored."""
    with pytest.raises(RunnerError, match=r"'onnx' cannot run precision 'int8' \(valid for it: "
                                          r'auto, fp32'):
        create_runner(replace(config, precision='int8'))
    pytest.importorskip('torch')
    with pytest.raises(RunnerError, match="'cpu' cannot run precision 'fp16'"):
        create_runner(replace(config, backend='cpu', precision='fp16'))
    with pytest.raises(RunnerError, match="'cpu' cannot run precision 'int8'"):
        create_runner(replace(config, backend='cpu', precision='int8'))


def test_missing_weights_is_a_clear_error(config, tmp_path):
    """A weights path that does not exist names the file and how to fix it."""
    with pytest.raises(ModelLoadError, match=r"nowhere\.pt' not found.*model_dir"):
        create_runner(replace(config, weights=tmp_path / 'nowhere.pt'))


def test_export_is_cached_and_reused(config, tmp_path):
    """First load exports into the cache; a second load hits it and skips the export."""
    fresh = replace(config, cache=ArtifactCache(tmp_path / 'cache'))
    first = create_runner(fresh)
    assert first.cache_hit is False
    path = first.model_path
    mtime = path.stat().st_mtime_ns
    first.unload()
    second = create_runner(fresh)
    try:
        assert second.cache_hit is True
        assert second.model_path == path and path.stat().st_mtime_ns == mtime
        entry = json.loads((path.parent / 'entry.json').read_text())
        assert entry['fields']['opset'] == 17
        assert entry['fields']['input_size'] == [640, 640]
        assert len(entry['fields']['weights_sha256']) == 64
        assert json.loads((path.parent / 'tools.json').read_text())['torch']
    finally:
        second.unload()


def test_corrupt_cached_onnx_is_rebuilt(config, tmp_path):
    """A truncated cached model is detected and exported again, not loaded."""
    fresh = replace(config, cache=ArtifactCache(tmp_path / 'cache'))
    runner = create_runner(fresh)
    path = runner.model_path
    runner.unload()
    path.write_bytes(path.read_bytes()[:1000])
    again = create_runner(fresh)
    try:
        assert again.cache_hit is False
        assert again.model_path.stat().st_size > 1_000_000
        out = again.infer(np.zeros((1, 3, 640, 640), np.float32))
        assert out[0].shape == (1, 84, 8400)
    finally:
        again.unload()


def test_onnx_weights_run_without_export(config, manifest, tmp_path):
    """A manifest that names an .onnx file is loaded directly (runtime-only deployment)."""
    exported = create_runner(config)
    onnx_file = Path(exported.model_path)
    exported.unload()
    direct = replace(manifest, weights=str(onnx_file), architecture='onnx',
                     backends=('onnx',))
    runner = create_runner(replace(config, manifest=direct, weights=onnx_file))
    try:
        assert runner.cache_hit is None and runner.model_path == onnx_file
        assert runner.labels[0] == 'person'
    finally:
        runner.unload()
    assert not runner.loaded
    with pytest.raises(RunnerError, match='not loaded'):
        runner.infer(np.zeros((1, 3, 640, 640), np.float32))


RUNTIME_ONLY = r'''
import importlib.abc, sys

class Block(importlib.abc.MetaPathFinder):
    """Make torch and ultralytics unimportable, as on a runtime-only deployment."""

    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('torch', 'torchvision', 'ultralytics', 'onnx', 'onnxslim'):
            raise ImportError(f'{name} is blocked in this test')
        return None

sys.meta_path.insert(0, Block())
import cv2
from vision_nodes.tasks import parse_manifest
from vision_nodes.pipeline import build_pipeline, create_runner
from vision_nodes.tasks.detect import DetectionParams

onnx_file, image, cache = sys.argv[1:4]
manifest = parse_manifest({'name': 'yolov8n_onnx', 'task': 'detect', 'weights': onnx_file,
                           'input_size': [640, 640], 'backends': ['onnx']})
pipeline = build_pipeline(manifest, 'onnx', cache_dir=cache)
dets = pipeline.process(cv2.imread(image), 'bgr8', DetectionParams())
names = sorted(pipeline.labels[c] for c in dets.class_ids)
assert not any(m.split('.')[0] in ('torch', 'ultralytics') for m in sys.modules)
print('RESULT', names.count('bus'), names.count('person'))
'''


def test_onnx_deployment_needs_neither_torch_nor_ultralytics(config, assets, tmp_path):
    """An .onnx manifest runs end to end in a process where torch/ultralytics cannot import."""
    import subprocess
    import sys

    exported = create_runner(config)
    onnx_file = exported.model_path
    exported.unload()
    result = subprocess.run(
        [sys.executable, '-c', RUNTIME_ONLY, str(onnx_file), str(assets / 'bus.jpg'),
         str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    buses, people = map(int, result.stdout.split('RESULT')[1].split())
    assert buses == 1 and people >= 3


_THREADS_PROBE = r'''
import json, os, sys
import cv2
cv2_before = cv2.getNumThreads()
from vision_nodes.tools.demo import bundled_images
images = bundled_images()
from vision_nodes.loaders.ultralytics import import_ultralytics
import_ultralytics()
import torch
print(json.dumps({'images': len(images), 'torch_threads': torch.get_num_threads(),
                  'env': os.environ.get('OMP_NUM_THREADS'),
                  'cv2_threads': [cv2_before, cv2.getNumThreads()]}))
'''


@pytest.mark.parametrize('user_setting', [None, '1'])
def test_ultralytics_import_keeps_thread_settings(user_setting):
    """ultralytics sets OMP_NUM_THREADS=1 and OpenCV to one thread at import: neither stays.

    OMP_NUM_THREADS must not reach PyTorch or child processes; OpenCV keeps its own count,
    which the pre-processing's resize uses.
    """
    import os
    import subprocess
    import sys

    pytest.importorskip('ultralytics', reason='ultralytics is not installed')
    env = {k: v for k, v in os.environ.items() if k != 'OMP_NUM_THREADS'}
    if user_setting is not None:
        env['OMP_NUM_THREADS'] = user_setting
    default = subprocess.run(
        [sys.executable, '-c', 'import torch; print(torch.get_num_threads())'],
        env=env, capture_output=True, text=True, check=True)
    probe = subprocess.run([sys.executable, '-c', _THREADS_PROBE], env=env,
                           capture_output=True, text=True, check=True)
    result = json.loads(probe.stdout.strip().splitlines()[-1])
    assert result['images'] >= 2  # bus.jpg and zidane.jpg, found without importing ultralytics
    assert result['env'] == user_setting
    assert result['torch_threads'] == int(default.stdout.strip())
    before, after = result['cv2_threads']
    assert after == before
    if user_setting is not None:
        assert result['torch_threads'] == 1
