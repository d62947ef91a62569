"""ONNX Runtime runner (backend ``onnx``); ``execution_provider`` picks the EP."""

from __future__ import annotations

import ast
import json
from typing import Any

import numpy as np

from ..artifacts.onnx_export import LABELS_METADATA_KEY, ONNX_FILE, ensure_onnx
from ..loaders import check_weights
from ..platform.cpu import cpu_info
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
        f"unknown execution_provider '{name}' "
        f"(use one of: {', '.join(EXECUTION_PROVIDERS)})")


def labels_from_metadata(meta: dict[str, str]) -> list[str] | None:
    """Class names stored in an ONNX model's metadata (ours, or an Ultralytics export's)."""
    if LABELS_METADATA_KEY in meta:
        return [str(v) for v in json.loads(meta[LABELS_METADATA_KEY])]
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
            self.cache_hit = None
        else:
            entry = ensure_onnx(cfg.manifest, cfg.weights, cfg.cache, cfg.precision)
            self.model_path = entry.file(ONNX_FILE)
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
            self._session = ort.InferenceSession(str(self.model_path), sess_options=options,
                                                 providers=providers,
                                                 provider_options=provider_options)
        except Exception as exc:  # noqa: BLE001 - ORT raises its own exception types
            raise RunnerError(f"ONNX Runtime cannot load '{self.model_path}': {exc}") from exc
        model_input = self._session.get_inputs()[0]
        self._input_name = model_input.name
        # Symbolic (str) or unknown (None) height and width: any shape runs (rect inference).
        self.dynamic_shapes = len(model_input.shape) == 4 and all(
            not isinstance(d, int) for d in model_input.shape[2:])
        meta = self._session.get_modelmeta().custom_metadata_map
        self.labels = labels_from_metadata(meta)

    def infer(self, tensor: np.ndarray) -> list[np.ndarray]:
        if self._session is None:
            raise RunnerError('runner is not loaded')
        return self._session.run(None, {self._input_name: tensor})

    def _unload(self) -> None:
        self._session = None

    def describe(self) -> dict[str, Any]:
        import onnxruntime as ort

        info = super().describe()
        info['runtime'] = f'ONNX Runtime {ort.__version__}'
        if self._session is not None:
            providers = self._session.get_providers()
            info['providers'] = providers
            info['device'] = 'cpu' if providers[0] == 'CPUExecutionProvider' else \
                (self.config.device or 'default')
            if providers[0] == 'CPUExecutionProvider':
                info.update(cpu_info().describe())
        info['model_path'] = str(self.model_path)
        return info
