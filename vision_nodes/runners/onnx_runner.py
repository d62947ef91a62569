"""ONNX Runtime runner (backend ``onnx``); ``execution_provider`` picks the EP."""

from __future__ import annotations

import ast
import hashlib
import json
from typing import Any

import numpy as np

from ..artifacts.cache import CacheError
from ..artifacts.onnx_export import LABELS_METADATA_KEY, ONNX_FILE, ensure_onnx
from ..artifacts.onnx_fp16 import FP16_ONNX_FILE, ensure_fp16_onnx
from ..limits import MAX_MANIFEST_BYTES
from ..loaders import check_weights, read_weights
from ..platform.cpu import cpu_info
from ..text import clip
from .base import Runner, RunnerConfig, RunnerError
from .onnx_providers import (CPU, EXECUTION_PROVIDERS, check_precision, needs_fp16_graph,
                             provider_candidates, provider_options,
                             resolve_execution_provider)

__all__ = ['EXECUTION_PROVIDERS', 'OnnxRunner', 'labels_from_metadata',
           'resolve_execution_provider']


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
        #: The model as loaded: the verified bytes of a cache entry, or the user's file path
        #: (an .onnx of their own may keep its weights in external data files).
        self._model: Any = None
        self._model_sha256 = ''

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
        candidates = provider_candidates(cfg.execution_provider, ort.get_available_providers())
        if cfg.manifest.architecture == 'onnx':
            self.model_path = check_weights(cfg.weights)
            self._model = str(self.model_path)
            self.cache_hit = None
        else:
            entry = ensure_onnx(cfg.manifest, cfg.weights, cfg.cache, 'fp32')
            self.model_path = entry.file(ONNX_FILE)
            self._model = entry.read_verified(ONNX_FILE)  # what runs is what was checked
            self.cache_hit = entry.hit
        auto = resolve_execution_provider(cfg.execution_provider) == 'auto'
        failures = []
        for provider in candidates:
            try:
                self._session = self._create_session(ort, provider)
            except RunnerError as exc:
                if not auto:
                    raise
                failures.append(f'{provider}: {exc}')
                cfg.log(f"execution_provider auto: '{provider}' failed ({clip(exc, 600)}); "
                        'trying the next one')
                continue
            if auto:
                cfg.log(f"execution_provider auto: chose '{provider}'")
            break
        else:
            raise RunnerError('execution_provider auto found no provider that loads '
                              f"'{clip(self.model_path)}': " + '; '.join(failures))
        inputs = self._session.get_inputs()
        if len(inputs) != 1 or inputs[0].type != 'tensor(float)':
            found = ', '.join(f'{clip(i.name, 40)} {clip(i.type, 40)}' for i in inputs[:4])
            raise RunnerError(f"'{clip(self.model_path)}' takes inputs ({found}); a vision "
                              'model here takes one float32 image tensor: export it so')
        self._input_name = inputs[0].name
        # Symbolic (str) or unknown (None) height and width: any shape runs (rect inference).
        self.dynamic_shapes = len(inputs[0].shape) == 4 and all(
            not isinstance(d, int) for d in inputs[0].shape[2:])
        meta = self._session.get_modelmeta().custom_metadata_map
        try:
            self.labels = labels_from_metadata(meta)
        except Exception as exc:  # noqa: BLE001 - metadata is untrusted text
            raise RunnerError(f"'{clip(self.model_path)}': its class names (metadata) cannot "
                              f"be read ({type(exc).__name__}): list `labels` in the manifest"
                              ) from None

    def _sha256(self) -> str:
        """Hash of the model as loaded (the bytes checked, or the user's file read once)."""
        if not self._model_sha256:
            data = self._model if isinstance(self._model, bytes) else \
                read_weights(self.model_path)
            self._model_sha256 = hashlib.sha256(data).hexdigest()
        return self._model_sha256

    def model_input_shape(self) -> tuple[int | None, ...] | None:
        if self._session is None:
            return None
        return tuple(d if isinstance(d, int) and d > 0 else None
                     for d in self._session.get_inputs()[0].shape)

    def _create_session(self, ort: Any, provider: str) -> Any:
        """Create a session on ``provider`` (CPU takes what it cannot run) or say why not."""
        cfg = self.config
        check_precision(provider, cfg.precision)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Worker threads spin while a run is in progress but not after it: otherwise they keep
        # every core busy for a while after each frame, slowing the decode, the publish and
        # the DDS threads (of this process and of the camera's) that follow.
        options.add_session_config_entry('session.force_spinning_stop', '1')
        model: Any = self._model
        if needs_fp16_graph(provider, cfg.precision):
            try:
                source = model if isinstance(model, bytes) else read_weights(self.model_path)
                fp16 = ensure_fp16_onnx(cfg.manifest.name, source, cfg.cache, cfg.log)
                model = fp16.read_verified(FP16_ONNX_FILE)
            except (CacheError, OSError) as exc:
                raise RunnerError(f'{provider}: {clip(exc, 600)}') from exc
        provider_opts = provider_options(
            provider, device=cfg.device, precision=cfg.precision, cache=cfg.cache,
            model=cfg.manifest.name, onnx_sha256=self._sha256(),
            ort_version=ort.__version__)
        providers = [provider] if provider == CPU else [provider, CPU]
        all_options = [provider_opts] if provider == CPU else [provider_opts, {}]
        try:
            session = ort.InferenceSession(model, sess_options=options, providers=providers,
                                           provider_options=all_options)
        except Exception as exc:  # noqa: BLE001 - ORT raises its own exception types
            raise RunnerError(f"ONNX Runtime cannot load '{clip(self.model_path)}' on "
                              f'{provider}: {clip(exc, 600)}') from exc
        used = session.get_providers()
        if not used or used[0] != provider:
            # ONNX Runtime only warns when a provider fails to start and runs on the CPU.
            raise RunnerError(f"ONNX Runtime could not start {provider} (the session runs on "
                              f"{', '.join(used) or 'nothing'}); see its log above")
        return session

    def infer(self, tensor: np.ndarray) -> list[np.ndarray]:
        if self._session is None:
            raise RunnerError('runner is not loaded')
        return self._session.run(None, {self._input_name: tensor})

    def _unload(self) -> None:
        self._session = None
        self._model = None

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
