"""The node's own parameters (model, backend, QoS...), and specs → rcl descriptors.

Tasks declare their live parameters themselves (``Task.params``); this table holds the ones
that belong to the node whatever it runs. Kept apart from the node so the table in the README
and ``config/detect.yaml`` can be checked against it in tests.
"""

from __future__ import annotations

from typing import Any

from rcl_interfaces.msg import (FloatingPointRange, IntegerRange, ParameterDescriptor,
                                ParameterType)

from ..param_spec import ParamSpec
from ..runners.base import PRECISIONS
from ..runners.registry import BACKEND_CHOICES
from ..runners.onnx_runner import EXECUTION_PROVIDERS

QOS_RELIABILITY = ('best_effort', 'reliable')


def descriptor(spec: ParamSpec) -> ParameterDescriptor:
    """Build the rcl ParameterDescriptor (type, description, ranges) for declaration."""
    desc = ParameterDescriptor()
    desc.name = spec.name
    if isinstance(spec.default, list):
        desc.type = ParameterType.PARAMETER_STRING_ARRAY
    else:
        desc.type = {bool: ParameterType.PARAMETER_BOOL, int: ParameterType.PARAMETER_INTEGER,
                     float: ParameterType.PARAMETER_DOUBLE,
                     str: ParameterType.PARAMETER_STRING}[type(spec.default)]
    when = {'reload': 'Needs a reload: refused while active; deactivate and clean up, '
                      'then configure again.',
            'activate': 'Refused while active; used at the next activate.',
            'live': 'Takes effect on the next frame.'}[spec.applies]
    desc.description = f'{spec.description} {when}'
    if spec.choices:
        desc.additional_constraints = 'One of: ' + ', '.join(repr(c) for c in spec.choices)
    if spec.float_range:
        desc.floating_point_range = [FloatingPointRange(
            from_value=spec.float_range[0], to_value=spec.float_range[1], step=0.0)]
    if spec.int_range:
        desc.integer_range = [IntegerRange(
            from_value=spec.int_range[0], to_value=spec.int_range[1], step=1)]
    return desc


PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec('model', 'yolov8n',
              'Model manifest: a name under config/models (e.g. yolov8n) or a path to a '
              'manifest YAML file.'),
    ParamSpec('model_dir', '',
              'Folder that relative weights paths in the manifest resolve against. Empty: '
              '$VISION_NODES_MODEL_DIR, else the manifest\'s own folder.'),
    ParamSpec('backend', 'onnx',
              'Inference backend. cpu/cuda/rocm run PyTorch; onnx runs ONNX Runtime; auto '
              'tries tensorrt > cuda > rocm > openvino > onnx > cpu and keeps the first that '
              'loads.', choices=BACKEND_CHOICES),
    ParamSpec('execution_provider', '',
              'ONNX Runtime execution provider for backend onnx (empty = cpu). auto takes '
              'the best this ONNX Runtime build has (tensorrt > cuda > rocm > migraphx > '
              'coreml > directml > openvino > cpu), falling back when one fails to start.',
              choices=('',) + tuple(EXECUTION_PROVIDERS)),
    ParamSpec('device', '',
              "Device for GPU backends, e.g. 'cuda:0' or '1' (empty = first GPU; cpu for "
              'CPU backends).'),
    ParamSpec('precision', 'fp32', 'Inference precision.', choices=PRECISIONS),
    ParamSpec('engine_cache_dir', '',
              'Folder for exported artifacts (ONNX files, engines). Empty: '
              '$VISION_NODES_CACHE_DIR, else ~/.cache/vision_nodes/engines.'),
    ParamSpec('qos_reliability', 'reliable',
              'Reliability of the image subscription. reliable matches reliable publishers '
              "(rclcpp's default) and never loses a large image to a dropped fragment; "
              'best_effort also accepts best-effort cameras, but with stock Fast DDS settings '
              'it loses most multi-megabyte frames (use config/fastdds_large_images.xml).',
              choices=QOS_RELIABILITY, applies='activate'),
    ParamSpec('qos_depth', 1,
              'Queue depth of the image subscription (1 = always process the newest frame).',
              int_range=(1, 100), applies='activate'),
)

SPECS: dict[str, ParamSpec] = {spec.name: spec for spec in PARAMS}


def validate(name: str, value: Any) -> str | None:
    """Return None when ``value`` is acceptable for node parameter ``name``, else why not."""
    spec = SPECS.get(name)
    if spec is None:
        return None
    reason = spec.validate(value)
    if reason is None and name == 'model' and not value.strip():
        return 'model must name a manifest or a manifest file'
    return reason
