"""The ``device`` setting: one parser, one meaning on every backend, and who honours what.

``device`` is one node parameter shared by every backend, so a value means the same thing
whichever backend runs it. :func:`parse_device` reads it into a :class:`Device` of one of
these kinds:

- ``default`` (empty): the backend's own default device (the first GPU, OpenVINO's CPU);
- ``cpu``: the CPU;
- ``gpu``: a GPU by index: ``1``, ``gpu:1``, ``cuda:1`` (also ``rocm:1``, ``hip:1``,
  ``dml:1``, and OpenVINO's spelling ``GPU.1``); without an index the first one;
- ``openvino``: a device only OpenVINO has: ``NPU``, or a virtual device running on others
  (``AUTO``, ``AUTO:GPU,CPU``, ``MULTI:...``, ``HETERO:...``, ``BATCH:...``).

Each runner states the kinds it can honour and refuses the others with
:func:`require_device`, in one line naming the parameter, the value, the backend and what it
accepts. Whether the device exists is for the runner to ask its runtime.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from ..limits import MAX_DEVICE_INDEX
from ..text import show

DEVICE_KINDS = ('default', 'cpu', 'gpu', 'openvino')
#: What each kind accepts, as an error message lists it.
KIND_EXAMPLES = {
    'default': "'' (the default)",
    'cpu': "'cpu'",
    'gpu': "a GPU ('cuda', 'cuda:1', '1')",
    'openvino': "an OpenVINO device ('NPU', 'AUTO', 'AUTO:GPU,CPU')",
}
#: OpenVINO devices that run on other devices, named after a colon (``AUTO:GPU,CPU``).
OPENVINO_VIRTUAL_DEVICES = ('AUTO', 'MULTI', 'HETERO', 'BATCH')
#: Physical OpenVINO device types a virtual device may name.
OPENVINO_PHYSICAL_DEVICES = ('CPU', 'GPU', 'NPU')
#: GPU prefixes: ``gpu`` is any runtime's GPU; the others name a vendor's (OpenVINO's GPUs
#: are Intel's, so it refuses them).
GPU_PREFIXES = ('gpu', 'cuda', 'rocm', 'hip', 'dml')
_GPU = re.compile(r'(gpu|cuda|rocm|hip|dml)(?:[:.]([0-9]+))?', re.IGNORECASE | re.ASCII)
_INDEX = re.compile(r'[0-9]+', re.ASCII)
_OPENVINO_PART = re.compile(r'(CPU|GPU|NPU)(?:[.:]([0-9]+))?', re.IGNORECASE | re.ASCII)
_FORMS = ("use '' (the backend's default), 'cpu', a GPU ('cuda', 'cuda:1', '1', 'gpu:1') or "
          "an OpenVINO device ('GPU.1', 'NPU', 'AUTO', 'AUTO:GPU,CPU')")


class DeviceError(ValueError):
    """A device the setting cannot name or a backend cannot use; one line saying which."""


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


@dataclass(frozen=True)
class Device:
    """A parsed ``device`` value (see the module's docstring for the kinds)."""

    #: The value as given, for messages.
    spec: str
    kind: str
    #: ``gpu``: the GPU's index, None for "the first one".
    index: int | None = None
    #: ``gpu``: the prefix written ('gpu', 'cuda', 'rocm', 'hip', 'dml'; '' for a bare index).
    vendor: str = ''
    #: ``openvino``: the device as OpenVINO takes it.
    openvino: OpenVinoDevice | None = None

    @property
    def gpu_index(self) -> int:
        """The GPU's index (0, the first, for the default device and a bare ``cuda``)."""
        return self.index or 0


def _not_a_device(spec: str) -> DeviceError:
    return DeviceError(f'device {show(spec)} is not a device: {_FORMS}')


def _index(spec: str, digits: str | None) -> int | None:
    if digits is None:
        return None
    if len(digits) > 6 or int(digits) > MAX_DEVICE_INDEX:
        raise DeviceError(f'device {show(spec)}: a device index is at most {MAX_DEVICE_INDEX}')
    return int(digits)


def _openvino_part(spec: str, text: str) -> str:
    match = _OPENVINO_PART.fullmatch(text.strip())
    if not match:
        raise _not_a_device(spec)
    family, index = match.group(1).upper(), _index(spec, match.group(2))
    return family if index is None else f'{family}.{index}'


def _openvino(spec: str, text: str) -> Device | None:
    """Return the device only OpenVINO has that ``text`` names (NPU, AUTO...), or None."""
    head, sep, tail = text.partition(':')
    virtual = head.strip().upper()
    if virtual in OPENVINO_VIRTUAL_DEVICES:
        parts = tail.split(',') if sep else []
        if sep and not all(p.strip() for p in parts):
            raise _not_a_device(spec)
        candidates = tuple(_openvino_part(spec, p) for p in parts)
        name = f"{virtual}:{','.join(candidates)}" if candidates else virtual
        return Device(spec, 'openvino', openvino=OpenVinoDevice(name, virtual, candidates))
    match = _OPENVINO_PART.fullmatch(text)
    if match and match.group(1).upper() == 'NPU':
        name = _openvino_part(spec, text)
        return Device(spec, 'openvino', openvino=OpenVinoDevice(name, '', (name,)))
    return None


def parse_device(spec: str) -> Device:
    """Read a ``device`` value; DeviceError (one line, the accepted forms) if it names none.

    Case is forgiven, and surrounding spaces. The same value means the same device on every
    backend; whether a backend can use it is :func:`require_device`'s question.
    """
    text = (spec or '').strip()
    if not text:
        return Device(spec, 'default')
    if text.lower() == 'cpu':
        return Device(spec, 'cpu')
    if _INDEX.fullmatch(text):
        return Device(spec, 'gpu', _index(spec, text))
    match = _GPU.fullmatch(text)
    if match:
        return Device(spec, 'gpu', _index(spec, match.group(2)), match.group(1).lower())
    device = _openvino(spec, text)
    if device is None:
        raise _not_a_device(spec)
    return device


def accepted(kinds: Sequence[str]) -> str:
    """Say what ``kinds`` accept, for an error message: "'' (the default) or 'cpu'"."""
    texts = [KIND_EXAMPLES[k] for k in kinds]
    return texts[0] if len(texts) == 1 else f"{', '.join(texts[:-1])} or {texts[-1]}"


def require_device(spec: str, kinds: Sequence[str], user: str) -> Device:
    """Parse ``spec`` and refuse it unless ``user`` (e.g. "backend 'cpu'") honours its kind.

    The refusal is one line naming the parameter, the value, the backend and what it takes.
    """
    try:
        device = parse_device(spec)
    except DeviceError as exc:
        raise DeviceError(f'parameter {exc}; {user} takes {accepted(kinds)}') from None
    if device.kind not in kinds:
        raise DeviceError(f'parameter device {show(spec)}: {user} cannot use it; it takes '
                          f'{accepted(kinds)}')
    return device


def openvino_device(spec: str, user: str = "backend 'openvino'") -> OpenVinoDevice:
    """Return the OpenVINO device ``spec`` names ('' and 'cpu': CPU; a GPU: ``GPU.N``).

    OpenVINO's GPUs are its own (Intel's): another vendor's GPU name (``cuda:0``) is refused,
    naming ``user``.
    """
    device = parse_device(spec)
    if device.kind == 'openvino':
        return device.openvino  # type: ignore[return-value]
    if device.kind in ('default', 'cpu'):
        return OpenVinoDevice('CPU', '', ('CPU',))
    if device.vendor not in ('', 'gpu'):
        raise DeviceError(f'parameter device {show(spec)}: {user} cannot use a '
                          f"{device.vendor.upper()} GPU; OpenVINO's GPUs are 'GPU', 'GPU.1', "
                          '...')
    name = 'GPU' if device.index is None else f'GPU.{device.index}'
    return OpenVinoDevice(name, '', (name,))
