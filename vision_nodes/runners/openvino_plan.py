"""What the ``openvino`` backend will run as, decided before its runner exists.

The registry asks this module what ``precision: auto`` means here, whether a precision can
run on the chosen device, and for the :class:`OpenVinoPlan`: the parsed device, checked
against this machine, and the compile settings. ``precision`` decides
``INFERENCE_PRECISION_HINT``: fp32 is pinned to f32 (OpenVINO would otherwise pick bf16 on
CPUs that have it), fp16 is the device's fast reduced type (bf16 on such CPUs, f16 on GPUs
and NPUs), int8 runs a quantized IR. The settings are latency-oriented: one stream, one
infer request, OpenVINO's ``LATENCY`` hint (all cores on one request).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..platform import openvino as facts
from ..platform.cpu import cpu_info, int8_float_type
from ..platform.devices import DeviceError, OpenVinoDevice, openvino_device
from .base import Runner, RunnerConfig, RunnerError

#: INFERENCE_PRECISION_HINT for fp32 on every device.
EXACT_TYPE = 'f32'
#: Devices whose compilation takes long enough (GPU kernels) to keep compiled blobs in
#: OpenVINO's model cache (``CACHE_DIR``, inside the engine cache). A CPU compile of these
#: models is about as quick as reading a cached blob.
COMPILE_CACHE_FAMILIES = ('GPU', 'NPU')


@dataclass(frozen=True)
class OpenVinoPlan:
    """The device to compile for, the device types it runs on and their inference types."""

    device: OpenVinoDevice
    #: Device type -> INFERENCE_PRECISION_HINT at the resolved precision.
    inference_types: dict[str, str] = field(default_factory=dict)
    #: Requests run side by side: on a CPU with batches of several cameras' frames, one per
    #: frame up to the cores (:func:`cpu_streams`); else 1 (one request using every core).
    streams: int = 1

    @property
    def families(self) -> list[str]:
        """Device types the model may run on."""
        return list(self.inference_types)

    @property
    def compile_cache(self) -> bool:
        """Whether compiled blobs are worth keeping (a GPU or NPU compiles for long)."""
        return any(f in COMPILE_CACHE_FAMILIES for f in self.inference_types)

    def inference_words(self) -> str:
        """Return the inference type(s), as logs and ``describe()`` say them."""
        if self.device.virtual:
            return ', '.join(f'{f}: {t}' for f, t in self.inference_types.items())
        return self.inference_types[OpenVinoDevice.family(self.device.name)]

    def properties(self, cache_dir: Any = None, streams: int = 1) -> dict[str, Any]:
        """Compile settings: one stream, one request using all cores, the precision's type.

        With ``streams`` > 1 (:attr:`streams`: a CPU serving several cameras) that many
        streams share the cores, each running one frame.

        On a CPU the inference threads are not pinned to cores: a robot's CPU also runs the
        camera driver, DDS and other nodes, and a pinned thread waits for its busy core
        instead of moving (docs/backends.md, OpenVINO settings).
        """
        per_device = {f: {'INFERENCE_PRECISION_HINT': t} for f, t in self.inference_types.items()}
        if 'CPU' in per_device:
            per_device['CPU']['ENABLE_CPU_PINNING'] = False
        props: dict[str, Any] = {'PERFORMANCE_HINT': 'LATENCY'}
        if self.device.virtual:
            props['DEVICE_PROPERTIES'] = {f: {**p, 'PERFORMANCE_HINT': 'LATENCY',
                                              'NUM_STREAMS': 1} for f, p in per_device.items()}
        else:
            props.update(per_device[OpenVinoDevice.family(self.device.name)])
            props['NUM_STREAMS'] = streams
            if streams > 1:
                props['PERFORMANCE_HINT'] = 'THROUGHPUT'
        if cache_dir is not None and self.compile_cache:
            props['CACHE_DIR'] = str(cache_dir)
        return props


def _device(config: RunnerConfig) -> OpenVinoDevice:
    Runner.check_device(config)  # the kinds of the backend table's row
    try:
        return openvino_device(config.device)
    except DeviceError as exc:
        raise RunnerError(str(exc)) from None


def auto_precision(config: RunnerConfig) -> str:
    """fp16 when every device this may run on has a fast reduced type, else fp32."""
    families = facts.families(_device(config))
    if families and all(facts.fast_reduced_type(f) for f in families):
        return 'fp16'
    return 'fp32'


def precision_unavailable(config: RunnerConfig) -> str | None:
    """None when ``config.precision`` can run on ``config``'s device, else why not."""
    if config.precision == 'fp16':
        for family in facts.families(_device(config)):
            if facts.fast_reduced_type(family) is None:
                if family == 'CPU':
                    return (f'the CPU ({cpu_info().model}) has no native bf16 (AVX-512 '
                            'BF16 or AMX) or fp16 arithmetic; emulated it would be slower '
                            'than fp32')
                return f'OpenVINO device {family} has no fast fp16'
    if config.precision == 'int8' and config.manifest.architecture != 'openvino' \
            and not config.calibration_dir:
        return ('int8 quantizes the model on first use and needs calibration images: set '
                'the `calibration_dir` parameter or manifest field to a folder of typical '
                'frames')
    return None


def inference_type(precision: str, family: str) -> str:
    """INFERENCE_PRECISION_HINT for one device type at ``precision`` (resolved, not auto)."""
    if precision == 'fp32':
        return EXACT_TYPE
    if precision == 'int8' and family == 'CPU':  # bf16 where native (platform/cpu.py)
        return int8_float_type(cpu_info())
    # fp16, and the float layers of an int8 model on GPUs and NPUs.
    return facts.fast_reduced_type(family) or EXACT_TYPE


def plan(config: RunnerConfig) -> OpenVinoPlan:
    """Return the device (checked against this machine) and its types at the resolved precision."""
    device = _device(config)
    try:
        facts.check_available(device)
    except DeviceError as exc:
        raise RunnerError(str(exc)) from None
    families = facts.families(device)
    return OpenVinoPlan(device, {f: inference_type(config.precision, f) for f in families},
                        cpu_streams(config, families, device.virtual))


def cpu_streams(config: RunnerConfig, families: list[str], virtual: bool) -> int:
    """Return the streams for a CPU running batches: one per frame, at most one per core.

    On a CPU a dynamic batch axis makes every request slower and one request does not keep
    every core busy; a batch's frames run faster as single-frame requests side by side on
    streams of their own (docs/benchmarks.md, several cameras). 1 where ``max_batch`` is 1,
    on GPUs (one batched request) and on virtual devices.
    """
    if virtual or list(families) != ['CPU'] or config.manifest.max_batch <= 1:
        return 1
    return max(1, min(int(config.manifest.max_batch), cpu_info().logical_cores))


def artifact_options(config: RunnerConfig) -> dict[str, bool]:
    """Return the artifact options: compiled blobs kept where compiling is long (GPU, NPU)."""
    return {'compile_cache': config.device_facts.compile_cache}
