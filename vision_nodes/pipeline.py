"""The ROS-free core: manifests + backend → loaded models, and image → results.

A :class:`LoadedModel` is one model: its task (pre/post-processing) and its runner (the
network). A :class:`Pipeline` is the models one node runs on one global runtime: they share
the backend, chosen for all of them at once. The node, the demo and the benchmark all go
through here, so there is one code path from image to results.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from .artifacts.cache import ArtifactCache, CacheError, default_cache_dir
from .artifacts.calibration import CalibrationError, Preprocessor
from .artifacts.chain import ArtifactChain
from .manifest import ModelManifest
from .parallel import map_frames
from .platform.cuda import CudaError
from .runners.base import Runner, RunnerConfig, RunnerError
from .runners.registry import Selection, artifact_request, resolve, runner_class, select
from .stage_times import mark
from .tasks import Task, create_task, param_defaults
from .tasks.preprocess import rect_shape
from .text import clip

Log = Callable[[str], None]


def _no_log(_: str) -> None:
    pass


@dataclass
class LoadedModel:
    """A loaded model: its task (pre/post-processing) and its runner (the network)."""

    manifest: ModelManifest
    runner: Runner
    task: Task
    labels: list[str]
    #: A reduced precision's agreement with fp32 (:mod:`.precision_check`); None: not checked.
    precision_check: Any = None
    #: Input shape (height, width) per source resolution, for rect inference.
    _shapes: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict, repr=False)
    _prepared: tuple[int, int] | None = field(default=None, repr=False)

    @property
    def rect(self) -> bool:
        """Whether the network input follows the image's aspect ratio (rect inference)."""
        return (self.manifest.rect and self.manifest.preprocessing.letterbox
                and self.runner.dynamic_shapes)

    def input_shape(self, source_hw: tuple[int, int]) -> tuple[int, int]:
        """Network input (height, width) for a source image of ``source_hw``."""
        if not self.rect:
            return self.manifest.input_size
        shape = self._shapes.get(source_hw)
        if shape is None:
            if len(self._shapes) >= 16:  # a camera changing resolution all the time
                self._shapes.clear()
            shape = self._shapes[source_hw] = rect_shape(
                source_hw, self.manifest.input_size, self.manifest.stride)
        return shape

    def default_params(self) -> Any:
        """Return the task's parameters at the manifest's defaults (what a node starts with)."""
        return self.task.make_params(param_defaults(self.manifest))

    def process(self, image: np.ndarray, encoding: str, params: Any,
                shape: tuple[int, int] | None = None) -> Any:
        """Run one decoded image array through the model; results are in source terms.

        ``shape``: the network input's (height, width) instead of the image's rect shape.
        """
        shape = self._prepare(image, shape)
        tensor, meta = self.task.preprocess(image, encoding, shape)
        mark('preprocess')
        outputs = self.runner.infer(tensor)
        mark('inference')
        result = self.task.postprocess(outputs, meta, params)
        mark('postprocess')
        return result

    def _prepare(self, image: np.ndarray, shape: tuple[int, int] | None = None
                 ) -> tuple[int, int]:
        shape = shape or self.input_shape(image.shape[:2])
        if shape != self._prepared:
            self.runner.prepare_shape(shape)
            self._prepared = shape
        return shape

    def process_batch(self, frames: Sequence[tuple[np.ndarray, str]], params: Any
                      ) -> list[Any]:
        """Run several decoded images; return each one's results, in ``frames``' order.

        Frames whose network input has the same shape (rect inference: the same aspect
        ratio) run together, up to the runner's ``max_batch`` frames a run; other shapes run
        as runs of their own. Each result equals :meth:`process` on its frame alone.
        """
        groups: dict[tuple[int, int], list[int]] = {}
        for index, (image, _) in enumerate(frames):
            groups.setdefault(self.input_shape(image.shape[:2]), []).append(index)
        results: list[Any] = [None] * len(frames)
        size = max(1, self.runner.max_batch)
        for indices in groups.values():
            for start in range(0, len(indices), size):
                chunk = indices[start:start + size]
                done = self._run_batch([frames[i] for i in chunk], params)
                for index, result in zip(chunk, done):
                    results[index] = result
        return results

    def _run_batch(self, frames: Sequence[tuple[np.ndarray, str]], params: Any) -> list[Any]:
        """Frames of one network shape as one run (at most ``max_batch`` of them)."""
        if len(frames) == 1:
            return [self.process(frames[0][0], frames[0][1], params)]
        shape = self._prepare(frames[0][0])
        # Each frame's pre-processing, and its copy into the runner's input, side by side
        # (parallel.py: they release the GIL); the network runs once on the batch; its
        # outputs are decoded together where the task can, else frame by frame side by side.
        prepared = map_frames(lambda frame: self.task.preprocess(frame[0], frame[1], shape),
                              frames)
        first = prepared[0][0]
        batch = self.runner.input_buffer((len(prepared),) + first.shape[1:], first.dtype)
        map_frames(lambda item: np.copyto(batch[item[0]:item[0] + 1], item[1][0]),
                   enumerate(prepared))
        mark('preprocess')
        outputs = self.runner.infer(batch)
        mark('inference')
        metas = [meta for _, meta in prepared]
        together = getattr(self.task, 'postprocess_batch', None)
        done = together(outputs, metas, params) if together is not None else None
        if done is None:
            done = map_frames(
                lambda item: self.task.postprocess([out[item[0]:item[0] + 1] for out in outputs],
                                                   item[1], params),
                enumerate(metas))
        mark('postprocess')
        return done

    def close(self) -> None:
        """Unload the runner and free its memory."""
        self.runner.unload()


@dataclass
class Pipeline:
    """Several models on one global runtime (one backend, one precision request)."""

    models: list[LoadedModel]
    backend: str

    def close(self) -> None:
        """Unload every model."""
        for model in self.models:
            model.close()


def calibration_preprocessor(manifest: ModelManifest) -> Preprocessor:
    """How int8 calibration images become network inputs: the model's own task, its stride.

    Every backend calibrates through this (the artifact chain never imports the tasks); a
    network with the pre-processing embedded calibrates on the task's u8 image.
    """
    task, u8_task = create_task(manifest), create_task(manifest)
    if getattr(u8_task, 'supports_u8_input', False):
        u8_task.u8_input = True
    return Preprocessor(
        prepare=lambda image, shape: task.preprocess(image, 'bgr8', shape)[0],
        rect_shape=lambda source_hw: rect_shape(source_hw, manifest.input_size,
                                                manifest.stride),
        input_size=tuple(manifest.input_size),
        prepare_u8=(lambda image, shape: u8_task.preprocess(image, 'bgr8', shape)[0])
        if getattr(u8_task, 'u8_input', False) else None)


def calibration_tensor(path: Path, manifest: ModelManifest, rect: bool) -> np.ndarray:
    """One calibration image as the network input a frame like it gets (rect shape if ``rect``)."""
    return calibration_preprocessor(manifest).tensor(Path(path), rect)


def accuracy_control(manifest: ModelManifest, calibration_dir: str,
                     log: Log = _no_log) -> Any:
    """Return what quantizing ``manifest`` within its accuracy budget needs from its task.

    The validation images (:mod:`.artifacts.validation`) as network inputs at the manifest's
    ``input_size``, as the precision check runs them (one shape, whatever rect inference
    runs), the task's post-processing at the manifest's thresholds and
    its agreement measure. None, with one line, when there are no validation images: int8 is
    then quantized without the budget and the precision check judges it.
    """
    from .accuracy import agreement
    from .artifacts.calibration import calibration_image
    from .artifacts.quantize import AccuracyControl
    from .artifacts.validation import ValidationError, validation_set

    folder = str(manifest.resolve_path(manifest.validation_dir)) \
        if manifest.validation_dir else ''
    try:
        images = validation_set(folder, calibration_dir, log)
    except ValidationError as exc:
        log(f'int8: quantizing without the accuracy budget: {clip(exc, 400)}')
        return None
    task = create_task(manifest)
    params = task.make_params(param_defaults(manifest))
    depth = manifest.task == 'depth'

    def make_items() -> list[tuple[Any, Any]]:
        items = []
        for path in images.images:
            image = calibration_image(path)
            items.append(task.preprocess(image, 'bgr8', tuple(manifest.input_size)))
        return items

    def postprocess(outputs: list[Any], meta: Any) -> Any:
        result = task.postprocess(outputs, meta, params)
        return result.depth if depth else result

    return AccuracyControl(make_items, postprocess,
                           lambda ref, got: agreement(manifest.task, ref, got).value,
                           manifest.accuracy.max_drop, images.sha256, len(images.images))


def artifact_chain(cache: ArtifactCache, log: Log = _no_log) -> ArtifactChain:
    """Return the chain that builds runners' artifacts, with the tasks' own processing."""
    return ArtifactChain(cache, log, preprocessor_for=calibration_preprocessor,
                         accuracy_control_for=lambda manifest, folder: accuracy_control(
                             manifest, folder, log))


def _artifact(config: RunnerConfig, chain: ArtifactChain | None, u8_input: bool) -> Any:
    """Ask the artifact chain for what the runner of the resolved ``config`` loads."""
    chain = chain or artifact_chain(config.cache, config.log)
    try:
        return chain.artifact(replace(artifact_request(config), u8_input=u8_input))
    except CalibrationError as exc:
        raise RunnerError(str(exc)) from exc
    except (CacheError, CudaError) as exc:  # EngineBuildError is a CacheError
        if config.backend == 'tensorrt':
            raise RunnerError(f"backend 'tensorrt': {exc}") from exc
        raise


def create_runner(config: RunnerConfig, log: Log = _no_log,
                  chain: ArtifactChain | None = None, u8_input: bool = False) -> Runner:
    """Create and load the runner of the named backend ``config.backend``.

    Everything is decided first (:func:`~.runners.registry.resolve`: backend, device,
    precision, device facts), then the artifact chain (``chain``, by default one over
    ``config.cache`` with the tasks' calibration preprocessing) gives the finished artifact,
    and the runner only loads it. With ``u8_input`` a runner that can take the u8 image also
    gets the model with the pre-processing embedded. ``auto`` is decided by
    :func:`~.runners.registry.select` before (:func:`build_pipelines` loads its candidates in
    order), so it is refused here.
    """
    config = resolve(config, log)
    cls = runner_class(config.backend)
    u8_input = u8_input and cls.supports_u8_input
    runner = cls(replace(config, artifact=_artifact(config, chain, u8_input)))
    runner.load()
    return runner


def _config(manifest: ModelManifest, backend: str, model_dir: str, cache_dir: str | Path,
            **options: Any) -> RunnerConfig:
    if not options.get('calibration_dir') and manifest.calibration_dir:
        options['calibration_dir'] = str(manifest.resolve_path(manifest.calibration_dir,
                                                               model_dir or None))
    return RunnerConfig(manifest=manifest, weights=manifest.weights_path(model_dir or None),
                        backend=backend, cache=ArtifactCache(cache_dir or default_cache_dir()),
                        **options)


def _model(manifest: ModelManifest, runner: Runner, task: Task) -> LoadedModel:
    # None is `labels: from_weights`; a manifest's list is never empty (refused at load).
    labels = list(manifest.labels) if manifest.labels is not None else \
        list(runner.labels or [])
    check = getattr(task, 'check_model', None)  # the model's outputs fit the task and labels
    if check is not None:
        try:
            check(runner.output_shapes, labels, runner.output_names)
        except BaseException:
            runner.unload()
            raise
    if runner.supports_u8_input and getattr(task, 'supports_u8_input', False):
        runner.takes_u8 = task.u8_input = True  # the pre-processing runs in the runtime
    if runner.supports_device_outputs and getattr(task, 'decodes_device_outputs', False):
        runner.device_outputs = True  # decode and NMS where the outputs are
    return LoadedModel(manifest, runner, task, labels)


def _checked(model: LoadedModel, backend: str, model_dir: str, cache_dir: str | Path,
             options: dict[str, Any]) -> LoadedModel:
    """Measure a reduced precision against fp32 and apply the manifest's budget to it."""
    from .precision_check import apply_budget, check_precision

    manifest, log = model.manifest, options['log']

    def make_fp32(quiet: bool) -> LoadedModel:
        settings = dict(options, precision='fp32', log=_no_log if quiet else log)
        config = _config(manifest, backend, model_dir, cache_dir, **settings)
        task = create_task(manifest)
        runner = create_runner(config, settings['log'],
                               u8_input=getattr(task, 'supports_u8_input', False))
        return _model(manifest, runner, task)

    folder = str(manifest.resolve_path(manifest.validation_dir, model_dir or None)) \
        if manifest.validation_dir else ''
    found = check_precision(model, lambda: make_fp32(True), model.runner.config.cache, log,
                            folder)
    chosen = apply_budget(model, found, options['precision'], lambda: make_fp32(False), log)
    chosen.precision_check = found
    return chosen


def build_pipeline(manifest: ModelManifest, backend: str | Selection, *, model_dir: str = '',
                   cache_dir: str | Path = '', device: str = '', precision: str = 'fp32',
                   execution_provider: str = '', calibration_dir: str = '',
                   torch_compile: bool = True, device_io: bool = True,
                   cuda_graphs: bool = True, log: Log = _no_log, max_batch: int = 1,
                   check_precision: bool = True) -> LoadedModel:
    """Create the task, resolve the weights, create and load the runner (one model).

    The same path as :func:`build_pipelines` (``auto`` included), for one model.
    """
    return build_pipelines(
        [manifest], backend, model_dir=model_dir, cache_dir=cache_dir, device=device,
        precision=precision, execution_provider=execution_provider,
        calibration_dir=calibration_dir, torch_compile=torch_compile, device_io=device_io,
        cuda_graphs=cuda_graphs, log=log, max_batch=max_batch,
        check_precision=check_precision).models[0]


def build_pipelines(manifests: Sequence[ModelManifest], backend: str | Selection, *,
                    model_dir: str = '', cache_dir: str | Path = '', device: str = '',
                    precision: str = 'fp32', execution_provider: str = '',
                    calibration_dir: str = '', torch_compile: bool = True,
                    device_io: bool = True, cuda_graphs: bool = True,
                    log: Log = _no_log, max_batch: int = 1,
                    check_precision: bool = True) -> Pipeline:
    """Load every model on one backend: the candidates of :func:`~.runners.registry.select`.

    ``backend`` is a backend name, ``auto``, or a :class:`~.runners.registry.Selection` the
    caller already made (the decision is taken once). With ``auto`` the candidates are
    loaded best first: one on which any model fails to load is given up as a whole (the
    models already loaded are unloaded) and the next one is tried, so all models always
    share one backend. A named backend that fails raises its error. ``max_batch`` > 1 loads
    every model for runs of up to that many frames (:meth:`LoadedModel.process_batch`).
    With ``check_precision`` a model loaded at a reduced precision is measured against
    fp32 and held to its manifest's accuracy budget (:mod:`.precision_check`).
    """
    if not manifests:
        raise ValueError('no model to load')
    if max_batch > 1:
        manifests = [replace(m, max_batch=int(max_batch)) for m in manifests]
    tasks = [create_task(m) for m in manifests]
    options = dict(device=device, precision=precision, execution_provider=execution_provider,
                   calibration_dir=calibration_dir, torch_compile=torch_compile,
                   device_io=device_io, cuda_graphs=cuda_graphs, log=log)
    selection = backend if isinstance(backend, Selection) else select(manifests, backend, log)
    backend = selection.requested
    failures = []
    for candidate in selection.candidates:
        loaded: list[LoadedModel] = []
        try:
            for manifest, task in zip(manifests, tasks):
                config = _config(manifest, candidate, model_dir, cache_dir, **options)
                runner = create_runner(config, log, u8_input=getattr(
                    task, 'supports_u8_input', False))
                loaded.append(_model(manifest, runner, task))
                if check_precision:
                    loaded[-1] = _checked(loaded[-1], candidate, model_dir, cache_dir, options)
        except Exception as exc:  # noqa: BLE001 - auto falls back; a named backend re-raises
            for model in loaded:
                model.close()
            if backend != 'auto':
                raise
            failures.append(f'{candidate}: {exc}')
            log(f"backend auto: '{candidate}' failed to load ({clip(exc, 600)}); trying the "
                'next one')
            continue
        if backend == 'auto':
            log(f"backend auto: chose '{candidate}'")
        return Pipeline(loaded, candidate)
    raise RunnerError('backend auto could load no backend: ' + '; '.join(failures))
