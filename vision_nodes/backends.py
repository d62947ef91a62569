"""THE backend table: every fact about a backend, in one row, read everywhere else.

A row says which runner class serves the backend, the runtime it drives, the precisions it
can honour, the weight architectures it can run, the kinds of ``device`` it takes (the kinds of
:func:`~vision_nodes.platform.devices.parse_device`), and, for ONNX Runtime, the execution
provider names. :data:`AUTO_ORDER` is the order ``backend: auto`` tries them in.

Everything else derives from here: the manifest checker (:data:`ARCHITECTURE_BACKENDS`, the
backend and precision names), the registry (runner classes, precisions, ``auto``), the node's
``backend``/``precision``/``execution_provider`` choices, the launch arguments, the README's
and the benchmark's tables. Adding a backend is one runner file and one row here.

This module imports nothing of the package, so every layer may read it.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Precisions a backend may run (the ``precision`` setting adds ``auto``); 'fp16' is the
#: device's fast reduced precision: fp16 on GPUs, bf16 on CPUs that have it.
KNOWN_PRECISIONS = ('fp32', 'fp16', 'int8')
#: Values of the ``precision`` setting; ``registry.resolve_precision`` resolves 'auto'.
PRECISIONS = ('auto',) + KNOWN_PRECISIONS
#: How weights load: PyTorch checkpoints (ultralytics), a save_pretrained folder
#: (transformers), an .onnx file, or an OpenVINO IR (an .xml with its .bin, or a folder
#: holding one, e.g. an Ultralytics ``*_openvino_model``).
ARCHITECTURES = ('ultralytics', 'onnx', 'transformers', 'openvino')
#: Architectures that hold PyTorch weights: every backend can run them (the artifact-based
#: ones through an export).
_PYTORCH = ('ultralytics', 'transformers')
#: Every kind of ``device`` value (see :mod:`vision_nodes.platform.devices`).
_ALL_DEVICES = ('default', 'cpu', 'gpu', 'openvino')


@dataclass(frozen=True)
class Backend:
    """One backend: a row of :data:`BACKENDS`."""

    name: str
    #: (module, class) of the runner; None marks a name reserved but not built yet.
    runner: tuple[str, str] | None
    #: The runtime it drives, as the README's table names it.
    runtime: str
    #: Precisions its runner can honour, fp32 first. A manifest may narrow them
    #: (``precisions``) and the device may refuse one (the ``plan``'s
    #: ``precision_unavailable``); ``registry.check_precision`` checks all three.
    precisions: tuple[str, ...]
    #: Weight architectures it can run.
    architectures: tuple[str, ...]
    #: Kinds of ``device`` it takes at most; a runner may narrow them for a setting
    #: (``Runner.device_kinds``: ONNX Runtime takes what the execution provider honours).
    device_kinds: tuple[str, ...]
    #: Values of the ``execution_provider`` setting it honours ('' also means cpu).
    execution_providers: tuple[str, ...] = ()
    #: What the precisions column of the README says beyond the names.
    precision_note: str = ''
    #: What the runner loads, as the artifact chain names it ('weights': the weights
    #: themselves; 'onnx', 'openvino', 'tensorrt': the chain's finished artifact).
    artifact: str = 'weights'
    #: Module deciding, before the runner exists, what ``precision: auto`` means here, which
    #: precisions the device can run and the device facts the runner and the chain need
    #: (``auto_precision``, ``precision_unavailable``, ``plan``, ``artifact_options``, each
    #: optional); '' for none.
    plan: str = ''


_TORCH = ('vision_nodes.runners.torch_runner', 'TorchRunner')

#: ONNX Runtime's execution providers: each value of the ``execution_provider`` setting ->
#: the provider's name ('' also means cpu).
EXECUTION_PROVIDERS = {
    'auto': 'auto',
    'cpu': 'CPUExecutionProvider',
    'cuda': 'CUDAExecutionProvider',
    'tensorrt': 'TensorrtExecutionProvider',
    'openvino': 'OpenVINOExecutionProvider',
    'rocm': 'ROCMExecutionProvider',
    'migraphx': 'MIGraphXExecutionProvider',
    'coreml': 'CoreMLExecutionProvider',
    'directml': 'DmlExecutionProvider',
}
#: name -> row, in the order the backends are listed to users.
BACKENDS: dict[str, Backend] = {row.name: row for row in (
    Backend('cpu', _TORCH, 'PyTorch', ('fp32',), _PYTORCH, ('default', 'cpu')),
    Backend('cuda', _TORCH, 'PyTorch', ('fp32', 'fp16'), _PYTORCH, ('default', 'gpu')),
    Backend('rocm', _TORCH, 'PyTorch', ('fp32', 'fp16'), _PYTORCH, ('default', 'gpu')),
    Backend('onnx', ('vision_nodes.runners.onnx_runner', 'OnnxRunner'), 'ONNX Runtime',
            ('fp32', 'fp16'), _PYTORCH + ('onnx',), _ALL_DEVICES,
            execution_providers=tuple(EXECUTION_PROVIDERS),
            precision_note='fp16 on GPU execution providers and OpenVINO, not the CPU',
            artifact='onnx', plan='vision_nodes.runners.onnx_providers'),
    Backend('tensorrt', ('vision_nodes.runners.tensorrt_runner', 'TensorRTRunner'),
            'TensorRT', ('fp32', 'fp16', 'int8'), _PYTORCH + ('onnx',), ('default', 'gpu'),
            precision_note='int8 on TensorRT 10 only', artifact='tensorrt',
            plan='vision_nodes.runners.tensorrt_plan'),
    Backend('openvino', ('vision_nodes.runners.openvino_runner', 'OpenVinoRunner'),
            'OpenVINO', ('fp32', 'fp16', 'int8'), _PYTORCH + ('onnx', 'openvino'),
            _ALL_DEVICES, precision_note='fp16 is bf16 on CPUs', artifact='openvino',
            plan='vision_nodes.runners.openvino_plan'),
)}

#: Every backend name a manifest may list (``auto`` is a setting's value, not a backend).
BACKEND_NAMES: tuple[str, ...] = tuple(BACKENDS)
#: ``backend: auto`` tries these in order (the first that loads wins).
AUTO_ORDER: tuple[str, ...] = ('tensorrt', 'cuda', 'rocm', 'openvino', 'onnx', 'cpu')
#: Values accepted by the ``backend`` setting.
BACKEND_CHOICES: tuple[str, ...] = ('auto',) + BACKEND_NAMES
#: Architecture -> the backends that can run it, in table order.
ARCHITECTURE_BACKENDS: dict[str, tuple[str, ...]] = {
    arch: tuple(b.name for b in BACKENDS.values() if arch in b.architectures)
    for arch in ARCHITECTURES}
#: Values of the ``execution_provider`` setting ('' means cpu).
EXECUTION_PROVIDER_CHOICES: tuple[str, ...] = ('',) + tuple(dict.fromkeys(
    p for b in BACKENDS.values() for p in b.execution_providers))


def _check_table() -> None:
    """Refuse, at import, a table that contradicts itself (a row added half-way)."""
    assert sorted(AUTO_ORDER) == sorted(BACKENDS), 'AUTO_ORDER must list every backend once'
    for row in BACKENDS.values():
        assert row.precisions[0] == 'fp32' and set(row.precisions) <= set(KNOWN_PRECISIONS)
        assert set(row.architectures) <= set(ARCHITECTURES) and row.architectures
        assert set(row.device_kinds) <= set(_ALL_DEVICES) and 'default' in row.device_kinds


_check_table()
