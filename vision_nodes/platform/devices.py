"""Device strings as users write them → the names each runtime takes.

``device`` is one free-form node parameter shared by every backend: PyTorch and ONNX Runtime
take a GPU index (``cuda:1`` or ``1``), OpenVINO a device name (``CPU``, ``GPU.1``, ``NPU``,
``AUTO:GPU,CPU``). The helpers here only parse and normalise; whether the device exists is
for the runner to ask its runtime.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: OpenVINO devices that run on other devices, named after a colon (``AUTO:GPU,CPU``).
OPENVINO_VIRTUAL_DEVICES = ('AUTO', 'MULTI', 'HETERO', 'BATCH')
_OPENVINO_PART = re.compile(r'^([A-Za-z]+)(?:[.:](\d+))?$')


class DeviceError(ValueError):
    """A device string that cannot be parsed; the message shows the accepted forms."""


@dataclass(frozen=True)
class OpenVinoDevice:
    """A parsed OpenVINO device: the name to compile for and the physical devices it names."""

    #: As OpenVINO takes it: ``CPU``, ``GPU.1``, ``AUTO``, ``AUTO:GPU,CPU``.
    name: str
    #: ``AUTO``/``MULTI``/``HETERO``/``BATCH``, or '' for a physical device.
    virtual: str
    #: Physical devices named (``('GPU', 'CPU')`` for ``AUTO:GPU,CPU``; empty for a bare
    #: ``AUTO``, which may pick any).
    candidates: tuple[str, ...]

    @staticmethod
    def family(device: str) -> str:
        """Return the device type without its index: ``GPU.1`` → ``GPU``."""
        return device.split('.', 1)[0]


def _openvino_part(text: str, spec: str) -> str:
    match = _OPENVINO_PART.match(text.strip())
    if not match:
        raise DeviceError(f"device '{spec}' is not an OpenVINO device name (use CPU, GPU, "
                          'GPU.1, NPU, AUTO or AUTO:GPU,CPU)')
    kind, index = match.group(1).upper(), match.group(2)
    return f'{kind}.{index}' if index is not None else kind


def parse_openvino_device(spec: str) -> OpenVinoDevice:
    """Normalise an OpenVINO device string ('' means CPU; case and ``gpu:1`` are forgiven)."""
    text = (spec or '').strip() or 'CPU'
    head, sep, tail = text.partition(':')
    virtual = head.strip().upper()
    if virtual in OPENVINO_VIRTUAL_DEVICES:
        candidates = tuple(_openvino_part(part, spec) for part in tail.split(',')
                           if part.strip()) if sep else ()
        name = f"{virtual}:{','.join(candidates)}" if candidates else virtual
        return OpenVinoDevice(name, virtual, candidates)
    device = _openvino_part(text, spec)
    return OpenVinoDevice(device, '', (device,))


def gpu_index(spec: str, kind: str = 'cuda') -> int | None:
    """Return the GPU index in ``cuda:1``, ``1`` or ``cuda`` (index 0); None for ''."""
    text = (spec or '').strip().lower()
    if not text:
        return None
    if text.isdigit():
        return int(text)
    head, sep, tail = text.partition(':')
    if head != kind or (sep and not tail.isdigit()):
        raise DeviceError(f"device '{spec}' is not a {kind} GPU (use '{kind}:0' or '0')")
    return int(tail) if sep else 0
