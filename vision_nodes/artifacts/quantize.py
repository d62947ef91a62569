"""OpenVINO IR → INT8 IR by NNCF post-training quantization: one step of the artifact chain.

Activations are calibrated on a folder of images (``calibration_dir``), preprocessed exactly as
frames are: by the caller's :class:`~.calibration.Preprocessor` (the model's task), at the
rect shape each image would run at, with the manifest's stride, when the model takes several
shapes. The entry's key holds the parent IR's hash, the calibration set's content hash (every
image's name and SHA-256), the preprocessing (and the stride when it is not 32), the OpenVINO
and NNCF versions and this quantizer's version. The images are the same
:class:`~.calibration.CalibrationSet` TensorRT calibrates on.

With an accuracy budget (the manifest's ``accuracy.max_drop``, declared there), the model is
quantized with NNCF's ``quantize_with_accuracy_control``: layers go back to floating point,
the most harmful first, until the quantized model's answers on the validation images agree
with fp32's within ``max_drop``. The agreement is the caller's measure
(:class:`AccuracyControl`: the task's post-processing and :mod:`vision_nodes.accuracy`), the
same the precision check reports. The budget and the validation set join the key.

What stays in floating point: the model's output tail, i.e. the operations after its last
learned convolution (for YOLO: the box decoding, the DFL softmax and its fixed convolution,
the class sigmoid). They hold coordinates in pixels and exact constants, where int8 steps
would move boxes by pixels; they cost little time.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import io
import json
import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from .cache import CacheEntry, ArtifactCache
from .calibration import CalibrationError, CalibrationSet, Preprocessor
from .openvino_convert import IR_BIN, IR_XML, openvino_version
from ..manifest import ModelManifest
from ..platform.openvino import is_quantized
from ..text import show_path

#: Bump whenever the quantized IR would change for the same inputs.
QUANTIZER_VERSION = 1
#: Below this many images the log warns that int8 accuracy may suffer.
FEW_CALIBRATION_IMAGES = 32

Log = Callable[[str], None]


@dataclass(frozen=True)
class AccuracyControl:
    """What accuracy-controlled quantization needs from the caller, who knows the task.

    ``make_items()``: each validation image as (network input, its post-processing
    metadata), made only when quantizing; ``postprocess(outputs, meta)``: the task's results
    for one image; ``measure(reference, results)``: their agreement in 0..1 (1: the same).
    """

    make_items: Callable[[], Sequence[tuple[Any, Any]]]
    postprocess: Callable[[list[Any], Any], Any]
    measure: Callable[[Sequence[Any], Sequence[Any]], float]
    max_drop: float
    #: The validation set's content hash and size (the cache key's view of it).
    sha256: str
    images: int

    def key(self) -> dict[str, Any]:
        """Return what this control adds to the INT8 IR's cache key."""
        from ..platform.cpu import cpu_info, int8_float_type

        return {'max_drop': self.max_drop, 'validation_sha256': self.sha256,
                'images': self.images, 'float_layers': int8_float_type(cpu_info())}


def nncf_version() -> str | None:
    """Return the installed NNCF's version without importing it (it imports slowly), or None."""
    try:
        return importlib.metadata.version('nncf')
    except importlib.metadata.PackageNotFoundError:
        return None


def int8_cache_fields(parent_sha256: str, calibration: CalibrationSet,
                      manifest: ModelManifest, rect: bool,
                      control: AccuracyControl | None = None) -> dict[str, Any]:
    """Return the fields that make up the INT8 IR's cache key.

    The stride shapes the rect calibration tensors; it joins the key only when it is not the
    default 32, so the entries of stride-32 models keep their keys; so does an accuracy
    control, absent without one.
    """
    fields = {
        'parent_sha256': parent_sha256,
        'calibration_sha256': calibration.sha256,
        'calibration_images': len(calibration.images),
        'input_size': list(manifest.input_size),
        'rect': rect,
        'preprocessing': asdict(manifest.preprocessing),
        'openvino': openvino_version(),
        'nncf': nncf_version(),
        'quantizer': f'vision_nodes-nncf/{QUANTIZER_VERSION}',
        'preset': 'mixed',
        'float_tail': True,
    }
    if rect and int(manifest.stride) != 32:
        fields['stride'] = int(manifest.stride)
    if control is not None:
        fields['accuracy_control'] = control.key()
    return fields


def float_tail(model: Any) -> list[str]:
    """Names of the operations left in floating point: everything after the last learned conv.

    An operation is in the tail when no convolution is reachable from it towards the outputs,
    not counting convolutions fed (through any path) by a softmax: those are fixed-weight
    decoders such as YOLO's DFL, whose integer-valued weights int8 would not keep exact.
    """
    ops = model.get_ordered_ops()
    consumers: dict[str, list[Any]] = {}
    for op in ops:
        for inp in op.inputs():
            source = inp.get_source_output().get_node().get_friendly_name()
            consumers.setdefault(source, []).append(op)
    after_softmax: set[str] = set()
    for op in ops:  # topological order: a node's producers come first
        if op.get_type_name() == 'Softmax' or any(
                i.get_source_output().get_node().get_friendly_name() in after_softmax
                for i in op.inputs()):
            after_softmax.add(op.get_friendly_name())

    def learned_conv(op: Any) -> bool:
        return op.get_type_name() == 'Convolution' and op.get_friendly_name() not in after_softmax

    conv_below: dict[str, bool] = {}
    for op in reversed(ops):
        name = op.get_friendly_name()
        conv_below[name] = any(learned_conv(c) or conv_below[c.get_friendly_name()]
                               for c in consumers.get(name, []))
    return [op.get_friendly_name() for op in ops
            if op.get_type_name() not in ('Parameter', 'Constant', 'Result')
            and not conv_below[op.get_friendly_name()] and not learned_conv(op)]


class _Progress:
    """Turns images fed to NNCF into log lines, about ten per pass over the set."""

    def __init__(self, total: int, log: Log) -> None:
        self.total, self.log = total, log
        self.seen = 0
        self.every = max(1, total // 10)
        self.started = time.monotonic()

    def tick(self) -> None:
        self.seen += 1
        done = (self.seen - 1) % self.total + 1
        if done % self.every == 0 or done == self.total:
            rate = (time.monotonic() - self.started) / self.seen
            left = (self.total - done) * rate
            self.log(f'int8: calibration image {done}/{self.total} '
                     f'(pass {(self.seen - 1) // self.total + 1}, {rate:.2f} s per image, '
                     f'about {left:.0f} s left in this pass)')


class _AccuracyLines(logging.Handler):
    """Hands NNCF's accuracy-control lines (metrics, drops, layers reverted) to ``log``."""

    WORDS = ('metric', 'drop', 'revert', 'ranking', 'tuned')

    def __init__(self, log: Log) -> None:
        super().__init__(logging.INFO)
        self.log = log

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if any(word in text.lower() for word in self.WORDS):
            self.log(f'int8: NNCF: {text.strip()[:300]}')


@contextlib.contextmanager
def _validated_as_run(log: Log) -> Iterator[None]:
    """Have NNCF validate a quantized model with the float type its float layers run in.

    NNCF compiles every model it validates with f32 float layers; on a CPU with native bf16
    the node runs an int8 model's float layers in bf16 (``platform.cpu.int8_float_type``),
    which moves its answers as much as int8 does: yolov8n's plain int8 IR on bus.jpg and 11
    more photographs agreed 0.864 (box mAP50-95) with fp32 with f32 float layers and 0.987
    with bf16 ones, on the AMX Xeon. The original model is still validated at f32.
    """
    from ..platform.cpu import cpu_info, int8_float_type

    float_type = int8_float_type(cpu_info())
    try:
        from nncf.quantization.algorithms.accuracy_control import openvino_backend as backend
        original = backend.OVPreparedModel.__init__
    except (ImportError, AttributeError):
        original = None
    if float_type == 'f32' or original is None:
        if original is None:
            log(f'int8: NNCF validates with f32 float layers, not {float_type} as they run')
        yield
        return

    def prepared(self: Any, model: Any, use_fp32_precision: bool = True) -> None:
        original(self, model, use_fp32_precision)
        if use_fp32_precision and is_quantized(model) and hasattr(self, '_compiled_model'):
            import openvino as ov

            self._compiled_model = ov.compile_model(
                model, 'CPU', {'INFERENCE_PRECISION_HINT': float_type})

    backend.OVPreparedModel.__init__ = prepared
    try:
        yield
    finally:
        backend.OVPreparedModel.__init__ = original


def _outputs(compiled: Any, tensor: Any) -> list[Any]:
    """Run one input through a compiled model; return its outputs in the model's order."""
    result = compiled(tensor)
    return [result[out] for out in compiled.outputs]


def _validation_fn(model: Any, control: AccuracyControl, items: Sequence[tuple[Any, Any]],
                   log: Log) -> Callable[[Any, Any], tuple[float, list[float]]]:
    """Return NNCF's validation function: a compiled model's agreement with fp32's answers.

    fp32's answers are computed once here, from ``model`` compiled at f32. The function
    returns the agreement over the items given and each item's own (NNCF ranks layers by
    the items a change hurts).
    """
    import openvino as ov

    started = time.monotonic()
    exact = ov.Core().compile_model(model, 'CPU', {'INFERENCE_PRECISION_HINT': 'f32'})
    reference = [control.postprocess(_outputs(exact, tensor), meta)
                 for tensor, meta in items]
    log(f'int8: fp32 answers on {len(reference)} validation images in '
        f'{time.monotonic() - started:.1f} s; quantizing within accuracy.max_drop '
        f'{control.max_drop:g}')

    def validate(compiled: Any, data: Any) -> tuple[float, list[float]]:
        wanted, got = [], []
        for index, tensor, meta in data:
            wanted.append(reference[index])
            got.append(control.postprocess(_outputs(compiled, tensor), meta))
        each = [control.measure([r], [g]) for r, g in zip(wanted, got)]
        return control.measure(wanted, got), each

    return validate


def quantize_model(model: Any, calibration: CalibrationSet, preprocessor: Preprocessor,
                   rect: bool, log: Log, control: AccuracyControl | None = None) -> Any:
    """Return the INT8 version of an OpenVINO model, calibrated on ``calibration``.

    With ``control``, NNCF's accuracy-controlled quantization keeps its agreement with fp32
    within ``control.max_drop`` (see the module).
    """
    try:
        import nncf
    except ImportError as exc:
        raise CalibrationError("int8 quantization needs NNCF (pip install "
                               "'vision_nodes[openvino]'), or a pre-quantized IR") from exc

    progress = _Progress(len(calibration.images), log)

    def transform(path: Path) -> Any:
        progress.tick()
        return preprocessor.tensor(path, rect)

    dataset = nncf.Dataset(list(calibration.images), transform)
    ignored = nncf.IgnoredScope(names=float_tail(model), validate=False)
    nncf_log = logging.getLogger('nncf')
    level = nncf_log.level
    nncf_log.setLevel(logging.WARNING if control is None else logging.INFO)
    forward = _AccuracyLines(log)
    nncf_log.addHandler(forward)
    try:
        # NNCF draws progress bars on stdout; the log lines above say the same, once.
        with contextlib.redirect_stdout(io.StringIO()):
            if control is None:
                return nncf.quantize(model, dataset, preset=nncf.QuantizationPreset.MIXED,
                                     subset_size=len(calibration.images),
                                     ignored_scope=ignored)
            items = control.make_items()
            validation = nncf.Dataset([(i, tensor, meta)
                                       for i, (tensor, meta) in enumerate(items)])
            with _validated_as_run(log):
                return nncf.quantize_with_accuracy_control(
                    model, dataset, validation, _validation_fn(model, control, items, log),
                    max_drop=control.max_drop, drop_type=nncf.DropType.ABSOLUTE,
                    preset=nncf.QuantizationPreset.MIXED, subset_size=len(calibration.images),
                    ignored_scope=ignored)
    finally:
        nncf_log.removeHandler(forward)
        nncf_log.setLevel(level)


def ensure_int8_ir(manifest: ModelManifest, parent_sha256: str, read_parent: Callable[[], Any],
                   calibration: CalibrationSet, preprocessor: Preprocessor, rect: bool,
                   cache: ArtifactCache, log: Log,
                   control: AccuracyControl | None = None) -> CacheEntry:
    """Return the cached INT8 IR of a parent IR, quantizing it on a miss.

    ``read_parent()`` returns the parent as an ``openvino.Model`` (only called on a miss);
    with ``rect`` each calibration image is fed at the rect shape a frame like it runs at.
    ``control``: quantize within an accuracy budget (declared in the manifest).
    """
    fields = int8_cache_fields(parent_sha256, calibration, manifest, rect, control)

    def build(folder: Path) -> None:
        import openvino as ov

        count = len(calibration.images)
        log(f'int8: quantizing {manifest.name} with NNCF over {count} calibration images '
            f"from {show_path(calibration.folder)} (minutes on a small CPU; done once, then "
            'cached)')
        if count < FEW_CALIBRATION_IMAGES:
            log(f'int8: only {count} calibration images; use {FEW_CALIBRATION_IMAGES}-300 '
                "frames from the robot's own camera for int8 accuracy close to fp32")
        started = time.monotonic()
        quantized = quantize_model(read_parent(), calibration, preprocessor, rect, log,
                                   control)
        ov.save_model(quantized, str(folder / IR_XML), compress_to_fp16=False)
        (folder / 'tools.json').write_text(json.dumps(
            {'openvino': openvino_version(), 'nncf': fields['nncf'],
             'calibration_images': [p.name for p in calibration.images]}, indent=2))
        log(f'int8: quantized in {time.monotonic() - started:.1f} s')

    return cache.get_or_build(manifest.name, 'openvino-int8', fields, build,
                              files=(IR_XML, IR_BIN))
