"""The node's parameters: names, defaults, descriptors (ranges, descriptions) and validation.

Kept apart from the node so the table in the README and ``config/detect.yaml`` can be checked
against it in tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rcl_interfaces.msg import (FloatingPointRange, IntegerRange, ParameterDescriptor,
                                ParameterType)

from ..runners.registry import BACKEND_CHOICES
from ..runners.base import PRECISIONS
from ..runners.onnx_runner import EXECUTION_PROVIDERS

QOS_RELIABILITY = ('best_effort', 'reliable')


@dataclass(frozen=True)
class ParamSpec:
    """One parameter: default, description, and constraints."""

    name: str
    default: Any
    description: str
    choices: tuple[str, ...] = ()
    float_range: tuple[float, float] | None = None
    int_range: tuple[int, int] | None = None
    #: 'reload': refused while active, used at the next configure.
    #: 'activate': refused while active, used at the next activate.
    #: 'live': takes effect on the next frame.
    applies: str = 'reload'

    def descriptor(self) -> ParameterDescriptor:
        """Build the rcl ParameterDescriptor (type, description, ranges) for declaration."""
        desc = ParameterDescriptor()
        desc.name = self.name
        desc.type = {bool: ParameterType.PARAMETER_BOOL, int: ParameterType.PARAMETER_INTEGER,
                     float: ParameterType.PARAMETER_DOUBLE,
                     str: ParameterType.PARAMETER_STRING}[type(self.default)]
        when = {'reload': 'Needs a reload: refused while active; deactivate and clean up, '
                          'then configure again.',
                'activate': 'Refused while active; used at the next activate.',
                'live': 'Takes effect on the next frame.'}[self.applies]
        desc.description = f'{self.description} {when}'
        if self.choices:
            desc.additional_constraints = 'One of: ' + ', '.join(repr(c) for c in self.choices)
        if self.float_range:
            desc.floating_point_range = [FloatingPointRange(
                from_value=self.float_range[0], to_value=self.float_range[1], step=0.0)]
        if self.int_range:
            desc.integer_range = [IntegerRange(
                from_value=self.int_range[0], to_value=self.int_range[1], step=1)]
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
              'ONNX Runtime execution provider for backend onnx (empty = cpu).',
              choices=('',) + tuple(EXECUTION_PROVIDERS)),
    ParamSpec('device', '',
              "Device for GPU backends, e.g. 'cuda:0' or '1' (empty = first GPU; cpu for "
              'CPU backends).'),
    ParamSpec('precision', 'fp32', 'Inference precision.', choices=PRECISIONS),
    ParamSpec('engine_cache_dir', '',
              'Folder for exported artifacts (ONNX files, engines). Empty: '
              '$VISION_NODES_CACHE_DIR, else ~/.cache/vision_nodes/engines.'),
    ParamSpec('confidence_threshold', 0.25,
              'Minimum class score for a detection to be published.',
              float_range=(0.0, 1.0), applies='live'),
    ParamSpec('iou_threshold', 0.45,
              'IoU above which non-maximum suppression drops the lower-scoring box of a '
              'class.', float_range=(0.0, 1.0), applies='live'),
    ParamSpec('max_detections', 300, 'Most detections published per image.',
              int_range=(1, 10000), applies='live'),
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
    """Return None when ``value`` is acceptable for ``name``, else the reason it is not.

    Ranges and types are also enforced by rclpy from the descriptors; this adds the choices
    and keeps the reasons readable.
    """
    spec = SPECS.get(name)
    if spec is None:
        return None
    if type(value) is not type(spec.default):
        return (f'{name} must be a {type(spec.default).__name__}, '
                f'got {type(value).__name__} {value!r}')
    if spec.choices and value not in spec.choices:
        shown = ', '.join(repr(c) for c in spec.choices)
        return f'{name}={value!r} is not one of {shown}'
    if spec.float_range and not spec.float_range[0] <= value <= spec.float_range[1]:
        return f'{name}={value} is outside [{spec.float_range[0]}, {spec.float_range[1]}]'
    if spec.int_range and not spec.int_range[0] <= value <= spec.int_range[1]:
        return f'{name}={value} is outside [{spec.int_range[0]}, {spec.int_range[1]}]'
    if name == 'model' and not value.strip():
        return 'model must name a manifest or a manifest file'
    return None
