"""ONNX Runtime runner (backend ``onnx``); ``execution_provider`` picks the EP."""

from __future__ import annotations

import ast
import json
from typing import Any

import numpy as np

from ..artifacts.onnx_export import LABELS_METADATA_KEY, ONNX_FILE, ensure_onnx
from ..limits import MAX_MANIFEST_BYTES
from ..loaders import check_weights
from ..text import clip
from .base import Runner, RunnerConfig, RunnerError

#: Short names accepted by the ``execution_provider`` parameter.
EXECUTION_PROVIDERS = {
    'cpu': 'CPUExecutionProvider',
    'cuda': 'CUDAExecutionProvider',
    'tensorrt': 'TensorrtExecutionProvider',
    'openvino': 'OpenVINOExecutionProvider',
    'rocm': 'ROCMExecutionProvider',
    'migraphx': 'MIGraphXExecutionProvider',
}


def resolve_execution_provider(name: str) -> str:
    """Map a short or full EP name to ONNX Runtime's name ('' means CPU)."""
    key = (name or 'cpu').strip()
    if key.lower() in EXECUTION_PROVIDERS:
        return EXECUTION_PROVIDERS[key.lower()]
    if key in EXECUTION_PROVIDERS.values():
        return key
    raise RunnerError(
        f"unknown execution_provider '{clip(name, 40)}' "
        f"(use one of: {', '.join(EXECUTION_PROVIDERS)})")


def labels_from_metadata(meta: dict[str, str]) -> list[str] | None:
    """Class names stored in an ONNX model's metadata (ours, or an Ultralytics export's).

    Raises ValueError for metadata that is too large, malformed, or not a list of names.
    """
    for key in (LABELS_METADATA_KEY, 'names'):
        if len(meta.get(key, '')) > MAX_MANIFEST_BYTES:
            raise ValueError(f'metadata {key} is larger than {MAX_MANIFEST_BYTES} bytes')
    if LABELS_METADATA_KEY in meta:
        names = json.loads(meta[LABELS_METADATA_KEY])
        if not isinstance(names, list):
            raise ValueError(f'{LABELS_METADATA_KEY} is not a list')
        return [str(v) for v in names]
    if 'names' in meta:  # Ultralytics writes str(dict)
        names = ast.literal_eval(meta['names'])
        if isinstance(names, dict):
            return [str(names[k]) for k in sorted(names)]
    return None


class OnnxRunner(Runner):
    """Runs an ONNX model with ONNX Runtime, exporting PyTorch weights on first use."""

    backends = ('onnx',)

    def __init__(self, config: RunnerConfig) -> None:
        super().__init__(config)
        self._session: Any = None
        self._input_name = ''
        self.model_path = None

    @classmethod
    def unavailable_reason(cls, backend: str) -> str | None:
        try:
            import onnxruntime  # noqa: F401
        except ImportError:
            return "ONNX Runtime is not installed (pip install 'vision_nodes[onnx]')"
        return None

    def _load(self) -> None:
        import onnxruntime as ort

        cfg = self.config
        if cfg.precision != 'fp32':
            raise RunnerError(f"backend 'onnx' runs precision 'fp32' in this version, "
                              f"not '{cfg.precision}'")
        provider = resolve_execution_provider(cfg.execution_provider)
        available = ort.get_available_providers()
        if provider not in available:
            raise RunnerError(
                f"execution provider '{provider}' is not available in this ONNX Runtime "
                f"build (available: {', '.join(available)})")
        if cfg.manifest.architecture == 'onnx':
            self.model_path = check_weights(cfg.weights)
            model: str | bytes = str(self.model_path)  # the user's file (may use external data)
            self.cache_hit = None
        else:
            entry = ensure_onnx(cfg.manifest, cfg.weights, cfg.cache, cfg.precision)
            self.model_path = entry.file(ONNX_FILE)
            model = entry.read_verified(ONNX_FILE)  # what runs is what the hash check saw
            self.cache_hit = entry.hit
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Worker threads spin while a run is in progress but not after it: otherwise they keep
        # every core busy for a while after each frame, slowing the decode, the publish and
        # the DDS threads (of this process and of the camera's) that follow.
        options.add_session_config_entry('session.force_spinning_stop', '1')
        providers = [provider] if provider == 'CPUExecutionProvider' else \
            [provider, 'CPUExecutionProvider']
        provider_options = None
        if cfg.device and provider in ('CUDAExecutionProvider', 'TensorrtExecutionProvider',
                                       'ROCMExecutionProvider'):
            device_id = cfg.device.split(':')[-1]
            provider_options = [{'device_id': device_id}, {}]
        try:
            self._session = ort.InferenceSession(model, sess_options=options,
                                                 providers=providers,
                                                 provider_options=provider_options)
        except Exception as exc:  # noqa: BLE001 - ORT raises its own exception types
            raise RunnerError(f"ONNX Runtime cannot load '{clip(self.model_path)}': "
                              f'{clip(exc, 300)}') from exc
        inputs = self._session.get_inputs()
        if len(inputs) != 1 or inputs[0].type != 'tensor(float)':
            found = ', '.join(f'{clip(i.name, 40)} {clip(i.type, 40)}' for i in inputs[:4])
            raise RunnerError(f"'{clip(self.model_path)}' takes inputs ({found}); a vision "
                              'model here takes one float32 image tensor: export it so')
        self._input_name = inputs[0].name
        meta = self._session.get_modelmeta().custom_metadata_map
        try:
            self.labels = labels_from_metadata(meta)
        except Exception as exc:  # noqa: BLE001 - metadata is untrusted text
            raise RunnerError(f"'{clip(self.model_path)}': its class names (metadata) cannot "
                              f"be read ({type(exc).__name__}): list `labels` in the manifest"
                              ) from None

    def model_input_shape(self) -> tuple[int | None, ...] | None:
        if self._session is None:
            return None
        return tuple(d if isinstance(d, int) and d > 0 else None
                     for d in self._session.get_inputs()[0].shape)

    def infer(self, tensor: np.ndarray) -> list[np.ndarray]:
        if self._session is None:
            raise RunnerError('runner is not loaded')
        return self._session.run(None, {self._input_name: tensor})

    def _unload(self) -> None:
        self._session = None

    def describe(self) -> dict[str, Any]:
        info = super().describe()
        if self._session is not None:
            info['providers'] = self._session.get_providers()
        info['model_path'] = str(self.model_path)
        return info
