"""The one backend table, the one ``auto`` decision, and what tasks own of a manifest.

Every fact about a backend is a row of ``backends.py``; the manifest checker, the
registry, the ONNX providers and the node's parameter choices read it. ``registry.select``
decides ``auto`` once and the pipeline loads its candidates in order; ``create_runner`` loads
one named backend. Tasks parse their own manifest blocks and give the node's parameter
defaults from a manifest (``param_defaults``).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from model_manifests import model_manifest
from vision_nodes import manifest as manifest_module
from vision_nodes import backends
from vision_nodes import pipeline as pipeline_module
from vision_nodes.artifacts.cache import ArtifactCache
from vision_nodes.manifest import ManifestError
from vision_nodes.backends import (ARCHITECTURE_BACKENDS, AUTO_ORDER, BACKEND_CHOICES, BACKENDS,
                                   EXECUTION_PROVIDER_CHOICES, PRECISIONS)
from vision_nodes.platform.devices import DEVICE_KINDS
from vision_nodes.runners import registry
from vision_nodes.runners.base import RunnerConfig, RunnerError
from vision_nodes.pipeline import create_runner
from vision_nodes.runners.registry import Candidate, Selection, runner_class, select
from vision_nodes.tasks import (TASK_MAP, default_values, param_defaults, parse_manifest,
                                resolve_manifest, task_class)
from vision_nodes.limits import depth_range_problem
from vision_nodes.tasks.depth import DepthSpec


@pytest.fixture(scope='module')
def manifest():
    return resolve_manifest('yolov8n')


def test_every_reader_takes_the_table():
    """The manifest, the registry, the ONNX providers and the node's choices read one table."""
    from vision_nodes.runners import onnx_providers

    assert manifest_module.KNOWN_BACKENDS == tuple(BACKENDS)
    assert manifest_module.ARCHITECTURE_BACKENDS is ARCHITECTURE_BACKENDS
    assert ARCHITECTURE_BACKENDS['onnx'] == ('onnx', 'tensorrt', 'openvino')
    assert ARCHITECTURE_BACKENDS['openvino'] == ('openvino',)
    assert registry.BACKEND_MAP == {name: row.runner for name, row in BACKENDS.items()}
    assert registry.BACKEND_PRECISIONS == {n: r.precisions for n, r in BACKENDS.items()}
    assert sorted(AUTO_ORDER) == sorted(BACKENDS)
    assert tuple(onnx_providers.EXECUTION_PROVIDERS) == BACKENDS['onnx'].execution_providers
    pytest.importorskip('rclpy')
    from vision_nodes.ros.params.specs import SPECS

    assert SPECS['backend'].choices == BACKEND_CHOICES
    assert SPECS['precision'].choices == PRECISIONS
    assert SPECS['execution_provider'].choices == EXECUTION_PROVIDER_CHOICES


def test_runners_take_no_device_kind_the_table_does_not_name(manifest, tmp_path):
    """Each runner's device kinds are its row's (ONNX Runtime narrows them per provider)."""
    pytest.importorskip('onnxruntime')
    for name, row in BACKENDS.items():
        assert set(row.device_kinds) <= set(DEVICE_KINDS), name
        config = RunnerConfig(manifest=manifest, weights=manifest.weights_path(),
                              backend=name, cache=ArtifactCache(tmp_path))
        kinds = runner_class(name).device_kinds(config)
        assert set(kinds) <= set(row.device_kinds), name
        if name != 'onnx':
            assert tuple(kinds) == row.device_kinds, name


def test_select_gives_every_backend_in_auto_order_with_its_reason(manifest):
    """auto: every backend considered, in the table's order; the skipped ones say why."""
    only = replace(manifest, backends=('onnx', 'cpu'))
    log: list[str] = []
    selection = select([only], 'auto', log.append)
    assert [c.backend for c in selection.considered] == list(AUTO_ORDER)
    reasons = {c.backend: c.reason for c in selection.considered}
    for name in ('tensorrt', 'cuda', 'rocm', 'openvino'):
        assert reasons[name] == "not supported by model 'yolov8n'"
        assert f"backend auto: skipping '{name}': not supported by model 'yolov8n'" in log
    assert selection.candidates == [n for n in AUTO_ORDER if reasons[n] is None]
    assert set(selection.candidates) <= {'onnx', 'cpu'}
    assert registry.backend_report([only]) == reasons


def test_select_checks_a_named_backend_once(manifest):
    """A named backend is the one candidate, or a one-line refusal naming the valid ones."""
    assert select([manifest], 'onnx') == Selection('onnx', (Candidate('onnx'),))
    with pytest.raises(RunnerError, match='valid backends for it: onnx, cpu'):
        select([replace(manifest, backends=('onnx', 'cpu'))], 'openvino')
    nothing = replace(manifest, backends=('rocm',))
    if registry.runner_class('rocm').unavailable_reason('rocm'):
        with pytest.raises(RunnerError, match="backend auto found no usable backend for "
                                              "'yolov8n' on this machine: tensorrt: not "
                                              'supported'):
            select([nothing], 'auto')


def test_create_runner_loads_one_named_backend_only(manifest, tmp_path):
    """auto is decided before any runner exists: create_runner has no second auto loop."""
    config = RunnerConfig(manifest=manifest, weights=manifest.weights_path(), backend='auto',
                          cache=ArtifactCache(tmp_path))
    with pytest.raises(RunnerError, match="create_runner loads one named backend: decide "
                                          "'auto' with registry.select"):
        create_runner(config)


def test_the_pipeline_loads_a_selection_made_before(manifest, model_dir, engine_cache_dir,
                                                    monkeypatch):
    """A caller's Selection is loaded as it is, without deciding again."""
    pytest.importorskip('onnxruntime')

    def again(*_args, **_kwargs):
        raise AssertionError('the backend was decided a second time')

    monkeypatch.setattr(pipeline_module, 'select', again)
    log: list[str] = []
    chosen = Selection('auto', (Candidate('tensorrt', 'not here'), Candidate('onnx')))
    loaded = pipeline_module.build_pipelines([manifest], chosen, model_dir=str(model_dir),
                                             cache_dir=engine_cache_dir, log=log.append)
    try:
        assert loaded.backend == 'onnx' and loaded.models[0].runner.config.backend == 'onnx'
        assert "backend auto: chose 'onnx'" in log
    finally:
        loaded.close()


def test_the_manifest_thresholds_are_the_detect_parameter_defaults(manifest):
    """param_defaults: thresholds.confidence 0.6 gives confidence_threshold 0.6, and so on."""
    tuned = model_manifest(thresholds={'confidence': 0.6, 'iou': 0.3, 'max_detections': 7})
    assert param_defaults(tuned) == {**default_values(task_class('detect')),
                                     'confidence_threshold': 0.6, 'iou_threshold': 0.3,
                                     'max_detections': 7}
    assert param_defaults(model_manifest()) == default_values(task_class('detect'))


def test_every_task_gives_a_default_for_each_of_its_parameters(manifest):
    """param_defaults has exactly the task's spec names, each value valid for its spec."""
    depth = resolve_manifest('depth_anything_v2_small')
    for model in (manifest, depth):
        cls = task_class(model.task)
        defaults = param_defaults(model)
        assert list(defaults) == [spec.name for spec in cls.params], model.task
        for spec in cls.params:
            assert spec.validate(defaults[spec.name]) is None, spec.name
    assert param_defaults(depth) == default_values(task_class('depth'))


def test_a_task_parses_its_own_block():
    """depth's block is parsed by tasks/depth.py; other tasks' manifests may not carry it."""
    assert TASK_MAP['depth'].blocks == ('depth',) and TASK_MAP['detect'].blocks == ()
    data = {'name': 'd', 'task': 'depth', 'weights': 'w', 'architecture': 'transformers',
            'input_size': 518, 'backends': ['cpu'],
            'depth': {'kind': 'metric', 'max_depth': 20}}
    parsed = parse_manifest(data)
    assert parsed.block('depth') == DepthSpec('metric', 'depth', 20.0)
    with pytest.raises(ManifestError, match=r"field `depth`: only depth models have this "
                                            r"block \(task is 'detect'\)"):
        parse_manifest(dict(data, task='detect', architecture='ultralytics', input_size=64))
    with pytest.raises(ManifestError, match='field `depth.max_depth`: -1 is not positive'):
        parse_manifest(dict(data, depth={'kind': 'metric', 'max_depth': -1}))
    assert depth_range_problem(0) == '0 is not positive'


def test_the_table_refuses_a_half_added_row(monkeypatch):
    """A row whose precisions do not start with fp32, or a backend missing from auto, fails."""
    monkeypatch.setattr(backends, 'AUTO_ORDER', AUTO_ORDER[:-1])
    with pytest.raises(AssertionError, match='AUTO_ORDER must list every backend once'):
        backends._check_table()


def test_the_benchmark_takes_its_choices_from_the_table(monkeypatch):
    """bench_detect refuses a configuration naming no backend or precision of the table."""
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / 'benchmarks' / 'bench_detect.py'
    spec = importlib.util.spec_from_file_location('bench_detect_table', path)
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, bench)  # dataclasses look their module up
    spec.loader.exec_module(bench)
    assert bench.parse_config('openvino:int8').precision == 'int8'
    assert bench.parse_config('auto').precision == 'auto'
    with pytest.raises(SystemExit, match="bad configuration 'tpu': BACKEND is one of auto, "
                                         'cpu, cuda'):
        bench.parse_config('tpu')
    with pytest.raises(SystemExit, match='PRECISION one of auto, fp32, fp16, int8'):
        bench.parse_config('onnx:fp8')


def test_param_specs_default_to_the_manifest():
    """param_specs: the task's specs with the manifest's defaults, still validated."""
    from vision_nodes.tasks import param_specs

    specs = {spec.name: spec
             for spec in param_specs(model_manifest(thresholds={'confidence': 0.6}))}
    assert specs['confidence_threshold'].default == 0.6
    assert specs['confidence_threshold'].float_range == (0.0, 1.0)
    assert specs['iou_threshold'].default == 0.45 and specs['max_detections'].default == 300
    with pytest.raises(ValueError, match=r'confidence_threshold=1.5 is outside \[0.0, 1.0\]'):
        specs['confidence_threshold'].with_default(1.5)
