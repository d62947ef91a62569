"""ONNX Runtime execution providers: names, ``auto`` order, options and precision rules.

Kept apart from the runner so the choices (the node's ``execution_provider`` parameter takes
them from :data:`EXECUTION_PROVIDERS`) and the options built for each provider can be read and
tested without creating sessions.

- ``auto`` tries, among the providers this ONNX Runtime build has, TensorRT > CUDA > ROCm >
  MIGraphX > CoreML > DirectML > OpenVINO > CPU, falling back down the list when one fails.
- A GPU provider is created with CPU fallback disabled first (:data:`NO_CPU_FALLBACK`), so a
  model that needs the CPU for some nodes is known, and said, rather than found slow; the
  TensorRT provider has CUDA behind it (nodes TensorRT lacks run there), CPU only after.
- The TensorRT provider's engine and timing caches go in a folder per model and key (the
  ONNX, precision, ONNX Runtime and TensorRT versions, GPU, shape profile) inside
  ``engine_cache_dir``; OpenVINO's compiled-model cache likewise. A model with dynamic height
  and width gets an explicit shape profile (as the ``tensorrt`` backend does), so rect
  inference does not make the provider rebuild its engine for each new shape.
- The ROCm provider is gone from ONNX Runtime 1.23 on: naming it there says to use
  MIGraphX.
- ``device`` (read by :func:`~vision_nodes.platform.devices.parse_device`, like every
  backend's): a GPU index (``1``, ``cuda:1``) for the GPU providers, which becomes their
  ``device_id``; '' or ``cpu`` for the CPU provider; an OpenVINO device (``CPU``, ``GPU.1``,
  ``NPU``, ``AUTO:GPU,CPU``) for OpenVINO; '' for the others, which pick their own.
- ``precision: fp16``: TensorRT sets its own fp16 flag and OpenVINO its precision hint on the
  fp32 graph; the other GPU providers run an fp16-converted graph (inputs and outputs stay
  fp32). The CPU provider runs fp32 only; so does OpenVINO's provider on the CPU (it refuses
  FP16 there), while on an NPU it runs fp16 only (fp32 would silently run as fp16), so those
  combinations are refused with the reason.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any, Callable, Sequence

from ..artifacts.cache import ArtifactCache, cache_key, entries_alike
from ..artifacts.types import workspace_bytes
from ..backends import EXECUTION_PROVIDERS
from ..platform import cuda
from ..platform.devices import Device, DeviceError, openvino_device, require_device
from ..text import clip
from .base import RunnerError

#: The providers' names (the backend table's :data:`~vision_nodes.backends.EXECUTION_PROVIDERS`).
CPU, CUDA, TENSORRT, OPENVINO, ROCM, MIGRAPHX, COREML, DIRECTML = (
    EXECUTION_PROVIDERS[name] for name in ('cpu', 'cuda', 'tensorrt', 'openvino', 'rocm',
                                           'migraphx', 'coreml', 'directml'))
#: ONNX Runtime release that removed the ROCm execution provider (AMD GPUs: MIGraphX).
ROCM_REMOVED = (1, 23)
#: Session config entry that makes session creation fail if any node would run on the CPU.
NO_CPU_FALLBACK = 'session.disable_cpu_ep_fallback'
#: What ONNX Runtime says when that entry refuses a session (matched to retry with the CPU).
CPU_FALLBACK_REFUSED = 'fallback to CPU EP has been explicitly disabled'

#: ``execution_provider: auto`` tries the ones this build has in this order.
AUTO_ORDER = (TENSORRT, CUDA, ROCM, MIGRAPHX, COREML, DIRECTML, OPENVINO, CPU)

#: Providers that take a GPU index as ``device_id``.
DEVICE_ID_PROVIDERS = (TENSORRT, CUDA, ROCM, MIGRAPHX, DIRECTML)

#: Providers that get the graph taking the u8 image (``artifacts.onnx_u8_input``): on a GPU the
#: upload is a quarter of the float tensor's and the conversion runs there. Not the CPU: there
#: ONNX Runtime's Cast, Mul and Transpose over the image cost as much as the host's
#: ``prepare`` (docs/benchmarks.md, "u8 input on ONNX Runtime").
U8_INPUT_PROVIDERS = (TENSORRT, CUDA)

#: Providers that can run ``precision: fp16``.
FP16_PROVIDERS = DEVICE_ID_PROVIDERS + (COREML, OPENVINO)


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


def _version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for part in str(version).split('.')[:2]:
        digits = ''.join(c for c in part if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def provider_candidates(name: str, available: list[str], ort_version: str = '') -> list[str]:
    """List the providers to try, best first: the one named, or for 'auto' those available."""
    provider = resolve_execution_provider(name)
    if provider == 'auto':
        return [p for p in AUTO_ORDER if p in available]
    if provider == ROCM and provider not in available and ort_version and \
            _version_tuple(ort_version) >= ROCM_REMOVED:
        raise RunnerError(
            f'ONNX Runtime {clip(ort_version, 40)} has no ROCm execution provider (removed in '
            f'{ROCM_REMOVED[0]}.{ROCM_REMOVED[1]}): on AMD GPUs use execution_provider '
            "'migraphx' (an ONNX Runtime build with MIGraphX), or backend 'rocm' (PyTorch)")
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


def _check_openvino_precision(device_type: str | None, precision: str) -> None:
    """Refuse what OpenVINO's provider would refuse, or run as another precision silently."""
    head = (device_type or 'CPU').split('.', 1)[0].split(':', 1)[0]
    if head == 'CPU' and precision == 'fp16':
        raise RunnerError(f"{OPENVINO} on the CPU runs precision 'fp32' only (it refuses FP16 "
                          "there): use precision 'fp32', or backend 'openvino' (bf16 on CPUs "
                          "that have it), or device 'GPU' / 'NPU'")
    if head == 'NPU' and precision != 'fp16':
        raise RunnerError(f"{OPENVINO} on the NPU runs fp16 only (precision "
                          f"'{clip(precision, 20)}' would run as fp16 without a word): use "
                          "precision 'fp16'")


def needs_fp16_graph(provider: str, precision: str) -> bool:
    """Whether ``provider`` runs ``precision`` on the fp16-converted graph.

    TensorRT and OpenVINO lower an fp32 graph to fp16 themselves (a flag, a hint); the other
    GPU providers run the types the graph has.
    """
    return precision == 'fp16' and provider not in (TENSORRT, OPENVINO, CPU)


def fp16_graph_provider(name: str, precision: str, device: str) -> str:
    """Return the first provider to try that runs the fp16-converted graph ('' if none).

    Decided before the runner exists, so the artifact chain converts the graph only when a
    provider that can run it here (its precision and ``device`` checks pass) needs it.
    """
    if precision != 'fp16':
        return ''
    return _first_provider(name, precision, device,
                           lambda provider: needs_fp16_graph(provider, precision))


def u8_graph_provider(name: str, precision: str, device: str) -> str:
    """Return the first provider to try that runs the u8-input graph ('' if none).

    Only :data:`U8_INPUT_PROVIDERS` take it; decided before the runner exists, like
    :func:`fp16_graph_provider`, so the chain embeds the pre-processing only when one of them
    can run here.
    """
    return _first_provider(name, precision, device, takes_u8_graph)


def takes_u8_graph(provider: str) -> bool:
    """Whether ``provider`` runs the u8-input graph when the chain made one."""
    return provider in U8_INPUT_PROVIDERS


def _first_provider(name: str, precision: str, device: str,
                    wanted: Callable[[str], bool]) -> str:
    """Return the first candidate whose precision and device checks pass and is ``wanted``."""
    import onnxruntime as ort

    try:
        candidates = provider_candidates(name, ort.get_available_providers(), ort.__version__)
    except RunnerError:
        return ''  # the runner says why
    for provider in candidates:
        try:
            check_precision(provider, precision)
            check_device(provider, device)
        except RunnerError:
            continue
        if wanted(provider):
            return provider
    return ''


def artifact_options(config: Any) -> dict[str, str]:
    """Return the ``onnx`` backend's artifact options: who needs the fp16 and u8 graphs."""
    return {'fp16_for': fp16_graph_provider(config.execution_provider, config.precision,
                                            config.device),
            'u8_for': u8_graph_provider(config.execution_provider, config.precision,
                                        config.device)}


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


def provider_cache_dir(cache: ArtifactCache, provider: str, model: str,
                       fields: dict[str, Any]) -> Path:
    """Folder inside ``engine_cache_dir`` where ``provider`` keeps its own compiled cache.

    One folder per key (the ONNX's hash, precision, ONNX Runtime version, GPU), so a provider
    never finds an engine built from another graph, precision or GPU; named after the model
    that made it, and taken as it is by a manifest copied under another name (the same
    graph). The provider manages the files in it (and checks its own compatibility); the
    folder is created here.
    """
    own = cache.root / f'onnxruntime-{short_name(provider)}' / \
        cache.entry_dir(model, 'ep', cache_key(fields)).name
    others = [] if own.is_dir() else entries_alike(own, 'ep')
    if others:
        return others[0]
    own.mkdir(parents=True, exist_ok=True)
    return own


def tensorrt_library_version() -> str | None:
    """Version of the TensorRT that ONNX Runtime's TensorRT provider loads, or None.

    The ``tensorrt`` Python module's, where it is installed; else libnvinfer's own
    ``getInferLibVersion()`` (an integer such as 100300 for 10.3.0), which is what the
    provider links to.
    """
    try:
        import tensorrt

        return str(tensorrt.__version__)
    except Exception:  # noqa: BLE001 - not installed, or its libraries are missing
        pass
    for name in ('libnvinfer.so.11', 'libnvinfer.so.10', 'libnvinfer.so'):
        try:
            return f'libnvinfer {int(ctypes.CDLL(name).getInferLibVersion())}'
        except (OSError, AttributeError, ValueError):
            continue
    return None


def shape_profile(input_name: str, profile: Sequence[Sequence[int]]) -> dict[str, str]:
    """Return the TensorRT provider's options for one input's (min, opt, max) shapes."""
    keys = ('trt_profile_min_shapes', 'trt_profile_opt_shapes', 'trt_profile_max_shapes')
    return {key: f"{input_name}:{'x'.join(str(int(d)) for d in shape)}"
            for key, shape in zip(keys, profile)}


def provider_options(provider: str, *, device: str, precision: str, cache: ArtifactCache,
                     model: str, onnx_sha256: str, ort_version: str,
                     profile: tuple[str, Sequence[Sequence[int]]] | None = None
                     ) -> dict[str, Any]:
    """Build the ONNX Runtime options for ``provider`` (device, caches, precision).

    ``profile`` is (input name, (min, opt, max) shapes) for the TensorRT provider when the
    model's height and width are dynamic.
    """
    options: dict[str, Any] = {}
    parsed = check_device(provider, device)
    if provider in DEVICE_ID_PROVIDERS and parsed.kind == 'gpu':
        options['device_id'] = parsed.gpu_index
    if provider == TENSORRT:
        options.update(_tensorrt_options(options.get('device_id', 0), precision, cache, model,
                                         onnx_sha256, ort_version, profile))
    elif provider == OPENVINO:
        device_type = None if parsed.kind == 'default' else openvino_device(device).name
        _check_openvino_precision(device_type, precision)
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


def _tensorrt_options(index: int, precision: str, cache: ArtifactCache, model: str,
                      onnx_sha256: str, ort_version: str,
                      profile: tuple[str, Sequence[Sequence[int]]] | None) -> dict[str, Any]:
    gpu = cuda.gpu_info(index)
    shapes = shape_profile(*profile) if profile else {}
    fields = {'onnx_sha256': onnx_sha256, 'precision': precision,
              'onnxruntime': ort_version, 'tensorrt': tensorrt_library_version(),
              'gpu': gpu.name if gpu else None, 'compute_capability': gpu.sm if gpu else None,
              'profile': shapes}
    folder = str(provider_cache_dir(cache, TENSORRT, model, fields))
    options: dict[str, Any] = {
        'trt_engine_cache_enable': True, 'trt_engine_cache_path': folder,
        'trt_timing_cache_enable': True, 'trt_timing_cache_path': folder,
        'trt_fp16_enable': precision == 'fp16', **shapes}
    if gpu is not None:
        options['trt_max_workspace_size'] = workspace_bytes(gpu)
    return options


def session_providers(provider: str, options: dict[str, Any], available: Sequence[str], *,
                      cpu: bool) -> tuple[list[str], list[dict[str, Any]]]:
    """Return the providers (and their options) to create a session on ``provider`` with.

    The TensorRT provider gets CUDA behind it where this build has it (for the nodes
    TensorRT cannot take, on the same GPU); ``cpu`` adds the CPU provider last. ONNX Runtime
    refuses the CPU provider listed together with :data:`NO_CPU_FALLBACK`.
    """
    providers, all_options = [provider], [options]
    if provider == TENSORRT and CUDA in available:
        providers.append(CUDA)
        all_options.append({'device_id': options['device_id']} if 'device_id' in options
                           else {})
    if cpu and provider != CPU:
        providers.append(CPU)
        all_options.append({})
    return providers, all_options
