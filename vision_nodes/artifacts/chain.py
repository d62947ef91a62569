"""The artifact chain: every conversion a runner's artifact goes through, as cached steps.

::

    weights ──export──▶ ONNX ──fp16──▶ fp16 ONNX            (ONNX Runtime GPU providers)
                          │ └──────────▶ TensorRT engine      (fp32/fp16/int8, per GPU)
                          └──convert──▶ OpenVINO IR ──NNCF──▶ INT8 IR
                                                    └─────────▶ compiled blobs (GPU/NPU)
    OpenVINO IR or INT8 IR ──PrePostProcessor──▶ u8-input IR (the pre-processing embedded)
    ONNX or fp16 ONNX ──Cast, Mul, Transpose──▶ u8-input ONNX (GPU execution providers,
                                                             TensorRT engines)

Each step is an entry of the engine cache keyed on its parent's hash and on every version
that changes its result (:mod:`.onnx_export`, :mod:`.onnx_fp16`, :mod:`.openvino_convert`,
:mod:`.quantize`, :mod:`.tensorrt_build`, :mod:`.openvino_u8_input`,
:mod:`.onnx_u8_input`). The pipeline asks one :class:`ArtifactChain` for
the finished artifact of an :class:`~.types.ArtifactRequest` (the registry's: backend,
resolved precision, device facts) with :meth:`ArtifactChain.artifact`, and hands the result
to the runner, which only loads it.

int8 calibration uses one :class:`~.calibration.CalibrationSet` for every backend, turned into
tensors by the :class:`~.calibration.Preprocessor` the caller makes from the model's task.
"""

from __future__ import annotations

import hashlib
import importlib
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from .cache import CacheEntry, CacheError, ArtifactCache
from .calibration import CalibrationError, CalibrationSet, Preprocessor, calibration_set
from .types import (ArtifactRequest, EngineArtifact, Log, OnnxArtifact, OnnxModel, OpenVinoIr,
                    model_profile, nhwc_profile, workspace_bytes)
from ..manifest import ModelManifest
from ..text import clip

#: Folder inside the engine cache for OpenVINO's compiled blobs (its ``CACHE_DIR``).
OPENVINO_COMPILED_DIR = 'openvino-compiled'


def _no_log(_: str) -> None:
    pass


class ArtifactChain:
    """Asks the cache for each step's entry, building it (and its parents) on a miss.

    ``preprocessor_for(manifest)`` returns the model's calibration preprocessing; without it
    int8 calibration is refused (the pipeline always gives it).
    ``accuracy_control_for(manifest, calibration_dir)`` returns what quantizing within
    the manifest's declared accuracy budget needs (None: quantize without one).
    """

    def __init__(self, cache: ArtifactCache, log: Log = _no_log,
                 preprocessor_for: Callable[[ModelManifest], Preprocessor] | None = None,
                 accuracy_control_for: Callable[[ModelManifest, str], Any] | None = None
                 ) -> None:
        self.cache = cache
        self.log = log
        self.preprocessor_for = preprocessor_for
        self.accuracy_control_for = accuracy_control_for

    def artifact(self, request: ArtifactRequest) -> Any:
        """Return the finished artifact ``request`` names (the weights' path for 'weights')."""
        manifest, weights = request.manifest, request.weights
        if request.kind == 'onnx':
            model = self.onnx(manifest, weights)
            artifact = OnnxArtifact(model, self._fp16_for(manifest, model, request.fp16_for)
                                    if request.fp16_for else None)
            return self._onnx_u8_twins(manifest, artifact) \
                if request.u8_input and request.u8_for else artifact
        if request.kind == 'openvino':
            ir = self.openvino_ir(manifest, weights)
            if request.precision == 'int8':
                ir = self._int8_unless_quantized(manifest, ir, request.calibration_dir)
            if request.u8_input:
                ir = replace(ir, u8_input=self._u8_twin(manifest, ir))
            return replace(ir, compile_cache=self.openvino_compile_cache()) \
                if request.compile_cache else ir
        if request.kind == 'tensorrt':
            return self._engine(request)
        return weights

    # -- calibration ------------------------------------------------------------------------
    def calibration(self, manifest: ModelManifest, folder: str
                    ) -> tuple[CalibrationSet, Preprocessor]:
        """Return the calibration set of ``folder`` and the model's preprocessing for it."""
        images = calibration_set(folder, log=self.log)
        if self.preprocessor_for is None:
            raise CalibrationError('int8 calibration needs the model\'s preprocessing: load '
                                   'the model through vision_nodes.pipeline')
        return images, self.preprocessor_for(manifest)

    # -- ONNX -------------------------------------------------------------------------------
    def onnx(self, manifest: ModelManifest, weights: Path) -> OnnxModel:
        """Return the model as fp32 ONNX: the manifest's own ``.onnx`` (by path) or the export."""
        from ..loaders import check_weights
        from .onnx_export import ONNX_FILE, ensure_onnx

        if manifest.architecture == 'onnx':
            return OnnxModel(check_weights(weights), None, None)
        entry = ensure_onnx(manifest, weights, self.cache, 'fp32', log=self.log)
        return OnnxModel(entry.file(ONNX_FILE), entry.read_verified(ONNX_FILE), entry.hit)

    def fp16_onnx(self, manifest: ModelManifest, model: OnnxModel) -> OnnxModel:
        """Return the fp16 conversion of ``model`` (inputs and outputs stay fp32)."""
        from .onnx_fp16 import FP16_ONNX_FILE, ensure_fp16_onnx

        entry = ensure_fp16_onnx(manifest.name, model.read(), self.cache, self.log)
        return OnnxModel(entry.file(FP16_ONNX_FILE), entry.read_verified(FP16_ONNX_FILE),
                         entry.hit)

    def _fp16_for(self, manifest: ModelManifest, model: OnnxModel, provider: str) -> OnnxModel:
        """Return the fp16 graph ``provider`` runs; a failure names the provider."""
        try:
            return self.fp16_onnx(manifest, model)
        except (CacheError, OSError) as exc:
            raise CacheError(f'{provider}: {clip(exc, 600)}') from exc

    def onnx_u8_input(self, manifest: ModelManifest, model: OnnxModel) -> OnnxModel:
        """Return ``model`` taking the u8 NHWC image, its pre-processing embedded (cached)."""
        from .onnx_u8_input import U8_ONNX_FILE, ensure_u8_onnx

        entry = ensure_u8_onnx(manifest.name, model.read(), manifest.preprocessing,
                               self.cache, self.log)
        hit = entry.hit if model.hit is None else model.hit and entry.hit
        return OnnxModel(entry.file(U8_ONNX_FILE), entry.read_verified(U8_ONNX_FILE), hit)

    def _onnx_u8_twins(self, manifest: ModelManifest, artifact: OnnxArtifact) -> OnnxArtifact:
        """Return ``artifact`` with the u8-input twins of its graphs.

        A model that cannot be wrapped is returned as it is (the log says why): it runs on the
        host's float tensor.
        """
        source = artifact.model
        if not self.takes_u8_image(manifest, source):
            return artifact
        return replace(artifact, u8=self.onnx_u8_input(manifest, source),
                       fp16_u8=self.onnx_u8_input(manifest, artifact.fp16)
                       if artifact.fp16 else None)

    def takes_u8_image(self, manifest: ModelManifest, source: OnnxModel) -> bool:
        """Whether ``source`` (the fp32 ONNX) can take the u8 image; the log says why not.

        The one check for every runtime that runs the u8-input graph (ONNX Runtime's GPU
        providers, TensorRT): one 4-D float image input of 3 channels, weights inside.
        """
        try:
            import onnx

            from .onnx_u8_input import why_not_wrappable

            # The user's own file is read without the external weights it may keep beside it.
            reason = why_not_wrappable(
                onnx.load(str(source.path), load_external_data=False)
                if source.data is None else onnx.ModelProto.FromString(source.data))
        except ImportError:
            reason = "the 'onnx' package is not installed"
        except Exception as exc:  # noqa: BLE001 - protobuf's errors; the runner says more
            reason = f'it cannot be read ({type(exc).__name__})'
        if reason:
            self.log(f"'{clip(manifest.name)}' takes the host's float tensor, not the u8 image: "
                     f'{reason}')
        return reason is None

    # -- TensorRT ---------------------------------------------------------------------------
    def tensorrt_engine(self, manifest: ModelManifest, weights: Path, precision: str,
                        calibration_dir: str, *, trt: Any, rt: Any, gpu: Any,
                        u8_input: bool = False) -> CacheEntry:
        """Return the engine entry for ``trt``'s version, ``gpu`` and ``precision``.

        With ``u8_input`` the engine takes the u8 NHWC image where the model can
        (:mod:`.tensorrt_source`). The entry holds the engine (``tb.engine_name``) and
        ``build.json`` (with the fp32 model's class names under ``labels``). Raises a
        CacheError (EngineBuildError) saying why no engine can be had.
        """
        from . import tensorrt_build as tb
        from .tensorrt_source import engine_source

        weak = tb.weakly_typed(trt)
        version = str(trt.__version__)
        if precision == 'int8' and (not weak or not hasattr(trt, 'IInt8EntropyCalibrator2')):
            raise tb.EngineBuildError(
                f'TensorRT {version} has no implicit int8 calibration (removed in '
                "TensorRT 11): use precision 'fp16', or TensorRT 10.x for int8")
        source = engine_source(self, manifest, weights, fp16_graph=precision == 'fp16'
                               and not weak, u8_input=u8_input, tensorrt_version=version)
        profile = model_profile(manifest)
        if source.u8:
            profile = nhwc_profile(profile)
        calibration = self._tensorrt_calibration(manifest, calibration_dir) \
            if precision == 'int8' else None
        workspace = workspace_bytes(gpu)
        fields = tb.engine_cache_fields(
            hashlib.sha256(source.data).hexdigest(), precision, profile, version, gpu,
            strongly_typed=not weak, calibration=calibration[0].sha256 if calibration else None,
            workspace=workspace, external_data=source.external, embedded=source.embedded)
        log = self.log

        def build() -> tuple[bytes, dict[str, Any]]:
            log(f"building a TensorRT {version} {precision} engine for "
                f"'{clip(manifest.name)}' on {clip(gpu.name)} (sm {gpu.sm}): this takes "
                'minutes; it is cached for the next start')
            inputs = None
            if calibration:
                images, preprocessor = calibration
                # TensorRT calibrates at its calibration profile's opt shape: input_size, and
                # on what the network input takes (the u8 image for a u8-input graph).
                inputs = (images.tensors(preprocessor, u8=source.u8), len(images.images))
            engine, facts = tb.build_engine(
                trt, source.data, precision, manifest.input_size, profile,
                strongly_typed=not weak, log=log, calibration=inputs, rt=rt,
                onnx_path=source.path, workspace=workspace,
                timing_cache=tb.timing_cache_path(self.cache, version, gpu))
            facts['labels'] = tb.onnx_labels(source.labels_from)
            log(f"TensorRT engine for '{clip(manifest.name)}' built in "
                f"{facts['build_seconds']} s")
            return engine, facts

        return tb.ensure_engine(self.cache, manifest.name, fields, build)

    def _engine(self, request: ArtifactRequest) -> EngineArtifact:
        """Return the engine for the request's GPU (made current: the build runs on it)."""
        from ..platform import cuda
        from . import tensorrt_build as tb

        trt, rt = importlib.import_module('tensorrt'), cuda.cuda_runtime()
        cuda.set_device(rt, request.gpu.index)
        entry = self.tensorrt_engine(request.manifest, request.weights, request.precision,
                                     request.calibration_dir, trt=trt, rt=rt, gpu=request.gpu,
                                     u8_input=request.u8_input)
        return EngineArtifact(entry, tb.engine_name(entry, request.manifest.name,
                                                    request.precision))

    def _tensorrt_calibration(self, manifest: ModelManifest, folder: str
                              ) -> tuple[CalibrationSet, Preprocessor]:
        from .tensorrt_build import EngineBuildError

        folder = folder or manifest.calibration_dir or ''
        if not folder:
            raise EngineBuildError("precision 'int8' needs calibration images: set the "
                                   '`calibration_dir` parameter to a folder of typical camera '
                                   'images (a few hundred), or use fp16')
        try:
            return self.calibration(manifest, folder)
        except CalibrationError as exc:
            raise EngineBuildError(str(exc)) from None

    # -- OpenVINO ---------------------------------------------------------------------------
    def openvino_ir(self, manifest: ModelManifest, weights: Path) -> OpenVinoIr:
        """Return the fp32 IR (converted through the cache) or the manifest's own IR, verified."""
        from ..loaders import read_weights
        from .openvino_convert import IR_BIN, IR_XML, ensure_openvino_ir, read_ir_source

        if manifest.architecture == 'openvino':
            source = read_ir_source(weights)
            xml, data = read_weights(source.xml), read_weights(source.bin)
            return OpenVinoIr(xml, data, source.xml, 'weights', None, source.labels,
                              _ir_sha256(xml, data))
        entry = ensure_openvino_ir(manifest, weights, self.cache, self.log)
        xml, data = entry.read_verified(IR_XML), entry.read_verified(IR_BIN)
        return OpenVinoIr(xml, data, entry.file(IR_XML), 'ir', entry.hit, None,
                          _ir_sha256(xml, data))

    def openvino_int8(self, manifest: ModelManifest, parent: OpenVinoIr,
                      read_parent: Callable[[], Any], rect: bool, calibration_dir: str
                      ) -> OpenVinoIr:
        """Return the INT8 IR of ``parent``, quantized with NNCF on the calibration set on a miss.

        ``read_parent()`` returns the parent as an ``openvino.Model`` (called on a miss);
        with ``rect`` each image is calibrated at the rect shape a frame like it runs at.
        """
        from .openvino_convert import IR_BIN, IR_XML
        from .quantize import ensure_int8_ir

        images, preprocessor = self.calibration(manifest, calibration_dir)
        control = self.accuracy_control_for(manifest, calibration_dir) \
            if self.accuracy_control_for is not None and manifest.accuracy.declared else None
        entry = ensure_int8_ir(manifest, parent.sha256, read_parent, images, preprocessor,
                               rect, self.cache, self.log, control)
        hit = entry.hit if parent.hit is None else parent.hit and entry.hit
        xml, data = entry.read_verified(IR_XML), entry.read_verified(IR_BIN)
        return OpenVinoIr(xml, data, entry.file(IR_XML), 'int8-ir', hit, parent.labels,
                          _ir_sha256(xml, data))

    def _int8_unless_quantized(self, manifest: ModelManifest, ir: OpenVinoIr,
                               calibration_dir: str) -> OpenVinoIr:
        """Return the INT8 IR of ``ir``, or ``ir`` itself when it is quantized already.

        A model with dynamic height and width that letterboxes with ``rect`` is calibrated at
        the rect shape each image runs at. An IR OpenVINO cannot read is returned as is: the
        runner reads it and says why.
        """
        from ..platform import openvino as ov_facts

        try:
            model = ov_facts.read_model(ir.xml, ir.weights)[0]
        except RuntimeError:
            return ir
        if ov_facts.is_quantized(model):
            return ir
        rect = ov_facts.dynamic_hw(model) and manifest.rect and \
            manifest.preprocessing.letterbox
        return self.openvino_int8(manifest, ir, lambda: model, rect, calibration_dir)

    def _u8_twin(self, manifest: ModelManifest, ir: OpenVinoIr) -> OpenVinoIr:
        """Return the u8-input twin of ``ir`` (the parent is read only on a miss)."""
        from ..platform import openvino as ov_facts

        return self.openvino_u8_input(manifest, ir,
                                      lambda: ov_facts.read_model(ir.xml, ir.weights)[0])

    def openvino_u8_input(self, manifest: ModelManifest, parent: OpenVinoIr,
                          read_parent: Callable[[], Any]) -> OpenVinoIr:
        """Return ``parent`` taking the u8 NHWC image, its pre-processing embedded (cached).

        ``read_parent()`` returns the parent as an ``openvino.Model`` (called on a miss).
        """
        from .openvino_convert import IR_BIN, IR_XML
        from .openvino_u8_input import ensure_u8_input_ir

        entry = ensure_u8_input_ir(manifest, parent.sha256, read_parent, self.cache, self.log)
        xml, data = entry.read_verified(IR_XML), entry.read_verified(IR_BIN)
        return OpenVinoIr(xml, data, entry.file(IR_XML), f'{parent.kind}+u8', parent.hit,
                          parent.labels, _ir_sha256(xml, data))

    def openvino_compile_cache(self) -> Path:
        """Return the folder for OpenVINO's compiled blobs (``CACHE_DIR``), created if needed."""
        folder = self.cache.root / OPENVINO_COMPILED_DIR
        folder.mkdir(parents=True, exist_ok=True)
        return folder


def _ir_sha256(xml: bytes, weights: bytes) -> str:
    return hashlib.sha256(hashlib.sha256(xml).digest()
                          + hashlib.sha256(weights).digest()).hexdigest()


__all__ = ['ArtifactChain', 'OPENVINO_COMPILED_DIR']
