"""ONNX Runtime execution providers: names, ``auto`` order, options and precision rules.

Kept apart from the runner so the choices (the node's ``execution_provider`` parameter takes
them from :data:`EXECUTION_PROVIDERS`) and the options built for each provider can be read and
tested without creating sessions.

- ``auto`` tries, among the providers this ONNX Runtime build has, TensorRT > CUDA > ROCm >
  MIGraphX > CoreML > DirectML > OpenVINO > CPU, falling back down the list when one fails.
- The TensorRT provider's engine and timing caches go in a folder per model and key inside
  ``engine_cache_dir``; OpenVINO's compiled-model cache likewise.
- ``device`` (read by :func:`~vision_nodes.platform.devices.parse_device`, like every
  backend's): a GPU index (``1``, ``cuda:1``) for the GPU providers, which becomes their
  ``device_id``; '' or ``cpu`` for the CPU provider; an OpenVINO device (``CPU``, ``GPU.1``,
  ``NPU``, ``AUTO:GPU,CPU``) for OpenVINO; '' for the others, which pick their own.
- ``precision: fp16``: TensorRT sets its own fp16 flag and OpenVINO its precision hint on the
  fp32 graph; the other GPU providers run an fp16-converted graph (inputs and outputs stay
  fp32). The CPU provider runs fp32 only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..artifacts.cache import EngineCache, cache_key
from ..platform import cuda
from ..platform.devices import Device, DeviceError, openvino_device, require_device
from .base import RunnerError

#: Short names accepted by the ``execution_provider`` parameter ('' also means cpu).
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

CPU = 'CPUExecutionProvider'
TENSORRT = 'TensorrtExecutionProvider'
OPENVINO = 'OpenVINOExecutionProvider'

#: ``execution_provider: auto`` tries the ones this build has in this order.
AUTO_ORDER = (TENSORRT, 'CUDAExecutionProvider', 'ROCMExecutionProvider',
              'MIGraphXExecutionProvider', 'CoreMLExecutionProvider', 'DmlExecutionProvider',
              OPENVINO, CPU)

#: Providers that take a GPU index as ``device_id``.
DEVICE_ID_PROVIDERS = (TENSORRT, 'CUDAExecutionProvider', 'ROCMExecutionProvider',
                       'MIGraphXExecutionProvider', 'DmlExecutionProvider')

#: Providers that can run ``precision: fp16``.
FP16_PROVIDERS = DEVICE_ID_PROVIDERS + ('CoreMLExecutionProvider', OPENVINO)


def short_name(provider: str) -> str:
    """Return the parameter value for a full provider name ('CUDAExecutionProvider' → 'cuda')."""
    for short, full in EXECUTION_PROVIDERS.items():
        if full == provider:
            return short
    return provider


def resolve_execution_provider(name: str) -> str:
    """Map a short or full EP name to ONNX Runtime's name ('' means CPU; 'auto' stays)."""
    key = (name or 'cpu').strip()
    if key.lower() in EXECUTION_PROVIDERS:
        return EXECUTION_PROVIDERS[key.lower()]
    if key in EXECUTION_PROVIDERS.values():
        return key
    raise RunnerError(
        f"unknown execution_provider '{name}' "
        f"(use one of: {', '.join(EXECUTION_PROVIDERS)})")


def provider_candidates(name: str, available: list[str]) -> list[str]:
    """List the providers to try, best first: the one named, or for 'auto' those available."""
    provider = resolve_execution_provider(name)
    if provider == 'auto':
        return [p for p in AUTO_ORDER if p in available]
    if provider not in available:
        raise RunnerError(
            f"execution provider '{provider}' is not available in this ONNX Runtime "
            f"build (available: {', '.join(available)})")
    return [provider]


def check_precision(provider: str, precision: str) -> None:
    """Raise RunnerError unless ``provider`` can run ``precision``, naming the valid ones."""
    valid = ('fp32', 'fp16') if provider in FP16_PROVIDERS else ('fp32',)
    if precision not in valid:
        extra = ''
        if precision == 'fp16':
            extra = ('; fp16 needs a GPU execution provider (' + ', '.join(
                short_name(p) for p in FP16_PROVIDERS if p != OPENVINO) + ') or openvino')
        raise RunnerError(f"execution provider '{provider}' cannot run precision "
                          f"'{precision}' (valid for it: {', '.join(valid)}){extra}")


def needs_fp16_graph(provider: str, precision: str) -> bool:
    """Whether ``provider`` runs ``precision`` on the fp16-converted graph.

    TensorRT and OpenVINO lower an fp32 graph to fp16 themselves (a flag, a hint); the other
    GPU providers run the types the graph has.
    """
    return precision == 'fp16' and provider not in (TENSORRT, OPENVINO, CPU)


def device_kinds(provider: str) -> tuple[str, ...]:
    """Kinds of ``device`` a provider honours (see :mod:`vision_nodes.platform.devices`)."""
    if provider in DEVICE_ID_PROVIDERS:
        return ('default', 'gpu')
    if provider == OPENVINO:
        return ('default', 'cpu', 'gpu', 'openvino')
    if provider == CPU:
        return ('default', 'cpu')
    return ('default',)  # CoreML: it picks its own devices


def check_device(provider: str, device: str) -> Device:
    """Return ``device`` parsed, or a one-line RunnerError if ``provider`` cannot honour it."""
    user = f"backend 'onnx' (execution provider {short_name(provider)})"
    try:
        parsed = require_device(device, device_kinds(provider), user)
        if provider == OPENVINO and parsed.kind != 'default':
            openvino_device(device, user)  # OpenVINO's GPUs are its own: not 'cuda:0'
    except DeviceError as exc:
        raise RunnerError(str(exc)) from None
    return parsed


def provider_cache_dir(cache: EngineCache, provider: str, model: str,
                       fields: dict[str, Any]) -> Path:
    """Folder inside ``engine_cache_dir`` where ``provider`` keeps its own compiled cache.

    One folder per model and key (the ONNX's hash, precision, ONNX Runtime version, GPU), so
    a provider never finds an engine built from another graph, precision or GPU. The provider
    manages the files in it (and checks its own compatibility); the folder is created here.
    """
    folder = cache.root / f'onnxruntime-{short_name(provider)}' / \
        f"{cache.entry_dir(model, 'ep', cache_key(fields)).name}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def provider_options(provider: str, *, device: str, precision: str, cache: EngineCache,
                     model: str, onnx_sha256: str, ort_version: str) -> dict[str, Any]:
    """Build the ONNX Runtime options for ``provider`` (device, caches, precision)."""
    options: dict[str, Any] = {}
    parsed = check_device(provider, device)
    if provider in DEVICE_ID_PROVIDERS and parsed.kind == 'gpu':
        options['device_id'] = parsed.gpu_index
    if provider == TENSORRT:
        gpu = cuda.gpu_info(options.get('device_id', 0))
        fields = {'onnx_sha256': onnx_sha256, 'precision': precision,
                  'onnxruntime': ort_version,
                  'gpu': gpu.name if gpu else None, 'compute_capability': gpu.sm if gpu else None}
        folder = str(provider_cache_dir(cache, provider, model, fields))
        options.update({'trt_engine_cache_enable': True, 'trt_engine_cache_path': folder,
                        'trt_timing_cache_enable': True, 'trt_timing_cache_path': folder,
                        'trt_fp16_enable': precision == 'fp16'})
    elif provider == OPENVINO:
        device_type = None if parsed.kind == 'default' else openvino_device(device).name
        if device_type:
            options['device_type'] = device_type
        if precision == 'fp16':
            options['precision'] = 'FP16'
        elif device_type and device_type.startswith('GPU'):
            options['precision'] = 'FP32'  # OpenVINO's GPU default would be FP16
        fields = {'onnx_sha256': onnx_sha256, 'precision': precision,
                  'onnxruntime': ort_version, 'device_type': device_type}
        options['cache_dir'] = str(provider_cache_dir(cache, provider, model, fields))
    return options
