"""Benchmarks skip what this machine cannot run (benchmarks/bench_configs.py), with a reason.

The selection is the node's own decision before loading: every configuration it skips is one
that loading refuses with the same one-line reason, and the rest are kept in order. No timing.
"""

import importlib.util
from pathlib import Path
import sys

import pytest

from vision_nodes.tasks import resolve_manifest
from vision_nodes.pipeline import build_pipeline
from vision_nodes.runners.base import RunnerError

_BENCH = Path(__file__).resolve().parents[3] / 'benchmarks'


def _module(name: str):
    spec = importlib.util.spec_from_file_location(name, _BENCH / f'{name}.py')
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope='module')
def configs():
    return _module('bench_configs')


def test_runnable_keeps_the_order_and_says_each_skip_in_one_line(configs):
    said = []
    kept, skipped = configs.runnable(
        ['a', 'b', 'c', 'd'], lambda item: 'no b here' if item == 'b' else
        ('nor d' if item == 'd' else None), name=lambda item: f'cfg-{item}', say=said.append)
    assert kept == ['a', 'c']
    assert skipped == {'cfg-b': 'no b here', 'cfg-d': 'nor d'}
    assert said == ['skipped cfg-b: no b here', 'skipped cfg-d: nor d']


def test_what_is_skipped_is_what_loading_refuses(configs, tmp_path):
    """bench_detect's defaults plus two configurations no machine here runs as asked: each
    skipped one is refused by the node's loading path with the same reason (openvino:fp16 on
    a CPU without native bf16/fp16, onnx:int8 anywhere); onnx (the CPU runtime) is kept."""
    bench = _module('bench_detect')
    manifest = resolve_manifest('yolov8n')
    calibration = tmp_path / 'calibration'
    calibration.mkdir()
    wanted = [bench.parse_config(s) for s in bench.DEFAULT_CONFIGS + ['onnx:int8']]
    said = []
    kept, skipped = configs.runnable(
        wanted, lambda cfg: configs.cannot_run(manifest, cfg.backend, cfg.precision,
                                               calibration_dir=str(calibration)),
        name=lambda cfg: cfg.spec, say=said.append)
    assert 'onnx' in [cfg.spec for cfg in kept] and 'onnx:int8' in skipped
    assert [cfg.spec for cfg in kept] == [c.spec for c in wanted if c.spec not in skipped]
    assert len(said) == len(skipped) and all('\n' not in line for line in said)
    for cfg in wanted:
        if cfg.spec not in skipped:
            continue
        with pytest.raises(RunnerError) as refused:
            build_pipeline(manifest, cfg.backend, precision=cfg.precision,
                           calibration_dir=str(calibration))
        assert str(refused.value) == skipped[cfg.spec]
