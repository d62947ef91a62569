"""The ``device`` setting: one parser for every backend, and each backend's refusals.

A value means the same device whatever the backend; a backend refuses, before loading
anything, what it cannot honour, in one line naming the parameter, the value, the backend and
what it takes. Refusals are checked through ``create_runner`` with the real runtimes (they
come before any load, so they cost nothing); acceptances through each runner's own check.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from vision_nodes.artifacts.cache import ArtifactCache
from vision_nodes.limits import MAX_DEVICE_INDEX
from vision_nodes.tasks import resolve_manifest
from vision_nodes.platform.devices import DeviceError, parse_device
from vision_nodes.runners.base import RunnerConfig, RunnerError
from vision_nodes.pipeline import create_runner
from vision_nodes.runners.registry import runner_class


@pytest.mark.parametrize('spec,kind,index,vendor,openvino', [
    ('', 'default', None, '', None),
    ('  ', 'default', None, '', None),
    ('cpu', 'cpu', None, '', None),
    ('CPU', 'cpu', None, '', None),
    ('1', 'gpu', 1, '', None),
    ('cuda', 'gpu', None, 'cuda', None),
    ('cuda:2', 'gpu', 2, 'cuda', None),
    ('gpu:1', 'gpu', 1, 'gpu', None),
    ('GPU', 'gpu', None, 'gpu', None),
    ('GPU.1', 'gpu', 1, 'gpu', None),
    ('rocm:0', 'gpu', 0, 'rocm', None),
    ('npu', 'openvino', None, '', 'NPU'),
    ('auto', 'openvino', None, '', 'AUTO'),
    ('AUTO:gpu,cpu', 'openvino', None, '', 'AUTO:GPU,CPU'),
    ('hetero:GPU.1, CPU', 'openvino', None, '', 'HETERO:GPU.1,CPU'),
])
def test_one_parser_gives_every_backend_the_same_meaning(spec, kind, index, vendor, openvino):
    device = parse_device(spec)
    assert (device.kind, device.index, device.vendor) == (kind, index, vendor)
    assert (device.openvino.name if device.openvino else None) == openvino


@pytest.mark.parametrize('spec,problem', [
    ('garbage:-1', 'is not a device'),
    ('cuda:-1', 'is not a device'),
    ('cuda:0:1', 'is not a device'),
    ('GPU-1', 'is not a device'),
    ('AUTO:gpu;cpu', 'is not a device'),
    ('AUTO:', 'is not a device'),
    ('cpu;rm -rf /', 'is not a device'),
    ('²', 'is not a device'),
    ('x' * 5000, 'is not a device'),
    ('bad\nline', 'is not a device'),
    (str(MAX_DEVICE_INDEX + 1), f'a device index is at most {MAX_DEVICE_INDEX}'),
    ('cuda:' + '9' * 5000, f'a device index is at most {MAX_DEVICE_INDEX}'),
])
def test_values_that_name_no_device_are_one_line_errors(spec, problem):
    with pytest.raises(DeviceError) as info:
        parse_device(spec)
    message = str(info.value)
    assert problem in message and '\n' not in message and len(message) < 400


@pytest.fixture(scope='module')
def config(tmp_path_factory) -> RunnerConfig:
    manifest = resolve_manifest('yolov8n')
    return RunnerConfig(manifest=manifest, weights=manifest.weights_path(), backend='onnx',
                        cache=ArtifactCache(tmp_path_factory.mktemp('cache')), precision='fp32')


@pytest.mark.parametrize('backend,provider,device,takes', [
    ('onnx', '', 'garbage:-1', "is not a device: .*; backend 'onnx' \\(execution provider "
                               "cpu\\) takes '' \\(the default\\) or 'cpu'"),
    ('onnx', '', 'cuda:1', "backend 'onnx' \\(execution provider cpu\\) cannot use it; it "
                           "takes '' \\(the default\\) or 'cpu'"),
    ('onnx', 'cpu', 'npu', "execution provider cpu\\) cannot use it"),
    ('onnx', 'auto', 'cuda:0', "execution provider auto\\) cannot use it"),
    ('cpu', '', 'cuda:0', "backend 'cpu' cannot use it; it takes '' \\(the default\\) or "
                          "'cpu'"),
    ('cpu', '', 'AUTO', "backend 'cpu' cannot use it"),
    ('openvino', '', 'cuda:0', "backend 'openvino' cannot use a CUDA GPU; OpenVINO's GPUs "
                               "are 'GPU', 'GPU.1'"),
    ('openvino', '', 'garbage:-1', "is not a device: .*; backend 'openvino' takes '' \\(the "
                                   "default\\), 'cpu', a GPU .* or an OpenVINO device"),
])
def test_each_backend_refuses_what_it_cannot_honour_before_loading(config, backend, provider,
                                                                   device, takes):
    """`device: garbage:-1` on onnx used to load on the CPU, the value ignored."""
    if runner_class(backend).unavailable_reason(backend):
        pytest.skip(f'backend {backend} is not available here')
    bad = replace(config, backend=backend, execution_provider=provider, device=device)
    with pytest.raises(RunnerError, match=f'^parameter device {device!r}') as info:
        create_runner(bad)
    message = str(info.value)
    assert re.search(takes, message), message
    assert '\n' not in message and len(message) < 600


@pytest.mark.parametrize('backend,provider,device', [
    ('onnx', '', ''), ('onnx', '', 'cpu'), ('onnx', 'cpu', 'CPU'), ('onnx', 'auto', ''),
    ('onnx', 'cuda', 'cuda:1'), ('onnx', 'tensorrt', '2'), ('onnx', 'openvino', 'GPU.1'),
    ('onnx', 'openvino', 'AUTO:GPU,CPU'), ('onnx', 'coreml', ''),
    ('cpu', '', ''), ('cpu', '', 'cpu'), ('cuda', '', 'cuda:1'), ('rocm', '', '0'),
    ('tensorrt', '', ''), ('tensorrt', '', 'gpu:1'),
    ('openvino', '', ''), ('openvino', '', 'cpu'), ('openvino', '', 'gpu:1'),
    ('openvino', '', 'NPU'), ('openvino', '', 'auto'),
])
def test_each_backend_states_what_it_honours(config, backend, provider, device):
    """What a backend takes parses to a kind it states (whether it exists is the runtime's)."""
    accepted = replace(config, backend=backend, execution_provider=provider, device=device)
    assert runner_class(backend).check_device(accepted) == parse_device(device)


@pytest.mark.parametrize('provider,device', [
    ('cuda', 'cpu'), ('tensorrt', 'npu'), ('coreml', 'cpu'), ('coreml', '1'),
])
def test_execution_providers_refuse_what_they_cannot_honour(config, provider, device):
    with pytest.raises(RunnerError, match=f"parameter device '{device}': backend 'onnx' "
                                          f'\\(execution provider {provider}\\) cannot use it'):
        runner_class('onnx').check_device(replace(config, execution_provider=provider,
                                                  device=device))


def test_the_node_parameter_refuses_what_names_no_device():
    """`ros2 param set ... device garbage:-1` is refused whatever the backend."""
    pytest.importorskip('rclpy', reason='rclpy (ROS 2) is not installed')
    from vision_nodes.ros.params.specs import validate

    assert validate('device', 'cuda:1') is None and validate('device', '') is None
    reason = validate('device', 'garbage:-1')
    assert reason.startswith("device 'garbage:-1' is not a device: use ''")
