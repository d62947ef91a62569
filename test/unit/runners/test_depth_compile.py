"""``torch.compile`` in the PyTorch runner: parity with eager, fallback, Ultralytics skipped.

There is no GPU here, so the tests let the runner compile on the CPU too (inductor generates
and builds C++ kernels: tens of seconds the first time on a 2-core machine, seconds once
inductor's own cache under /tmp holds them).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip('torch', reason='PyTorch is not installed')
pytest.importorskip('transformers', reason='transformers is not installed')

from depth_weights import IMAGENET, depth_anything_folder, shared_folder, yolo_depth_pt  # noqa
from model_manifests import model_manifest  # noqa: E402
from vision_nodes.artifacts.cache import ArtifactCache  # noqa: E402
from vision_nodes.runners.base import RunnerConfig  # noqa: E402
from vision_nodes.runners.torch_runner import ULTRALYTICS_COMPILE_REASON, TorchRunner  # noqa

#: A metric depth model's manifest fields: a tiny Depth Anything unless a test says otherwise.
METRIC = {'name': 'compile_transformers', 'task': 'depth', 'architecture': 'transformers',
          'input_size': [42, 56], 'preprocessing': {'letterbox': False, **IMAGENET},
          'depth': {'kind': 'metric'}}


def _runner(manifest, tmp_path, lines, compile_=True) -> TorchRunner:
    config = RunnerConfig(manifest=manifest, weights=manifest.weights_path(), backend='cpu',
                          cache=ArtifactCache(tmp_path / 'cache'), torch_compile=compile_,
                          log=lines.append)
    runner = TorchRunner(config)
    runner.load()
    return runner


@pytest.fixture(scope='module')
def metric_folder(tmp_path_factory):
    return depth_anything_folder(shared_folder(tmp_path_factory) / 'da_tiny_metric',
                                 metric=True, max_depth=20)


@pytest.fixture
def compile_on_cpu(monkeypatch):
    """Let the runner compile on the CPU, as it does on a GPU."""
    monkeypatch.setattr(TorchRunner, 'compile_device_types', ('cuda', 'cpu'))


def test_compiled_matches_eager(metric_folder, tmp_path, compile_on_cpu):
    """Compiled during load (warm-up included), then the same depth as the eager module."""
    lines: list[str] = []
    runner = _runner(model_manifest(METRIC, weights=metric_folder), tmp_path, lines)
    try:
        assert runner.compiled and runner.describe()['torch_compile'] is True
        assert any('compiled and warmed up' in line for line in lines), lines
        x = np.random.default_rng(0).standard_normal((1, 3, 42, 56)).astype(np.float32)
        compiled = runner.infer(x)[0]
        eager_module = runner._module._orig_mod
        with torch.inference_mode():
            eager = eager_module(torch.from_numpy(x)).numpy()
        assert compiled.shape == (1, 1, 42, 56)
        assert np.ptp(eager) > 1e-3
        np.testing.assert_allclose(compiled, eager, rtol=1e-5, atol=1e-5)
    finally:
        runner.unload()


def test_compile_failure_falls_back_to_eager(metric_folder, tmp_path, compile_on_cpu,
                                             monkeypatch):
    """No working C++ compiler (as on a robot without one): a warning, then eager."""
    import torch._inductor.config as inductor_config

    monkeypatch.setattr(inductor_config.cpp, 'cxx', ('/nonexistent/c++',))
    monkeypatch.setattr(inductor_config, 'fx_graph_cache', False)
    lines: list[str] = []
    # Another input size than the parity test: no kernel compiled in this process fits.
    manifest = model_manifest(METRIC, weights=metric_folder, input_size=[28, 70])
    runner = _runner(manifest, tmp_path, lines)
    try:
        assert not runner.compiled
        warning = [line for line in lines if line.startswith('warning: torch.compile failed')]
        assert len(warning) == 1 and 'running it eagerly' in warning[0], lines
        assert '\n' not in warning[0] and len(warning[0]) < 600
        out = runner.infer(np.zeros((1, 3, 28, 70), np.float32))[0]
        assert out.shape == (1, 1, 28, 70) and np.isfinite(out).all()
    finally:
        runner.unload()


def test_compile_off_and_cpu_default_run_eagerly(metric_folder, tmp_path, compile_on_cpu,
                                                 monkeypatch):
    lines: list[str] = []
    manifest = model_manifest(METRIC, weights=metric_folder)
    runner = _runner(manifest, tmp_path, lines, compile_=False)
    assert not runner.compiled and lines == []
    runner.unload()
    monkeypatch.setattr(TorchRunner, 'compile_device_types', ('cuda',))  # the shipped default
    runner = _runner(manifest, tmp_path, lines)
    assert not runner.compiled and lines == []
    runner.unload()


def test_ultralytics_models_are_not_compiled(tmp_path_factory, tmp_path, compile_on_cpu):
    pytest.importorskip('ultralytics', reason='ultralytics is not installed')
    pt = yolo_depth_pt(shared_folder(tmp_path_factory) / 'yolo26n-depth-random.pt')
    lines: list[str] = []
    manifest = model_manifest(METRIC, name='compile_ultralytics', weights=pt,
                              architecture='ultralytics', input_size=[64, 64])
    runner = _runner(manifest, tmp_path, lines)
    try:
        assert not runner.compiled
        assert lines == [ULTRALYTICS_COMPILE_REASON]
        assert 'skipped' in lines[0] and 'eagerly' in lines[0]
    finally:
        runner.unload()
