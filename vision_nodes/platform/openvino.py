"""Facts OpenVINO reports: its devices, which reduced types run fast, what a model holds.

One ``openvino.Core`` serves the process (it loads device plugins lazily). The device facts
decide, before any runner exists, what ``precision`` and ``device`` mean on the ``openvino``
backend (:mod:`vision_nodes.runners.openvino_plan`); the artifact chain reads a model's facts
(quantized, dynamic shape) to decide on int8, and the runner reads models and compiles them
with the same core.
"""

from __future__ import annotations

from typing import Any

from ..text import clip
from .devices import DeviceError, OpenVinoDevice

_core_instance: Any = None


def core() -> Any:
    """Return the process's ``openvino.Core``, created on first use."""
    global _core_instance
    if _core_instance is None:
        import openvino as ov

        _core_instance = ov.Core()
    return _core_instance


def fast_reduced_type(family: str) -> str | None:
    """Return the device's fast reduced inference type ('bf16', 'f16'), or None.

    A CPU counts only with native support (OpenVINO lists BF16 for AVX-512 BF16 / AMX, FP16
    for ARM CPUs with fp16 arithmetic); emulated reduced precision is slower than f32.
    """
    try:
        caps = set(core().get_property(family, 'OPTIMIZATION_CAPABILITIES'))
    except RuntimeError:
        return None
    if family == 'CPU' and 'BF16' in caps:
        return 'bf16'
    if 'FP16' in caps:
        return 'f16'
    return None


def families(device: OpenVinoDevice) -> list[str]:
    """Device types a (possibly virtual) device may run on."""
    names = device.candidates or tuple(core().available_devices)
    return list(dict.fromkeys(OpenVinoDevice.family(n) for n in names))


def check_available(device: OpenVinoDevice) -> None:
    """Raise DeviceError unless every physical device ``device`` names exists here."""
    available = list(core().available_devices)
    for name in device.candidates:
        family = OpenVinoDevice.family(name)
        if name in available or (name == family and any(
                OpenVinoDevice.family(a) == family for a in available)) or (
                name == f'{family}.0' and family in available):
            continue
        raise DeviceError(
            f"OpenVINO device '{clip(name)}' is not available on this machine (available: "
            f"{', '.join(available) or 'none'}; or AUTO to let OpenVINO choose); set the "
            '`device` parameter')


def full_name(family: str) -> Any:
    """Return the device's full name as OpenVINO reports it (None where it says none)."""
    return safe(core().get_property, family, 'FULL_DEVICE_NAME')


def safe(getter: Any, *args: Any) -> Any:
    """Return a property OpenVINO may not expose on every device or version (else None)."""
    try:
        return getter(*args)
    except (RuntimeError, TypeError):
        return None


def read_model(xml: bytes, weights: bytes) -> tuple[Any, Any]:
    """Read an IR from its bytes; return the model and the weights buffer it shares.

    The buffer must outlive the model (OpenVINO reads the weights in place). RuntimeError
    when OpenVINO cannot read it.
    """
    import numpy as np
    import openvino as ov

    buffer = np.frombuffer(weights, dtype=np.uint8)
    return core().read_model(xml, ov.Tensor(buffer)), buffer


def is_quantized(model: Any) -> bool:
    """Whether the model holds int8 quantization (FakeQuantize operations)."""
    return any(op.get_type_name() == 'FakeQuantize' for op in model.get_ops())


def dynamic_hw(model: Any) -> bool:
    """Whether the model's image input takes any height and width (rect inference)."""
    shape = model.inputs[0].get_partial_shape()
    return bool(shape.rank.is_static and len(shape) == 4 and shape[2].is_dynamic
                and shape[3].is_dynamic)


def dynamic_batch(model: Any) -> bool:
    """Whether the model's image input takes any number of images (batches)."""
    shape = model.inputs[0].get_partial_shape()
    return bool(shape.rank.is_static and len(shape) == 4 and shape[0].is_dynamic)


def compiled_facts(compiled: Any) -> dict[str, Any]:
    """Return where and how a compiled model runs: devices, streams, threads, pinning."""
    info: dict[str, Any] = {'execution_devices': list(
        safe(compiled.get_property, 'EXECUTION_DEVICES') or [])}
    for key in ('NUM_STREAMS', 'INFERENCE_NUM_THREADS'):
        value = safe(compiled.get_property, key)
        if value is not None:
            info[key.lower()] = int(value)
    pinning = safe(compiled.get_property, 'ENABLE_CPU_PINNING')
    if pinning is not None:
        info['cpu_pinning'] = bool(pinning)
    return info


def gpu_memory() -> dict[str, int]:
    """Return the GPU's total and used memory, where OpenVINO reports them."""
    info = {}
    total = safe(core().get_property, 'GPU', 'GPU_DEVICE_TOTAL_MEM_SIZE')
    stats = safe(core().get_property, 'GPU', 'GPU_MEMORY_STATISTICS')
    if total is not None:
        info['memory_total'] = int(total)
    if isinstance(stats, dict):
        info['memory_used'] = int(sum(stats.values()))
    return info
