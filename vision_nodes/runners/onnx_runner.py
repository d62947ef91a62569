"""ONNX Runtime runner (backend ``onnx``); ``execution_provider`` picks the EP."""

from __future__ import annotations

import ast
import json
from typing import Any

import numpy as np

from ..artifacts.cache import CacheError, file_sha256
from ..artifacts.onnx_export import LABELS_METADATA_KEY, ONNX_FILE, ensure_onnx
from ..artifacts.onnx_fp16 import FP16_ONNX_FILE, ensure_fp16_onnx
from ..loaders import check_weights
from ..text import clip
from .base import Runner, RunnerConfig, RunnerError
from .onnx_providers import (CPU, EXECUTION_PROVIDERS, check_precision, needs_fp16_graph,
                             provider_candidates, provider_options,
                             resolve_execution_provider)

__all__ = ['EXECUTION_PROVIDERS', 'OnnxRunner', 'labels_from_metadata',
           'resolve_execution_provider']


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
        candidates = provider_candidates(cfg.execution_provider, ort.get_available_providers())
        if cfg.manifest.architecture == 'onnx':
            self.model_path = check_weights(cfg.weights)
            self.cache_hit = None
        else:
            entry = ensure_onnx(cfg.manifest, cfg.weights, cfg.cache, 'fp32')
            self.model_path = entry.file(ONNX_FILE)
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
                              f"'{self.model_path}': " + '; '.join(failures))
        self._input_name = self._session.get_inputs()[0].name
        meta = self._session.get_modelmeta().custom_metadata_map
        self.labels = labels_from_metadata(meta)

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
        model: Any = str(self.model_path)
        if needs_fp16_graph(provider, cfg.precision):
            try:
                fp16 = ensure_fp16_onnx(cfg.manifest.name, self.model_path.read_bytes(),
                                        cfg.cache, cfg.log)
                model = fp16.read_verified(FP16_ONNX_FILE)
            except (CacheError, OSError) as exc:
                raise RunnerError(f'{provider}: {clip(exc, 600)}') from exc
        provider_opts = provider_options(
            provider, device=cfg.device, precision=cfg.precision, cache=cfg.cache,
            model=cfg.manifest.name, onnx_sha256=file_sha256(self.model_path),
            ort_version=ort.__version__)
        providers = [provider] if provider == CPU else [provider, CPU]
        all_options = [provider_opts] if provider == CPU else [provider_opts, {}]
        try:
            session = ort.InferenceSession(model, sess_options=options, providers=providers,
                                           provider_options=all_options)
        except Exception as exc:  # noqa: BLE001 - ORT raises its own exception types
            raise RunnerError(f"ONNX Runtime cannot load '{self.model_path}' on {provider}: "
                              f'{clip(exc, 600)}') from exc
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

    def describe(self) -> dict[str, Any]:
        info = super().describe()
        if self._session is not None:
            info['providers'] = self._session.get_providers()
        info['model_path'] = str(self.model_path)
        return info
