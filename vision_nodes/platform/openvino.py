"""Facts about this machine's OpenVINO devices: what exists and which reduced types run fast.

One ``openvino.Core`` serves the process (it loads device plugins lazily). The facts decide,
before any runner exists, what ``precision`` and ``device`` mean on the ``openvino`` backend
(:mod:`vision_nodes.runners.openvino_plan`); the runner reads the same core to load and run.
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
