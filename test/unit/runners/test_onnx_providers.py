"""ONNX Runtime execution providers: ``auto`` order and fallback, options, fp16.

This machine's ONNX Runtime is the CPU build, so sessions on CPU are real. GPU and OpenVINO
providers cannot exist here: where a test needs one, ``get_available_providers`` is patched
to list it and session creation for it is faked (failing, or answering through a real CPU
session); every CPU session stays real. The fp16 conversion and its accuracy are real. The
CPU-fallback logic runs for real on the Azure provider, the one non-CPU provider this build
has: it takes no node, so with CPU fallback disabled ONNX Runtime refuses the session.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from vision_nodes.artifacts.cache import CacheError, ArtifactCache
from vision_nodes.artifacts.onnx_export import ONNX_FILE, ensure_onnx
from vision_nodes.artifacts.onnx_fp16 import FP16_ONNX_FILE, ensure_fp16_onnx
from vision_nodes.runners.base import RunnerConfig, RunnerError
from vision_nodes.runners import onnx_providers
from vision_nodes.runners.onnx_providers import (AUTO_ORDER, EXECUTION_PROVIDERS,
                                                 NO_CPU_FALLBACK, OPENVINO, TENSORRT,
                                                 provider_candidates, provider_options)
from vision_nodes.pipeline import create_runner
from vision_nodes.tasks import create_task, resolve_manifest
from vision_nodes.tasks.detect import DetectionParams

ort = pytest.importorskip('onnxruntime', reason='ONNX Runtime is not installed')
CPU = 'CPUExecutionProvider'
CUDA = 'CUDAExecutionProvider'
REAL_SESSION = ort.InferenceSession


@pytest.fixture(scope='module')
def manifest():
    return resolve_manifest('yolov8n')


@pytest.fixture
def log() -> list[str]:
    return []


@pytest.fixture
def config(manifest, model_dir, engine_cache_dir, log) -> RunnerConfig:
    return RunnerConfig(manifest=manifest, weights=manifest.weights_path(str(model_dir)),
                        backend='onnx', cache=ArtifactCache(engine_cache_dir), log=log.append)


@pytest.fixture(scope='module')
def onnx_bytes(manifest, model_dir, engine_cache_dir) -> bytes:
    entry = ensure_onnx(manifest, manifest.weights_path(str(model_dir)),
                        ArtifactCache(engine_cache_dir))
    return entry.read_verified(ONNX_FILE)


class _ProxySession:
    """A real CPU session that reports the provider it was asked for (a GPU stand-in)."""

    def __init__(self, model, provider, **kwargs):
        self._session = REAL_SESSION(model, providers=[CPU])
        self._provider = provider

    def get_providers(self):
        return [self._provider, CPU]

    def __getattr__(self, name):
        return getattr(self._session, name)


def _config_entry(options, key: str) -> str:
    """A session config entry's value, '' when unset (ONNX Runtime raises for those)."""
    try:
        return options.get_session_config_entry(key) if options is not None else ''
    except RuntimeError:
        return ''


class _Calls(list):
    def __init__(self):
        super().__init__()
        self.sessions = []


def _fake_providers(monkeypatch, available, behaviour):
    """List ``available`` as this build's providers; sessions on non-CPU ones follow
    ``behaviour[provider]``: 'fail' raises, 'drop' silently runs on CPU (as ONNX Runtime does
    when a provider's libraries are missing), 'proxy' answers through a real CPU session.
    Every call is recorded as (provider, model, options); ``calls.sessions`` keeps each
    call's full provider list, their options and the session's config entry for CPU
    fallback."""
    calls = _Calls()

    def session(model, sess_options=None, providers=None, provider_options=None):
        provider = providers[0]
        calls.append((provider, model, provider_options[0] if provider_options else {}))
        strict = _config_entry(sess_options, NO_CPU_FALLBACK)
        calls.sessions.append((list(providers), list(provider_options or []), strict))
        if provider == CPU:
            return REAL_SESSION(model, sess_options=sess_options, providers=providers,
                                provider_options=provider_options)
        action = behaviour[provider]
        if action == 'fail':
            raise RuntimeError(f'{provider} cannot start on this machine (simulated)')
        if action == 'drop':
            return REAL_SESSION(model, providers=[CPU])
        return _ProxySession(model, provider)

    monkeypatch.setattr(ort, 'get_available_providers', lambda: list(available))
    monkeypatch.setattr(ort, 'InferenceSession', session)
    return calls


def test_choices_include_auto_coreml_and_directml():
    """The node's execution_provider choices come from this table."""
    assert {'auto', 'coreml', 'directml', 'cpu', 'cuda', 'tensorrt', 'openvino'} <= set(
        EXECUTION_PROVIDERS)
    assert AUTO_ORDER[:3] == (TENSORRT, CUDA, 'ROCMExecutionProvider')
    assert AUTO_ORDER[-2:] == (OPENVINO, CPU)
    assert AUTO_ORDER.index('CoreMLExecutionProvider') < AUTO_ORDER.index(
        'DmlExecutionProvider')


def test_auto_on_this_cpu_build_picks_cpu(config, log):
    """Real: this build has no GPU provider, so auto runs on the CPU provider."""
    runner = create_runner(replace(config, execution_provider='auto'))
    try:
        assert runner.describe()['providers'] == [CPU]
        assert log[-1] == "execution_provider auto: chose 'CPUExecutionProvider'"
    finally:
        runner.unload()


def test_auto_falls_back_down_the_list(monkeypatch, config, log, onnx_bytes):
    """TensorRT fails, CUDA is silently dropped by ONNX Runtime, OpenVINO fails: CPU runs."""
    calls = _fake_providers(
        monkeypatch, [OPENVINO, CUDA, TENSORRT, 'AzureExecutionProvider', CPU],
        {TENSORRT: 'fail', CUDA: 'drop', OPENVINO: 'fail'})
    runner = create_runner(replace(config, execution_provider='auto'))
    try:
        assert [c[0] for c in calls] == [TENSORRT, CUDA, OPENVINO, CPU]
        assert runner.describe()['providers'] == [CPU]
        failures = [line for line in log if 'failed' in line]
        assert len(failures) == 3
        assert failures[0].startswith("execution_provider auto: 'TensorrtExecutionProvider' "
                                      'failed (ONNX Runtime cannot load')
        assert 'cannot start on this machine' in failures[0]
        assert 'could not start CUDAExecutionProvider (the session runs on ' \
               'CPUExecutionProvider)' in failures[1]
        assert log[-1] == "execution_provider auto: chose 'CPUExecutionProvider'"
        out = runner.infer(np.zeros((1, 3, 640, 640), np.float32))
        assert out[0].shape == (1, 84, 8400)
    finally:
        runner.unload()


def test_named_provider_does_not_fall_back(monkeypatch, config, onnx_bytes):
    """A provider asked for by name either runs or fails the load: never CPU in its place."""
    _fake_providers(monkeypatch, [CUDA, CPU], {CUDA: 'drop'})
    with pytest.raises(RunnerError, match='could not start CUDAExecutionProvider'):
        create_runner(replace(config, execution_provider='cuda'))
    _fake_providers(monkeypatch, [CUDA, CPU], {CUDA: 'proxy'})
    runner = create_runner(replace(config, execution_provider='cuda'))
    try:
        assert runner.describe()['providers'][0] == CUDA
    finally:
        runner.unload()


def test_tensorrt_provider_options(tmp_path):
    """TensorRT EP caches go in a folder per model and key inside engine_cache_dir."""
    cache = ArtifactCache(tmp_path / 'engines')
    common = dict(cache=cache, model='yolov8n', ort_version='1.31.1')
    fp16 = provider_options(TENSORRT, device='cuda:1', precision='fp16',
                            onnx_sha256='a' * 64, **common)
    folder = Path(fp16['trt_engine_cache_path'])
    assert folder.is_dir() and folder.parent == cache.root / 'onnxruntime-tensorrt'
    assert folder.name.startswith('yolov8n-')
    assert fp16 == {'device_id': 1, 'trt_engine_cache_enable': True,
                    'trt_engine_cache_path': str(folder), 'trt_timing_cache_enable': True,
                    'trt_timing_cache_path': str(folder), 'trt_fp16_enable': True}
    fp32 = provider_options(TENSORRT, device='', precision='fp32', onnx_sha256='a' * 64,
                            **common)
    other = provider_options(TENSORRT, device='', precision='fp32', onnx_sha256='b' * 64,
                             **common)
    assert fp32['trt_fp16_enable'] is False and 'device_id' not in fp32
    assert len({fp16['trt_engine_cache_path'], fp32['trt_engine_cache_path'],
                other['trt_engine_cache_path']}) == 3


def test_a_manifest_copy_shares_the_providers_cache_folder(tmp_path):
    """The provider's own cache folder is found by key: a manifest copied under another name
    (the same graph and options) gets the folder the first name made; other options do not."""
    cache = ArtifactCache(tmp_path)
    opts = dict(cache=cache, onnx_sha256='c' * 64, ort_version='1.31.1', device='gpu')
    first = provider_options(OPENVINO, model='yolov8n', precision='fp32', **opts)['cache_dir']
    assert Path(first).name.startswith('yolov8n-ep-') and Path(first).is_dir()
    copy = provider_options(OPENVINO, model='yolov8n_strict', precision='fp32', **opts)
    assert copy['cache_dir'] == first
    other = provider_options(OPENVINO, model='yolov8n_strict', precision='fp16', **opts)
    assert Path(other['cache_dir']).name.startswith('yolov8n_strict-ep-')
    assert other['cache_dir'] != first and Path(other['cache_dir']).is_dir()


def test_device_and_openvino_options(tmp_path):
    """device → device_id for GPU providers, device_type for OpenVINO; mismatches refused."""
    cache = ArtifactCache(tmp_path)
    opts = dict(cache=cache, model='m', onnx_sha256='c' * 64, ort_version='1.31.1')
    assert provider_options(CUDA, device='2', precision='fp32', **opts) == {'device_id': 2}
    assert provider_options('ROCMExecutionProvider', device='rocm:1', precision='fp32',
                            **opts) == {'device_id': 1}
    assert provider_options('DmlExecutionProvider', device='', precision='fp16',
                            **opts) == {}
    assert provider_options(CPU, device='', precision='fp32', **opts) == {}
    gpu = provider_options(OPENVINO, device='gpu.1', precision='fp32', **opts)
    assert gpu['device_type'] == 'GPU.1' and gpu['precision'] == 'FP32'
    assert Path(gpu['cache_dir']).parent == cache.root / 'onnxruntime-openvino'
    npu = provider_options(OPENVINO, device='NPU', precision='fp16', **opts)
    assert npu['device_type'] == 'NPU' and npu['precision'] == 'FP16'
    assert 'device_type' not in provider_options(OPENVINO, device='', precision='fp32', **opts)
    with pytest.raises(RunnerError, match=r"device 'cuda:0': backend 'onnx' \(execution "
                                          r'provider openvino\) cannot use a CUDA GPU'):
        provider_options(OPENVINO, device='cuda:0', precision='fp32', **opts)
    with pytest.raises(RunnerError, match=r"device 'npu': backend 'onnx' \(execution "
                                          r'provider cuda\) cannot use it; it takes '
                                          r"'' \(the default\) or a GPU"):
        provider_options(CUDA, device='npu', precision='fp32', **opts)


def test_fp16_is_refused_on_the_cpu_provider(config):
    """Real: fp16 on the CPU provider names the valid precision and where fp16 runs."""
    with pytest.raises(RunnerError, match=r"'CPUExecutionProvider' cannot run precision "
                                          r"'fp16' \(valid for it: fp32\); fp16 needs a GPU "
                                          r'execution provider \(tensorrt, cuda, rocm, '
                                          r'migraphx, directml, coreml\) or openvino'):
        create_runner(replace(config, precision='fp16'))
    with pytest.raises(RunnerError, match="auto found no provider that loads.*cannot run "
                                          "precision 'fp16'"):
        create_runner(replace(config, precision='fp16', execution_provider='auto'))


def test_gpu_providers_run_the_fp16_graph(monkeypatch, config, engine_cache_dir, onnx_bytes):
    """CUDA gets the cached fp16 graph; TensorRT keeps the fp32 graph with its fp16 flag."""
    pytest.importorskip('onnx', reason='the fp16 conversion needs onnx')
    calls = _fake_providers(monkeypatch, [TENSORRT, CUDA, CPU],
                            {CUDA: 'proxy', TENSORRT: 'proxy'})
    runner = create_runner(replace(config, precision='fp16', execution_provider='cuda',
                                   device='0'))
    try:
        provider, model, options = calls[-1]
        assert provider == CUDA and options == {'device_id': 0}
        entries = [p for p in Path(engine_cache_dir).glob('yolov8n-onnx-fp16-*') if p.is_dir()]
        assert len(entries) == 1
        assert hashlib.sha256(model).hexdigest() == hashlib.sha256(
            (entries[0] / FP16_ONNX_FILE).read_bytes()).hexdigest()
        assert runner.infer(np.zeros((1, 3, 640, 640), np.float32))[0].dtype == np.float32
    finally:
        runner.unload()
    runner = create_runner(replace(config, precision='fp16', execution_provider='tensorrt'))
    try:
        provider, model, options = calls[-1]
        # The TensorRT EP gets the fp32 graph (its own fp16 flag does the rest), as the
        # verified bytes of the cache entry.
        assert provider == TENSORRT and model == runner.model_path.read_bytes()
        assert options['trt_fp16_enable'] is True
        assert Path(options['trt_engine_cache_path']).is_relative_to(engine_cache_dir)
    finally:
        runner.unload()


def test_fp16_graph_is_valid_and_agrees_with_fp32(onnx_bytes, assets, tmp_path, manifest):
    """Real conversion, run on the CPU provider only to check it (the runner refuses that).

    Tolerances, on bus.jpg and zidane.jpg: box outputs within 1 network pixel (fp16 spacing
    is 0.5 at 512..1024), class scores within 0.005; bus.jpg's detections keep their classes,
    boxes within 1 source pixel.
    """
    import cv2

    cache = ArtifactCache(tmp_path)
    entry = ensure_fp16_onnx('yolov8n', onnx_bytes, cache)
    assert entry.hit is False
    again = ensure_fp16_onnx('yolov8n', onnx_bytes, cache)
    assert again.hit is True and again.path == entry.path
    fields = json.loads((entry.path / 'entry.json').read_text())['fields']
    assert fields['parent_onnx_sha256'] == hashlib.sha256(onnx_bytes).hexdigest()
    assert fields['converter'].startswith(('onnxruntime.transformers.float16/',
                                           'onnxconverter_common/'))
    fp16_bytes = entry.read_verified(FP16_ONNX_FILE)
    assert len(fp16_bytes) < 0.6 * len(onnx_bytes)  # weights stored as fp16
    s32 = REAL_SESSION(onnx_bytes, providers=[CPU])
    s16 = REAL_SESSION(fp16_bytes, providers=[CPU])
    assert [i.type for i in s16.get_inputs()] == ['tensor(float)']
    assert [o.type for o in s16.get_outputs()] == ['tensor(float)']
    task = create_task(manifest)
    for name in ('bus.jpg', 'zidane.jpg'):
        tensor, meta = task.preprocess(cv2.imread(str(assets / name)), 'bgr8', (640, 640))
        y32 = s32.run(None, {'images': tensor})[0]
        y16 = s16.run(None, {'images': tensor})[0]
        assert np.abs(y32[:, :4] - y16[:, :4]).max() <= 1.0
        assert np.abs(y32[:, 4:] - y16[:, 4:]).max() <= 0.005
        if name == 'bus.jpg':
            d32 = task.postprocess([y32], meta, DetectionParams())
            d16 = task.postprocess([y16], meta, DetectionParams())
            np.testing.assert_array_equal(d16.class_ids, d32.class_ids)
            np.testing.assert_allclose(d16.boxes, d32.boxes, atol=1.0)


def test_missing_converter_is_a_clear_error(monkeypatch, onnx_bytes, tmp_path):
    """Without a converter (or onnx), fp16 on a GPU provider says what to install."""
    for name in ('onnxruntime.transformers', 'onnxruntime.transformers.float16',
                 'onnxconverter_common'):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(CacheError, match='pip install onnx onnxconverter-common'):
        ensure_fp16_onnx('yolov8n', onnx_bytes, ArtifactCache(tmp_path))


# -- what real installs do: CPU fallback, TensorRT provider settings, OpenVINO, ROCm ---------

def test_cpu_placement_is_said_not_hidden(monkeypatch, config, log):
    """Real: a provider that takes no node (Azure here) is refused by ONNX Runtime with CPU
    fallback disabled; the runner then lets the CPU take them and says so in the log."""
    assert 'AzureExecutionProvider' in ort.get_available_providers()
    monkeypatch.setitem(EXECUTION_PROVIDERS, 'azure', 'AzureExecutionProvider')
    runner = create_runner(replace(config, execution_provider='azure'))
    try:
        assert runner.describe()['providers'] == ['AzureExecutionProvider', CPU]
        notes = [line for line in log if 'run on the CPU' in line]
        assert notes == ["AzureExecutionProvider: some nodes of 'yolov8n' run on the CPU (ONNX "
                         'Runtime has no AzureExecutionProvider kernel for them, or keeps '
                         'small shape computations there); the rest runs on the provider']
        out = runner.infer(np.zeros((1, 3, 640, 640), np.float32))
        assert out[0].shape == (1, 84, 8400)
    finally:
        runner.unload()


def test_gpu_providers_start_without_cpu_fallback(monkeypatch, config, onnx_bytes):
    """A GPU provider's session is strict (no CPU listed, fallback disabled); the CPU
    provider's is not (ONNX Runtime refuses the two together)."""
    calls = _fake_providers(monkeypatch, [CUDA, CPU], {CUDA: 'proxy'})
    runner = create_runner(replace(config, execution_provider='cuda', device='1'))
    runner.unload()
    assert calls.sessions[-1] == ([CUDA], [{'device_id': 1}], '1')
    runner = create_runner(replace(config, execution_provider='cpu'))
    runner.unload()
    assert calls.sessions[-1][0] == [CPU] and calls.sessions[-1][2] == ''
    with pytest.raises(Exception, match='Conflicting session configuration'):
        strict = ort.SessionOptions()
        strict.add_session_config_entry(NO_CPU_FALLBACK, '1')
        REAL_SESSION(onnx_bytes, sess_options=strict, providers=[CPU])


def test_tensorrt_provider_has_cuda_behind_it_and_a_shape_profile(monkeypatch, config,
                                                                  engine_cache_dir):
    """TensorRT EP: CUDA (same GPU) behind it, not the CPU; an explicit min/opt/max profile
    for the dynamic export (no engine rebuild per rect shape); TensorRT's version keyed."""
    calls = _fake_providers(monkeypatch, [TENSORRT, CUDA, CPU],
                            {TENSORRT: 'proxy', CUDA: 'proxy'})
    monkeypatch.setattr(onnx_providers, 'tensorrt_library_version', lambda: '10.3.0')
    runner = create_runner(replace(config, execution_provider='tensorrt', device='cuda:1'))
    runner.unload()
    providers, options, strict = calls.sessions[-1]
    assert providers == [TENSORRT, CUDA] and strict == '1'
    assert options[1] == {'device_id': 1}
    assert (options[0]['trt_profile_min_shapes'], options[0]['trt_profile_opt_shapes'],
            options[0]['trt_profile_max_shapes']) == (
        'images:1x3x32x32', 'images:1x3x640x640', 'images:1x3x640x640')
    first = options[0]['trt_engine_cache_path']
    monkeypatch.setattr(onnx_providers, 'tensorrt_library_version', lambda: '10.16.1.11')
    runner = create_runner(replace(config, execution_provider='tensorrt', device='cuda:1'))
    runner.unload()
    assert calls.sessions[-1][1][0]['trt_engine_cache_path'] != first
    # rect: false exports a fixed-shape model: nothing to profile.
    square = replace(config.manifest, rect=False)
    runner = create_runner(replace(config, manifest=square, execution_provider='tensorrt'))
    runner.unload()
    assert runner.dynamic_shapes is False
    assert 'trt_profile_min_shapes' not in calls.sessions[-1][1][0]


def test_openvino_provider_precision_is_what_the_device_runs(tmp_path):
    """fp16 on the CPU (OpenVINO's provider refuses FP16 there) and fp32 on an NPU (it would
    run as fp16 without a word) are refused with the reason; the rest is allowed."""
    opts = dict(cache=ArtifactCache(tmp_path), model='m', onnx_sha256='d' * 64,
                ort_version='1.31.1')
    for device in ('', 'CPU'):
        with pytest.raises(RunnerError, match="on the CPU runs precision 'fp32' only"):
            provider_options(OPENVINO, device=device, precision='fp16', **opts)
    with pytest.raises(RunnerError, match=r"on the NPU runs fp16 only \(precision 'fp32' "
                                          'would run as fp16'):
        provider_options(OPENVINO, device='NPU', precision='fp32', **opts)
    assert provider_options(OPENVINO, device='GPU', precision='fp16', **opts)['precision'] \
        == 'FP16'
    assert provider_options(OPENVINO, device='NPU', precision='fp16', **opts)['precision'] \
        == 'FP16'
    assert 'precision' not in provider_options(OPENVINO, device='CPU', precision='fp32',
                                               **opts)


def test_rocm_provider_points_to_migraphx(config):
    """Real: ONNX Runtime >= 1.23 has no ROCm provider; asking for it says what to use."""
    version = re.escape(ort.__version__)
    with pytest.raises(RunnerError, match=rf'ONNX Runtime {version} has no ROCm execution '
                                          r'provider \(removed in 1\.23\): on AMD GPUs use '
                                          "execution_provider 'migraphx'"):
        create_runner(replace(config, execution_provider='rocm'))
    with pytest.raises(RunnerError, match="'ROCMExecutionProvider' is not available in this "
                                          'ONNX Runtime build'):
        provider_candidates('rocm', [CPU], '1.22.0')


def test_gpu_providers_get_the_u8_graph_and_the_cpu_the_float_one(monkeypatch, config,
                                                                  engine_cache_dir):
    """CUDA and TensorRT EP sessions load the chain's u8-input graph (artifacts/onnx_u8_input:
    a quarter of the upload); TensorRT's profile and engine folder are the u8 graph's. The CPU
    provider keeps the float graph and the chain makes no twin for it."""
    calls = _fake_providers(monkeypatch, [TENSORRT, CUDA, CPU],
                            {TENSORRT: 'proxy', CUDA: 'proxy'})
    monkeypatch.setattr(onnx_providers, 'tensorrt_library_version', lambda: '10.3.0')
    float_trt = create_runner(replace(config, execution_provider='tensorrt'))
    float_trt.unload()
    float_options = calls.sessions[-1][1][0]
    for provider, name in ((CUDA, 'cuda'), (TENSORRT, 'tensorrt')):
        runner = create_runner(replace(config, execution_provider=name), u8_input=True)
        try:
            assert runner.supports_u8_input and runner.dynamic_shapes
            assert runner.model_input_shape() == (1, 3, None, None)
            assert runner.describe()['input'] == 'u8 NHWC bgr, pre-processing in the model'
            assert calls[-1][0] == provider and calls[-1][1] == \
                runner.config.artifact.u8.data
            out = runner.infer(np.zeros((1, 480, 640, 3), np.uint8))[0]
            assert out.shape == (1, 84, 6300)
        finally:
            runner.unload()
    options = calls.sessions[-1][1][0]
    assert (options['trt_profile_min_shapes'], options['trt_profile_max_shapes']) == (
        'images_u8:1x32x32x3', 'images_u8:1x640x640x3')
    assert options['trt_engine_cache_path'] != float_options['trt_engine_cache_path']
    runner = create_runner(replace(config, execution_provider='cpu'), u8_input=True)
    try:
        assert not runner.supports_u8_input and runner.config.artifact.u8 is None
        assert runner.describe()['input'] == 'float32 NCHW'
    finally:
        runner.unload()


def test_cuda_at_fp16_gets_the_u8_twin_of_the_fp16_graph(monkeypatch, config):
    """fp16 on CUDA runs the converted graph: its own u8 twin (float32 until the cast inside)."""
    calls = _fake_providers(monkeypatch, [CUDA, CPU], {CUDA: 'proxy'})
    runner = create_runner(replace(config, execution_provider='cuda', precision='fp16'),
                           u8_input=True)
    try:
        artifact = runner.config.artifact
        assert artifact.fp16 is not None and artifact.fp16_u8 is not None
        assert runner.supports_u8_input and calls[-1][1] == artifact.fp16_u8.data
        assert artifact.fp16_u8.data != artifact.u8.data
        out = runner.infer(np.zeros((1, 640, 640, 3), np.uint8))[0]
        assert out.shape == (1, 84, 8400) and out.dtype == np.float32
    finally:
        runner.unload()
