"""ONNX Runtime runner (backend ``onnx``); ``execution_provider`` picks the EP.

A session on a GPU provider is first created with CPU fallback disabled: ONNX Runtime would
otherwise place every node that provider lacks on the CPU without a word (and a provider
that fails to start entirely leaves a CPU-only session, which is refused). When the model
does need the CPU for some nodes, the session is created again with the CPU behind the
provider and the log says so.

On the providers of ``U8_INPUT_PROVIDERS`` the session runs the chain's u8-input graph
(``artifacts.onnx_u8_input``): the task hands the letterboxed u8 image and the provider
converts it on the device. A float tensor given to such a runner (a caller of its own) runs
on the float graph, loaded on the same provider when first needed.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from ..artifacts.labels import labels_from_metadata
from ..artifacts.types import OnnxArtifact, model_profile, nhwc_profile
from ..images import U8_INPUT_ORDER as TENSOR_ORDER
from ..loaders import read_weights
from ..platform.cpu import cpu_info
from ..platform.devices import DEVICE_KINDS
from ..text import clip, show_path
from .base import Runner, RunnerConfig, RunnerError
from .onnx_providers import (AUTO_ORDER, CPU, CPU_FALLBACK_REFUSED, EXECUTION_PROVIDERS,
                             NO_CPU_FALLBACK, TENSORRT, check_device, check_precision,
                             device_kinds, needs_fp16_graph, provider_candidates,
                             provider_options, resolve_execution_provider, session_providers,
                             short_name, takes_u8_graph)

__all__ = ['EXECUTION_PROVIDERS', 'OnnxRunner', 'labels_from_metadata',
           'resolve_execution_provider']


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
        #: The session runs the u8-input graph (input (N, H, W, 3) uint8).
        self._u8_session = False
        #: The float graph's session on the u8 session's provider, made when first needed.
        self._float_session: Any = None
        self._float_input = ''

    @property
    def supports_u8_input(self) -> bool:  # type: ignore[override]
        """When the session runs the u8-input graph (the chain made one for its provider)."""
        return self._u8_session

    def _artifact(self) -> OnnxArtifact:
        """Return the model the pipeline got from the artifact chain."""
        if not isinstance(self.config.artifact, OnnxArtifact):
            raise RunnerError('the ONNX runner loads the artifact chain\'s ONNX model: create '
                              'it through vision_nodes.pipeline.create_runner')
        return self.config.artifact

    @classmethod
    def unavailable_reason(cls, backend: str) -> str | None:
        try:
            import onnxruntime  # noqa: F401
        except ImportError:
            return "ONNX Runtime is not installed (pip install 'vision_nodes[onnx]')"
        return None

    @classmethod
    def device_kinds(cls, config: RunnerConfig) -> tuple[str, ...]:
        """Take what the execution provider honours (``auto``: any provider this build has)."""
        provider = resolve_execution_provider(config.execution_provider)
        if provider != 'auto':
            return device_kinds(provider)
        import onnxruntime as ort

        available = ort.get_available_providers()
        kinds = {k for p in AUTO_ORDER if p in available for k in device_kinds(p)}
        return tuple(k for k in DEVICE_KINDS if k in kinds)

    @classmethod
    def device_user(cls, config: RunnerConfig) -> str:
        provider = resolve_execution_provider(config.execution_provider)
        return f"backend 'onnx' (execution provider {short_name(provider)})"

    def _load(self) -> None:
        import onnxruntime as ort

        cfg = self.config
        candidates = provider_candidates(cfg.execution_provider, ort.get_available_providers(),
                                         ort.__version__)
        onnx = self._artifact().model
        self.model_path, self.cache_hit = onnx.path, onnx.hit
        # What runs is what was checked: the entry's verified bytes, or the user's own path.
        self._model = onnx.data if onnx.data is not None else str(self.model_path)
        auto = resolve_execution_provider(cfg.execution_provider) == 'auto'
        failures = []
        for provider in candidates:
            try:
                self._session, self._u8_session = self._create_session(ort, provider)
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
                              f"{show_path(self.model_path)}: " + '; '.join(failures))
        inputs = self._session.get_inputs()
        dtype = 'tensor(uint8)' if self._u8_session else 'tensor(float)'
        if len(inputs) != 1 or inputs[0].type != dtype:
            found = ', '.join(f'{clip(i.name, 40)} {clip(i.type, 40)}' for i in inputs[:4])
            raise RunnerError(f"{show_path(self.model_path)} takes inputs ({found}); a vision "
                              'model here takes one float32 image tensor: export it so')
        self._input_name = inputs[0].name
        self.output_names = [o.name for o in self._session.get_outputs()]
        # Symbolic (str) or unknown (None) height and width: any shape runs (rect inference).
        self.dynamic_shapes = len(inputs[0].shape) == 4 and all(
            not isinstance(d, int) for d in self._nchw(inputs[0].shape)[2:])
        self.max_batch = self.batch_limit(bool(inputs[0].shape) and
                                          not isinstance(inputs[0].shape[0], int))
        meta = self._session.get_modelmeta().custom_metadata_map
        try:
            self.labels = labels_from_metadata(meta)
        except Exception as exc:  # noqa: BLE001 - metadata is untrusted text
            raise RunnerError(f"{show_path(self.model_path)}: its class names (metadata) cannot "
                              f"be read ({type(exc).__name__}): list `labels` in the manifest"
                              ) from None

    def _sha256(self) -> str:
        """Hash of the model as loaded (the bytes checked, or the user's file read once)."""
        if not self._model_sha256:
            data = self._model if isinstance(self._model, bytes) else \
                read_weights(self.model_path)
            self._model_sha256 = hashlib.sha256(data).hexdigest()
        return self._model_sha256

    def _nchw(self, shape: list[Any]) -> list[Any]:
        """Return the input's dimensions in NCHW order (the u8 graph's are NHWC)."""
        return [shape[i] for i in (0, 3, 1, 2)] if self._u8_session and len(shape) == 4 \
            else list(shape)

    def model_input_shape(self) -> tuple[int | None, ...] | None:
        if self._session is None:
            return None
        return tuple(d if isinstance(d, int) and d > 0 else None
                     for d in self._nchw(self._session.get_inputs()[0].shape))

    def blank_input(self, height: int, width: int) -> np.ndarray:
        """Return the warm-up's blank frame: the u8 image when the session takes it."""
        if self._u8_session:
            return np.zeros((1, height, width, 3), np.uint8)
        return super().blank_input(height, width)

    @staticmethod
    def _session_options(ort: Any, strict: bool, provider: str) -> Any:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if provider == CPU:
            # The memory pattern plans one block for every intermediate tensor of a shape: on
            # the CPU it is no faster, and a batch of four frames would keep ~70 MiB more.
            options.enable_mem_pattern = False
        # Worker threads spin while a run is in progress but not after it: otherwise they keep
        # every core busy for a while after each frame, slowing the decode, the publish and
        # the DDS threads (of this process and of the camera's) that follow.
        options.add_session_config_entry('session.force_spinning_stop', '1')
        if strict:
            options.add_session_config_entry(NO_CPU_FALLBACK, '1')
        return options

    def _trt_profile(self, ort: Any, model: Any, u8: bool = False) -> tuple[str, Any] | None:
        """(input name, min/opt/max shapes) for the TensorRT provider; None if static.

        ``u8``: the model is the u8-input graph, whose input is NHWC.
        """
        try:
            import onnx

            graph = (onnx.ModelProto.FromString(model) if isinstance(model, bytes) else
                     onnx.load(str(model), load_external_data=False)).graph
            initializers = {t.name for t in graph.initializer}
            first = next(i for i in graph.input if i.name not in initializers)
            name = first.name
            shape = [d.dim_value if d.HasField('dim_value') else None
                     for d in first.type.tensor_type.shape.dim]
        except ImportError:
            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            session = ort.InferenceSession(model, sess_options=options, providers=[CPU])
            name = session.get_inputs()[0].name
            shape = [d if isinstance(d, int) else None for d in session.get_inputs()[0].shape]
        hw = shape[1:3] if u8 else shape[2:4]
        if len(shape) != 4 or hw[0] is not None or hw[1] is not None:
            return None
        profile = model_profile(self.config.manifest)
        return name, nhwc_profile(profile) if u8 else profile

    def _graph_for(self, provider: str, u8_allowed: bool) -> tuple[Any, str, bool]:
        """(model, its SHA-256, whether it takes the u8 image) that ``provider`` runs.

        The fp16 conversion where the provider needs it, the chain's u8-input twin where the
        provider takes it and the pipeline asked for it.
        """
        artifact = self._artifact()
        fp16 = needs_fp16_graph(provider, self.config.precision)
        if fp16 and artifact.fp16 is None:
            raise RunnerError(f'{provider}: the fp16-converted graph was not prepared '
                              '(load the runner through vision_nodes.pipeline)')
        twin = (artifact.fp16_u8 if fp16 else artifact.u8) \
            if u8_allowed and takes_u8_graph(provider) else None
        if twin is not None:
            return twin.data, hashlib.sha256(twin.data).hexdigest(), True
        return (artifact.fp16.data if fp16 else self._model), self._sha256(), False

    def _create_session(self, ort: Any, provider: str, u8_allowed: bool = True
                        ) -> tuple[Any, bool]:
        """Create a session on ``provider`` (CPU only for what it cannot run) or say why not.

        Returns it and whether it runs the u8-input graph (never without ``u8_allowed``).
        """
        cfg = self.config
        check_precision(provider, cfg.precision)
        check_device(provider, cfg.device)
        model, sha256, u8 = self._graph_for(provider, u8_allowed)
        provider_opts = provider_options(
            provider, device=cfg.device, precision=cfg.precision, cache=cfg.cache,
            model=cfg.manifest.name, onnx_sha256=sha256,
            ort_version=ort.__version__,
            profile=self._trt_profile(ort, model, u8) if provider == TENSORRT else None)
        available = ort.get_available_providers()
        strict = provider != CPU
        try:
            session = self._new_session(ort, model, provider, provider_opts, available, strict)
        except RunnerError as exc:
            if not strict or CPU_FALLBACK_REFUSED not in str(exc):
                raise
            cfg.log(f"{provider}: some nodes of '{clip(cfg.manifest.name)}' run on the CPU "
                    f'(ONNX Runtime has no {provider} kernel for them, or keeps small shape '
                    'computations there); the rest runs on the provider')
            session = self._new_session(ort, model, provider, provider_opts, available, False)
        used = session.get_providers()
        if not used or used[0] != provider:
            # ONNX Runtime only warns when a provider fails to start and runs on the CPU.
            raise RunnerError(f"ONNX Runtime could not start {provider} (the session runs on "
                              f"{', '.join(used) or 'nothing'}); see its log above")
        return session, u8

    def _new_session(self, ort: Any, model: Any, provider: str, options: dict[str, Any],
                     available: list[str], strict: bool) -> Any:
        providers, all_options = session_providers(provider, options, available,
                                                   cpu=not strict)
        try:
            return ort.InferenceSession(
                model, sess_options=self._session_options(ort, strict, provider),
                providers=providers, provider_options=all_options)
        except Exception as exc:  # noqa: BLE001 - ORT raises its own exception types
            raise RunnerError(f"ONNX Runtime cannot load {show_path(self.model_path)} on "
                              f'{provider}: {clip(exc, 600)}') from exc

    def infer(self, tensor: np.ndarray) -> list[np.ndarray]:
        """Run the float NCHW tensor, or the u8 NHWC image when the session takes it."""
        if self._session is None:
            raise RunnerError('runner is not loaded')
        if self._u8_session and tensor.dtype != np.uint8:
            return self._float().run(None, {self._float_input: tensor})
        return self._session.run(None, {self._input_name: tensor})

    def _float(self) -> Any:
        """Return the float graph's session on the u8 session's provider (made when needed)."""
        if self._float_session is None:
            import onnxruntime as ort

            session, _ = self._create_session(ort, self._session.get_providers()[0],
                                              u8_allowed=False)
            self._float_input = session.get_inputs()[0].name
            self._float_session = session
        return self._float_session

    def _unload(self) -> None:
        self._session = self._float_session = None
        self._model = None
        self._u8_session = False

    def describe(self) -> dict[str, Any]:
        import onnxruntime as ort

        info = super().describe()
        info['runtime'] = f'ONNX Runtime {ort.__version__}'
        if self._session is not None:
            providers = self._session.get_providers()
            info['providers'] = providers
            info['device'] = 'cpu' if providers[0] == CPU else \
                (self.config.device or 'default')
            if providers[0] == CPU:
                info.update(cpu_info().describe())
        info['model_path'] = str(self.model_path)
        info['input'] = f'u8 NHWC {TENSOR_ORDER}, pre-processing in the model' \
            if self._u8_session else 'float32 NCHW'
        return info
