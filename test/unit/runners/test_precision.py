"""Precisions: one table, one check, refusals naming the valid ones, and what ``auto`` picks.

Also the CPU facts (``platform/cpu.py``) and device strings (``platform/devices.py``) that the
device-dependent choices rest on. A CPU without bf16 is faked (this one has it) by replacing
OpenVINO's capability answer; everything else runs the real runtimes.
"""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from vision_nodes.artifacts.cache import ArtifactCache
from vision_nodes.manifest import KNOWN_BACKENDS, ManifestError
from vision_nodes.tasks import parse_manifest, resolve_manifest
from vision_nodes.platform.cpu import cpu_info, parse_cpuinfo
from vision_nodes.platform.devices import DeviceError, openvino_device
from vision_nodes.runners.base import PRECISIONS, RunnerConfig, RunnerError
from vision_nodes.pipeline import create_runner
from vision_nodes.runners.registry import (BACKEND_PRECISIONS, artifact_request, check_manifest,
                                           check_precision, resolve, resolve_precision,
                                           valid_precisions)


@pytest.fixture(scope='module')
def manifest():
    return resolve_manifest('yolov8n')


@pytest.fixture
def config(manifest, tmp_path) -> RunnerConfig:
    return RunnerConfig(manifest=manifest, weights=manifest.weights_path(), backend='openvino',
                        cache=ArtifactCache(tmp_path))


def test_one_table_for_every_backend():
    """Every backend has its row; every value is a known precision; fp32 runs everywhere."""
    assert set(BACKEND_PRECISIONS) == set(KNOWN_BACKENDS)
    for backend, precisions in BACKEND_PRECISIONS.items():
        assert precisions[0] == 'fp32' and set(precisions) <= set(PRECISIONS[1:]), backend
    assert BACKEND_PRECISIONS['openvino'] == ('fp32', 'fp16', 'int8')


@pytest.mark.parametrize('backend,precision,message', [
    ('onnx', 'int8', r"backend 'onnx' cannot run precision 'int8' \(valid for it: auto, fp32"),
    ('cpu', 'fp16', r"backend 'cpu' cannot run precision 'fp16' \(valid for it: auto, fp32\)"),
    ('cpu', 'int8', r"backend 'cpu' cannot run precision 'int8'"),
    ('cuda', 'int8', r"backend 'cuda' cannot run precision 'int8' \(valid for it: auto, fp32, "
                     r'fp16\)'),
])
def test_table_refusals_name_the_valid_ones(backend, precision, message):
    with pytest.raises(RunnerError, match=message):
        check_precision(backend, precision)


def test_manifest_restriction_is_checked_in_the_same_place():
    """A manifest's `precisions` narrows the table: the INT8 IR refuses fp32 and fp16."""
    ir = resolve_manifest('yolov8n_int8_openvino')
    assert ir.precisions == ('int8',)
    check_precision('openvino', 'int8', ir)
    for precision in ('fp32', 'fp16'):
        with pytest.raises(RunnerError, match=rf"runs only precision int8 .*not '{precision}' "
                                              r"\(valid on 'openvino': auto, int8\)"):
            check_precision('openvino', precision, ir)
    assert valid_precisions('openvino', ir) == ('int8',)


def test_backends_that_cannot_run_a_manifests_precisions_are_refused_at_load(manifest):
    """A manifest listing onnx but only int8: refused before anything loads, naming the fix."""
    bad = replace(manifest, precisions=('int8',), backends=('onnx', 'openvino'))
    with pytest.raises(RunnerError, match=r"lists backend 'onnx', which cannot run any of its "
                                          r'precisions \(int8; .onnx. runs fp32, fp16\)'):
        check_manifest(bad)
    with pytest.raises(RunnerError, match="lists backend 'onnx'"):
        create_runner(RunnerConfig(manifest=bad, weights=manifest.weights_path(),
                                   backend='openvino', cache=ArtifactCache('/nonexistent')))
    for name in ('yolov8n', 'yolov8n_int8_openvino'):
        check_manifest(resolve_manifest(name))


def test_manifest_precisions_field_is_validated():
    base = {'name': 'm', 'task': 'detect', 'weights': 'm.pt', 'input_size': 640,
            'backends': ['openvino']}
    assert parse_manifest({**base, 'precisions': ['int8', 'fp32', 'int8']}).precisions == (
        'int8', 'fp32')
    assert parse_manifest(base).precisions is None
    with pytest.raises(ManifestError, match=r"`precisions\[1\]`: unknown precision 'fp64'"):
        parse_manifest({**base, 'precisions': ['fp32', 'fp64']})
    with pytest.raises(ManifestError, match='`precisions`: must name at least one'):
        parse_manifest({**base, 'precisions': []})
    with pytest.raises(ManifestError, match='`calibration_dir`: expected a folder path'):
        parse_manifest({**base, 'calibration_dir': 3})
    with pytest.raises(ManifestError, match=r'`backends`: onnx cannot run .openvino. weights'):
        parse_manifest({**base, 'weights': 'm.xml', 'backends': ['onnx']})
    assert parse_manifest({**base, 'weights': 'm.xml'}).architecture == 'openvino'


# ---------------------------------------------------------------------- OpenVINO on this CPU
@pytest.fixture
def ov():
    return pytest.importorskip('openvino', reason='OpenVINO is not installed')


def test_auto_is_the_fastest_without_calibration(config, ov):
    """auto = fp16 (bf16) on a CPU OpenVINO says has BF16, else fp32; logged; never int8."""
    caps = ov.Core().get_property('CPU', 'OPTIMIZATION_CAPABILITIES')
    expected = 'fp16' if 'BF16' in caps else 'fp32'
    log: list[str] = []
    resolved = resolve_precision(replace(config, precision='auto'), log.append)
    assert resolved.precision == expected
    assert log == [f"precision auto: '{expected}' on backend 'openvino' (fastest without "
                   'calibration data on this device)']
    assert resolve_precision(replace(config, backend='onnx', precision='auto')).precision == \
        'fp32'
    assert resolve_precision(replace(config, backend='cpu', precision='auto')).precision == \
        'fp32'


def test_auto_follows_a_manifest_that_only_allows_int8(config, ov):
    ir = resolve_manifest('yolov8n_int8_openvino')
    log: list[str] = []
    resolved = resolve_precision(replace(config, manifest=ir, precision='auto'), log.append)
    assert resolved.precision == 'int8'
    assert "the model's first allowed one" in log[0]


@pytest.fixture
def cpu_without_bf16(monkeypatch, ov):
    """Fake the one fact this machine cannot show: a CPU OpenVINO gives no fast reduced type."""
    from vision_nodes.platform import openvino as ov_facts

    monkeypatch.setattr(ov_facts, 'fast_reduced_type', lambda family: None)


def test_fp16_on_a_cpu_without_bf16_is_refused(config, cpu_without_bf16):
    with pytest.raises(RunnerError, match=r"cannot run precision 'fp16' here: the CPU .* has no "
                                          r'native bf16 .*\(valid here: auto, fp32\)'):
        check_precision('openvino', 'fp16', config.manifest, replace(config, precision='fp16'))
    assert resolve_precision(replace(config, precision='auto')).precision == 'fp32'


def test_int8_needs_calibration_unless_prequantized(config, tmp_path, ov):
    with pytest.raises(RunnerError, match='needs calibration images: set the `calibration_dir`'):
        check_precision('openvino', 'int8', config.manifest, replace(config, precision='int8'))
    check_precision('openvino', 'int8', config.manifest,
                    replace(config, precision='int8', calibration_dir=str(tmp_path)))
    ir = resolve_manifest('yolov8n_int8_openvino')
    check_precision('openvino', 'int8', ir, replace(config, manifest=ir, precision='int8'))


def test_a_refused_precision_never_loads(config, monkeypatch, ov):
    """The check runs before the runner is created: nothing is exported or compiled."""
    from vision_nodes.runners import openvino_runner

    def no_load(self):
        raise AssertionError('a refused precision reached the runner')

    monkeypatch.setattr(openvino_runner.OpenVinoRunner, '_load', no_load)
    with pytest.raises(RunnerError, match="'openvino' cannot run precision 'int8' here"):
        create_runner(replace(config, precision='int8'))
    assert not any(config.cache.root.iterdir())  # nothing exported


def test_device_and_precision_are_decided_before_the_runner(config, monkeypatch, ov):
    """registry.resolve parses the device, resolves auto and plans the inference types with
    no runner created; the request names the artifact the pipeline asks the chain for."""
    from vision_nodes.platform.openvino import fast_reduced_type
    from vision_nodes.runners import openvino_runner

    def no_runner(self, config):
        raise AssertionError('a runner was created while deciding')

    monkeypatch.setattr(openvino_runner.OpenVinoRunner, '__init__', no_runner)
    log: list[str] = []
    resolved = resolve(replace(config, precision='auto', device='cpu'), log.append)
    fastest = fast_reduced_type('CPU')
    assert resolved.precision == ('fp16' if fastest else 'fp32')
    plan = resolved.device_facts
    assert plan.device.name == 'CPU' and plan.inference_types == {'CPU': fastest or 'f32'}
    assert plan.properties()['INFERENCE_PRECISION_HINT'] == (fastest or 'f32')
    assert plan.properties()['ENABLE_CPU_PINNING'] is False and not plan.compile_cache
    request = artifact_request(replace(resolved, precision='int8'))
    assert (request.kind, request.precision, request.compile_cache) == \
        ('openvino', 'int8', False)
    with pytest.raises(RunnerError, match=r"OpenVINO device 'GPU\.7' is not available"):
        resolve(replace(config, device='GPU.7'))


def test_a_runner_without_its_artifact_says_how_to_create_it(config, ov):
    """The runner loads what it is handed: created bare, it names the one way to create it."""
    from vision_nodes.runners.openvino_runner import OpenVinoRunner

    with pytest.raises(RunnerError, match='create it through vision_nodes.pipeline'):
        OpenVinoRunner(config).load()


# ---------------------------------------------------------------------- platform facts
SAMPLE = '''processor	: 0
vendor_id	: GenuineIntel
model name	: Intel(R) Xeon(R) Platinum 8480+
physical id	: 0
core id		: 0
flags		: fpu sse avx2 avx512f avx512_bf16 avx512_vnni amx_bf16 amx_tile amx_int8

processor	: 1
model name	: Intel(R) Xeon(R) Platinum 8480+
physical id	: 0
core id		: 0
flags		: fpu sse avx2 avx512f avx512_bf16 avx512_vnni amx_bf16 amx_tile amx_int8

processor	: 2
model name	: Intel(R) Xeon(R) Platinum 8480+
physical id	: 0
core id		: 1
flags		: fpu sse avx2 avx512f avx512_bf16 avx512_vnni amx_bf16 amx_tile amx_int8
'''


def test_parse_cpuinfo_reads_flags_and_cores():
    info = parse_cpuinfo(SAMPLE, logical_cores=3)
    assert info.model == 'Intel(R) Xeon(R) Platinum 8480+'
    assert info.physical_cores == 2 and info.logical_cores == 3
    assert info.bf16 and info.amx and info.avx512 and info.vnni
    old = parse_cpuinfo(SAMPLE.replace('avx512_bf16', '').replace('amx_bf16', '')
                        .replace('amx_tile', '').replace('avx512_vnni', ''), 3)
    assert not old.bf16 and not old.amx and not old.vnni and old.avx512
    assert parse_cpuinfo('', 1).flags == frozenset() and not parse_cpuinfo('', 1).bf16


def test_cpu_info_of_this_machine():
    info = cpu_info()
    assert info.logical_cores == len(os.sched_getaffinity(0))
    text = open('/proc/cpuinfo').read()
    assert info.bf16 == ('avx512_bf16' in text or 'amx_bf16' in text)
    assert set(info.describe()) == {'cpu', 'logical_cores', 'physical_cores', 'avx512', 'bf16',
                                    'amx', 'vnni'}


@pytest.mark.parametrize('spec,name,virtual,candidates', [
    ('', 'CPU', '', ('CPU',)),
    ('cpu', 'CPU', '', ('CPU',)),
    ('gpu:1', 'GPU.1', '', ('GPU.1',)),
    ('GPU.0', 'GPU.0', '', ('GPU.0',)),
    ('npu', 'NPU', '', ('NPU',)),
    ('auto', 'AUTO', 'AUTO', ()),
    ('AUTO:gpu,cpu', 'AUTO:GPU,CPU', 'AUTO', ('GPU', 'CPU')),
    ('hetero:GPU.1, CPU', 'HETERO:GPU.1,CPU', 'HETERO', ('GPU.1', 'CPU')),
])
def test_openvino_device(spec, name, virtual, candidates):
    device = openvino_device(spec)
    assert (device.name, device.virtual, device.candidates) == (name, virtual, candidates)


@pytest.mark.parametrize('spec', ['cuda:0:1', 'GPU-1', 'AUTO:gpu;cpu', '../x'])
def test_bad_openvino_devices(spec):
    with pytest.raises(DeviceError, match='is not a device'):
        openvino_device(spec)


# ---------------------------------------------------------------------- int8's float layers
_FLAGS = {'amx': 'avx512f amx_tile amx_bf16 amx_int8', 'avx512_bf16': 'avx512f avx512_bf16',
          'avx512': 'avx512f avx512_vnni', 'avx2': 'avx2 fma', 'none': ''}


def _cpu(kind: str):
    return parse_cpuinfo(f'model name : faked {kind}\nflags : {_FLAGS[kind]}\n', 2)


@pytest.mark.parametrize('kind,expected', [('amx', 'bf16'), ('avx512_bf16', 'bf16'),
                                           ('avx512', 'f32'), ('avx2', 'f32'),
                                           ('none', 'f32')])
def test_int8_float_layers_run_bf16_only_where_the_cpu_has_it(kind, expected):
    from vision_nodes.platform.cpu import int8_float_type

    assert int8_float_type(_cpu(kind)) == expected


@pytest.mark.parametrize('kind', ['amx', 'avx2'])
def test_the_openvino_runner_asks_for_that_type_and_fp32_stays_f32(config, monkeypatch, ov,
                                                                   model_dir, kind):
    """The CPU facts are faked through platform/cpu.py's API; OpenVINO itself is real (on a
    CPU without bf16 it computes f32 whatever is asked, so the request is what is checked)."""
    from vision_nodes.runners import openvino_plan

    monkeypatch.setattr(openvino_plan, 'cpu_info', lambda: _cpu(kind))
    ir = resolve_manifest('yolov8n_int8_openvino')
    int8 = create_runner(replace(config, manifest=ir, weights=ir.weights_path(),
                                 precision='int8'))
    fp32 = create_runner(replace(config, precision='fp32'))
    try:
        float_type = 'bf16' if kind == 'amx' else 'f32'
        assert int8.describe()['inference_type'] == f'int8 in the quantized layers, ' \
            f'{float_type} elsewhere'
        assert fp32.describe()['inference_type'] == 'f32'
        assert fp32._properties['INFERENCE_PRECISION_HINT'] == 'f32'  # what is compiled
    finally:
        int8.unload()
        fp32.unload()
