"""A reduced precision measured against fp32 when its model is loaded, and held to a budget.

When a model loads at a type other than fp32 (bf16, fp16, int8: what the runner really
computes, ``Runner.compute_type``), the same model is loaded at fp32 on the same backend and
both run the validation set (:mod:`.artifacts.validation`) through the task's own pre- and
post-processing at the manifest's thresholds; :mod:`.accuracy` says how far the reduced
answers are from fp32's. The result is an entry of the engine cache, keyed on the weights,
the model's definition, the exact artifact (an int8 one carries its calibration), the
backend, the type, the runtime, the device and the validation images: a cached engine keeps
its number and a later configure only reads it.

The manifest's ``accuracy`` budget then decides (``AccuracyBudget``): within it, the model
runs; below it, ``precision: auto`` loads and runs the fp32 model instead, an explicit
precision runs with one warning, or is refused with
``strict``. When no validation set can be had the precision runs unmeasured, with one line
saying why (refused with ``strict``).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from .accuracy import Agreement, agreement
from .artifacts.cache import ArtifactCache, CacheError
from .artifacts.calibration import CalibrationError, calibration_image
from .artifacts.onnx_export import weights_sha256
from .artifacts.validation import ValidationError, ValidationSet, validation_set
from .runners.base import RunnerError
from .text import clip

#: Bump when what is measured changes (the measures, the images' handling).
MEASURE_VERSION = 2  # 2: every image at input_size
AGREEMENT_FILE = 'agreement.json'

Log = Callable[[str], None]


@dataclass(frozen=True)
class PrecisionCheck:
    """What the check found for one model: its agreement (None: not measured) and why."""

    compute_type: str
    agreement: Agreement | None
    #: The validation set's source ('the default set ...'), or why nothing was measured.
    note: str
    cached: bool = False

    def line(self) -> str:
        """Return the configure log's line for this check."""
        if self.agreement is None:
            return f'precision {self.compute_type}: not measured against fp32 ({self.note})'
        where = ', cached' if self.cached else ''
        return f'{self.agreement.line(self.compute_type)} ({self.note}{where})'


def _results(model: Any, decoded: list[Any]) -> list[Any]:
    """Run every validation image through ``model`` (task pre/post-processing included).

    Every image at the manifest's ``input_size`` (letterboxed there, not at its own rect
    shape): one compiled shape a model instead of one per aspect ratio, which made the check
    cost 2-3 times a first configure of YOLOv8n (seven shapes compiled twice, fp32 and
    reduced); the arithmetic measured is the same.
    """
    params = model.default_params()
    shape = tuple(model.manifest.input_size)
    out = []
    for image in decoded:
        result = model.process(image, 'bgr8', params, shape=shape)
        out.append(result.depth if model.manifest.task == 'depth' else result)
    return out


def _artifact_id(artifact: Any) -> str:
    """Return what identifies the exact artifact a runner loaded ('' for the weights).

    An OpenVINO IR's content hash, a TensorRT engine's cache key, an ONNX model's bytes'
    hash or its path (the weights' hash covers a user's own file).
    """
    if artifact is None or isinstance(artifact, (str, Path)):
        return ''
    if getattr(artifact, 'sha256', None):
        return str(artifact.sha256)
    entry = getattr(artifact, 'entry', None)
    if entry is not None:
        return f'engine {entry.key}'
    model = getattr(artifact, 'model', None)
    data = getattr(model, 'data', None)
    if data is not None:
        return hashlib.sha256(data).hexdigest()
    return str(getattr(model, 'path', ''))


def cache_fields(model: Any, images: ValidationSet) -> dict[str, Any]:
    """Return the measurement's cache key: everything that changes the agreement."""
    runner, manifest = model.runner, model.manifest
    facts = runner.describe()
    definition = asdict(manifest)
    for volatile in ('name', 'source', 'backends', 'precisions', 'calibration_dir',
                     'validation_dir', 'accuracy'):
        definition.pop(volatile, None)
    return {
        'weights_sha256': weights_sha256(runner.config.weights),
        # The int8 IR (or engine) differs with its calibration set, whose hash is in its own
        # key, and with an accuracy-controlled quantization.
        'artifact': _artifact_id(runner.config.artifact),
        'model': json.dumps(definition, sort_keys=True, default=str),
        'backend': runner.config.backend,
        'precision': runner.config.precision,
        'compute_type': runner.compute_type(),
        'runtime': str(facts.get('runtime', '')),
        'device': str(facts.get('device_name') or facts.get('device') or ''),
        # Caps the CPU kernels oneDNN picks (AMX, AVX-512 BF16): another type of arithmetic.
        'isa': os.environ.get('ONEDNN_MAX_CPU_ISA', ''),
        'validation_sha256': images.sha256,
        'measure': MEASURE_VERSION,
    }


def _measure(model: Any, make_fp32: Callable[[], Any], images: ValidationSet,
             cache: ArtifactCache) -> tuple[Agreement, bool, Any]:
    """Return (agreement, cache hit, the fp32 model if one was loaded for it)."""
    fp32: list[Any] = []

    def build(folder: Path) -> None:
        # The fp32 twin loads on another thread while the images are decoded and the reduced
        # model runs the set (its load is the longer path: it starts first; compiling is
        # mostly one thread, so the two overlap on a CPU of two cores and more).
        with ThreadPoolExecutor(1, thread_name_prefix='precision-check') as pool:
            loading = pool.submit(make_fp32)
            try:
                decoded = [calibration_image(path) for path in images.images]
                reduced = _results(model, decoded)
            finally:
                fp32.append(loading.result())
        measured = agreement(model.manifest.task, _results(fp32[0], decoded), reduced)
        (folder / AGREEMENT_FILE).write_text(json.dumps(asdict(measured), indent=2))

    try:
        entry = cache.get_or_build(model.manifest.name, 'agreement',
                                   cache_fields(model, images), build, files=(AGREEMENT_FILE,))
        data = json.loads(entry.read_verified(AGREEMENT_FILE))
        return Agreement(**data), entry.hit, fp32[0] if fp32 else None
    except BaseException:
        for loaded in fp32:
            loaded.close()
        raise


def check_precision(model: Any, make_fp32: Callable[[], Any], cache: ArtifactCache,
                    log: Log, validation_dir: str = '') -> PrecisionCheck:
    """Measure ``model`` against fp32 (cached) unless it runs fp32; log one line.

    ``make_fp32()`` loads the same model at fp32 on the same backend (only on a cache miss).
    The fp32 model is closed here; :func:`apply_budget` may load it again.
    ``validation_dir``: the manifest's, resolved like its weights.
    """
    compute = model.runner.compute_type()
    if compute == 'fp32':
        return PrecisionCheck(compute, None, 'fp32')
    config = model.runner.config
    if 'fp32' not in (model.manifest.precisions or ('fp32',)):
        # A pre-quantized model, say: there is no fp32 to compare with.
        found = PrecisionCheck(compute, None, "the model has no fp32 form (its manifest's "
                               f"precisions: {', '.join(model.manifest.precisions)})")
        log(found.line())
        return found
    try:
        images = validation_set(validation_dir, config.calibration_dir, log)
    except ValidationError as exc:
        found = PrecisionCheck(compute, None, clip(exc, 400))
        log(found.line())
        return found
    try:
        measured, hit, fp32 = _measure(model, make_fp32, images, cache)
    except (CacheError, CalibrationError, OSError, RunnerError) as exc:
        found = PrecisionCheck(compute, None, f'the measurement failed: {clip(exc, 400)}')
        log(found.line())
        return found
    if fp32 is not None:
        # Freeing a compiled model takes a fifth of a second: nothing waits for it but the
        # interpreter's exit (not a daemon: OpenVINO aborts when its objects die mid-exit).
        threading.Thread(target=fp32.close, name='precision-check-close').start()
    found = PrecisionCheck(compute, measured, images.source, hit)
    log(found.line())
    return found


def within_budget(found: PrecisionCheck, manifest: Any) -> bool:
    """Whether the measured agreement loses at most the manifest's ``max_drop``.

    ``max_drop: 0`` asks for fp32's answers: a reduced precision never meets it (agreeing on
    a few images promises nothing about the next one).
    """
    if found.agreement is None:
        return True
    max_drop = manifest.accuracy.max_drop
    return max_drop > 0 and found.agreement.drop() <= max_drop + 1e-9


def apply_budget(model: Any, found: PrecisionCheck, requested: str,
                 make_fp32: Callable[[], Any], log: Log) -> Any:
    """Return the model to run: ``model``, or fp32 when ``auto``'s choice is below budget.

    Raises RunnerError for a precision below budget (or unmeasured) under ``strict``.
    """
    manifest = model.manifest
    budget = manifest.accuracy
    name = f"model '{clip(manifest.name)}'"
    if found.agreement is None:
        if budget.strict and found.compute_type != 'fp32':
            raise RunnerError(f'{name}: precision {found.compute_type} could not be measured '
                              f'against fp32 ({found.note}) and its manifest says '
                              '`accuracy: {strict: true}`')
        return model
    if within_budget(found, manifest):
        return model
    why = (f'{found.agreement.value:.3f} {found.agreement.measure} of fp32 is below '
           f'{1 - budget.max_drop:.3f} (accuracy.max_drop {budget.max_drop:g})'
           if budget.max_drop > 0 else 'accuracy.max_drop 0 asks for fp32\'s answers')
    if requested == 'auto':
        log(f"precision auto: {name}: not '{found.compute_type}': {why}; running fp32")
        model.close()
        return make_fp32()
    if budget.strict:
        raise RunnerError(f'{name}: precision {found.compute_type}: {why}, and its manifest '
                          'says `accuracy: {strict: true}`: use fp32, or raise max_drop')
    log(f'warning: {name}: precision {found.compute_type}: {why}; running it as asked '
        "(precision auto would take fp32; `accuracy: {strict: true}` refuses it)")
    return model


__all__ = ['AGREEMENT_FILE', 'MEASURE_VERSION', 'PrecisionCheck', 'apply_budget',
           'cache_fields', 'check_precision', 'within_budget']
