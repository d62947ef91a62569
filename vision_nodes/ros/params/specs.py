"""The node's own parameters (model, backend, QoS...), and specs → rcl descriptors.

Tasks declare their live parameters themselves (``Task.params``); this table holds the ones
that belong to the node whatever it runs. Kept apart from the node so the table in the README
and ``config/detect.yaml`` can be checked against it in tests.
"""

from __future__ import annotations

from typing import Any, Callable

from rcl_interfaces.msg import (FloatingPointRange, IntegerRange, ParameterDescriptor,
                                ParameterType)

from ...limits import MAX_BATCH, MAX_BATCH_WINDOW_MS, MAX_CAMERAS
from ...param_spec import ParamSpec
from ...platform.devices import DeviceError, parse_device
from ...runners.base import PRECISIONS
from ...runners.onnx_runner import EXECUTION_PROVIDERS
from ...runners.registry import BACKEND_CHOICES
from ...text import clip
from ..process.compat import parameter_overrides

QOS_RELIABILITY = ('auto', 'reliable', 'best_effort')
IMAGE_TRANSPORTS = ('raw', 'compressed')


def descriptor(spec: ParamSpec, name: str | None = None) -> ParameterDescriptor:
    """Build the rcl ParameterDescriptor (type, description, ranges) for declaration."""
    desc = ParameterDescriptor()
    desc.name = name or spec.name
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
              'manifest YAML file. Used when models is empty.'),
    ParamSpec('models', [],
              'Several models in one node: a list of manifest names or paths (non-empty '
              'overrides model). They share the image subscription, the conversion of each '
              'frame and one backend; their outputs and live parameters are namespaced by '
              'model name (<name>/detections, <name>.confidence_threshold).', max_length=8),
    ParamSpec('model_dir', '',
              'Folder that relative weights paths in the manifest resolve against. Empty: '
              '$VISION_NODES_MODEL_DIR, else the manifest\'s own folder.'),
    ParamSpec('backend', 'auto',
              'Inference backend for every model of the node. cpu/cuda/rocm run PyTorch; '
              'onnx runs ONNX Runtime; openvino and tensorrt their runtimes; auto tries '
              'tensorrt > cuda > rocm > openvino > onnx > cpu among the backends every model '
              'supports on this machine and keeps the first that loads. A value the current '
              'models cannot use is reset to the best valid one (see strict_backend).',
              choices=BACKEND_CHOICES),
    ParamSpec('strict_backend', False,
              'true: a backend the current models cannot use fails configure instead of '
              'being reset to the best valid one.'),
    ParamSpec('execution_provider', '',
              'ONNX Runtime execution provider for backend onnx (empty = cpu). auto takes '
              'the best this ONNX Runtime build has (tensorrt > cuda > rocm > migraphx > '
              'coreml > directml > openvino > cpu), falling back when one fails to start.',
              choices=('',) + tuple(EXECUTION_PROVIDERS)),
    ParamSpec('device', '',
              "Device, read the same way by every backend: '' (the backend's default: the "
              "first GPU, OpenVINO's CPU), 'cpu', a GPU by index ('cuda', 'cuda:1', '1', "
              "'gpu:1'), or an OpenVINO device ('GPU.1', 'NPU', 'AUTO:GPU,CPU'). A backend "
              "refuses what it cannot use: cpu takes '' or 'cpu'; cuda, rocm and tensorrt a "
              "GPU; onnx what its execution provider takes (cpu: '' or 'cpu'; GPU providers: "
              'a GPU index, their device_id; openvino: any); openvino any but a CUDA/ROCm '
              'name.'),
    ParamSpec('precision', 'auto',
              'Inference precision. fp32 is exact; fp16 is the device\'s fast reduced '
              'precision (bf16 on CPUs that have it); int8 needs calibration images or a '
              'pre-quantized model; auto picks the fastest one that needs no calibration '
              'and, measured against fp32, stays within the manifest\'s accuracy budget.',
              choices=PRECISIONS),
    ParamSpec('calibration_dir', '',
              'Folder of calibration images for precision int8 (empty: the manifest\'s '
              'calibration_dir).'),
    ParamSpec('engine_cache_dir', '',
              'Folder for exported artifacts (ONNX files, engines). Empty: '
              '$VISION_NODES_CACHE_DIR, else ~/.cache/vision_nodes/engines.'),
    ParamSpec('use_torch_compile', True,
              'On cuda/rocm, run non-Ultralytics PyTorch models through torch.compile, '
              'compiled and warmed up at configure (falls back to eager on failure).'),
    ParamSpec('use_cuda_graphs', True,
              'On cuda/rocm, replay eager PyTorch models as CUDA graphs, captured per input '
              'shape (falls back to eager, with a warning, when a model cannot be captured).'),
    ParamSpec('image_transport', 'raw',
              'raw subscribes image (sensor_msgs/Image); compressed subscribes '
              'image/compressed (sensor_msgs/CompressedImage, JPEG or PNG).',
              choices=IMAGE_TRANSPORTS, applies='activate'),
    ParamSpec('image_topics', [],
              'Several cameras in one node: a list of image topics (empty: the one image '
              'input). Each camera has its own subscription (raw or compressed, QoS '
              'auto-matched per topic), dropping and diagnostics entry; its results go to '
              "its topic's namespace (/front/image_raw gives /front/detections).",
              max_length=MAX_CAMERAS),
    ParamSpec('output_namespaces', [],
              'With image_topics: one output namespace per camera, in the same order (empty: '
              "each image topic's own namespace).", max_length=MAX_CAMERAS),
    ParamSpec('batch_window', 5.0,
              'With image_topics: milliseconds to wait, after a camera\'s frame arrives, for '
              'the other cameras\' frames to run with it in one batch (0 = run what has '
              'arrived, no waiting). Unused where frames run side by side (OpenVINO on a CPU).',
              float_range=(0.0, MAX_BATCH_WINDOW_MS), applies='live'),
    ParamSpec('max_batch', 0,
              'With image_topics: most frames one inference runs (0 = the number of '
              'cameras). The models are loaded for batches up to it; OpenVINO on a CPU runs up '
              'to that many frames side by side instead, at most one per core.',
              int_range=(0, MAX_BATCH)),
    ParamSpec('qos_reliability', 'auto',
              'Reliability of the image subscription. auto subscribes with a QoS that every '
              'publisher on the topic can reach (reliable when all are reliable, else best '
              'effort) and re-subscribes when a publisher appears that it cannot reach. '
              'best_effort with stock Fast DDS loses most multi-megabyte frames: use '
              'config/fastdds_large_images.xml.',
              choices=QOS_RELIABILITY, applies='activate'),
    ParamSpec('qos_depth', 1,
              'Queue depth of the image subscription (1 = always process the newest frame).',
              int_range=(1, 100), applies='activate'),
    ParamSpec('lazy', False,
              'true: take images only while something subscribes to one of the outputs, so '
              'an idle robot spends no compute on the node.', applies='live'),
    ParamSpec('expected_rate', 0.0,
              'Frames per second the node should process; diagnostics warn below 90 % of '
              'it (0 = no check).', float_range=(0.0, 1000.0), applies='live'),
    ParamSpec('max_latency', 0.0,
              'Seconds; diagnostics warn when the p95 latency from image stamp to publish '
              'passes it (0 = no check).', float_range=(0.0, 60.0), applies='live'),
    ParamSpec('no_image_timeout', 5.0,
              'Seconds without an image, once active, after which diagnostics report an '
              'error with the likely cause (QoS, topic name; 0 = no check).',
              float_range=(0.0, 3600.0), applies='live'),
)

#: Set by the node at configure, for ``ros2 param get``; a user's set is refused.
REPORTS: tuple[ParamSpec, ...] = (
    ParamSpec('backend_in_use', '',
              'The backend the node runs its models on (set at configure; empty while '
              'unconfigured). Read only.', applies='live'),
    ParamSpec('precision_in_use', '',
              'The type the node\'s models compute in: fp32, bf16 (fp16 on a CPU with '
              'native bf16), fp16 or int8 (set at configure). Read only.',
              applies='live'),
)

SPECS: dict[str, ParamSpec] = {spec.name: spec for spec in PARAMS + REPORTS}


def validate(name: str, value: Any) -> str | None:
    """Return None when ``value`` is acceptable for node parameter ``name``, else why not."""
    spec = SPECS.get(name)
    if spec is None:
        return None
    reason = spec.validate(value)
    if reason is None and name == 'model' and not value.strip():
        return 'model must name a manifest or a manifest file'
    if reason is None and name == 'device':
        try:
            parse_device(value)
        except DeviceError as exc:
            return str(exc)
    if reason is None and name == 'models':
        names = [v.strip() for v in value if v.strip()]
        if len(set(names)) != len(names):
            return 'models lists a manifest twice'
    if reason is None and name in ('image_topics', 'output_namespaces'):
        from ..inputs.camera_names import check_names

        return check_names(name, value)
    return reason


def coerce(spec: ParamSpec, value: Any) -> Any:
    """Read an integer written where a number is expected (``confidence: 1``) as a float."""
    if isinstance(spec.default, float) and isinstance(value, int) and \
            not isinstance(value, bool):
        return float(value)
    return value


def declare(node: Any, spec: ParamSpec, name: str | None = None,
            check: Callable[[str, Any], str | None] | None = None) -> str | None:
    """Declare ``spec`` on ``node`` (as ``name``); return why its start-up value was refused.

    rclpy raises, and the process ends with a traceback, when a parameters file or ``-p``
    gives a value of the wrong type or out of range. Here the parameter is declared with its
    default and the value from the command line or file (the override) is checked with the
    same rules as a later ``ros2 param set``: a valid one is set, an invalid one is left out
    and the reason returned (one line, naming the parameter), so the node comes up and can
    say what to fix.
    """
    from rclpy.parameter import Parameter

    name = name or spec.name
    override = None if spec in REPORTS else parameter_overrides(node).get(name)
    if spec.default == []:
        node.declare_parameter(name, Parameter.Type.STRING_ARRAY, descriptor(spec, name),
                               ignore_override=True)
    else:
        node.declare_parameter(name, spec.default, descriptor(spec, name),
                               ignore_override=True)
    if override is None or override.type_ == Parameter.Type.NOT_SET:
        return None
    value = coerce(spec, override.value)
    if isinstance(value, (list, tuple)) and spec.default == [] and \
            all(isinstance(v, str) for v in value):
        value = list(value)
    reason = (check or (lambda _n, v: spec.validate(v)))(name, value)
    if reason is None:
        try:
            result = node.set_parameters([Parameter(name, value=value)])[0]
        except Exception as exc:  # noqa: BLE001 - rclpy's own type and range checks
            return f'parameter {name}: {clip(str(exc))}'
        if result.successful:
            return None
        reason = result.reason
    return f'parameter {name}: {clip(reason)}'
