"""Ultralytics weights (``.pt`` checkpoints) → a PyTorch module, offline, quietly, safely.

Only this module imports ``ultralytics``, and only when called: a runtime-only deployment
(ONNX Runtime, OpenVINO) never imports it. Checkpoints are not loaded with Ultralytics' own
``YOLO(path)``, which unpickles them with ``weights_only=False`` (a crafted file runs code),
but through :mod:`.checkpoint` with the allowlist of :func:`checkpoint_allowlist`.
"""

from __future__ import annotations

import os
import pickle
import types
from pathlib import Path
from typing import Any

from ..limits import MAX_LABEL_CHARS, MAX_LABELS
from ..manifest import ModelManifest
from ..text import clip, show_path
from .checkpoint import Allowlist, load_checkpoint
from .common import ModelLoadError, check_weights, force_offline


def _quiet_ultralytics(cache_dir: Path | None) -> None:
    """Keep ultralytics quiet and out of $HOME by default (offline: :func:`import_ultralytics`)."""
    os.environ.setdefault('YOLO_VERBOSE', 'False')
    if cache_dir is not None:
        os.environ.setdefault('YOLO_CONFIG_DIR', str(cache_dir / 'ultralytics'))


def import_ultralytics(online: bool = False) -> Any:
    """Import and return ``ultralytics``: offline, its import-time thread settings undone.

    Ultralytics decides at its import whether it is online (DNS lookups of public resolvers,
    then connections to them) unless ``YOLO_OFFLINE`` is set, so the process is put offline
    first (:func:`.common.force_offline`), whichever path imports it first: a loader, or a
    BoT-SORT tracker on a node whose models all came from the engine cache. ``online``: the
    demo fetching named weights on a connected machine, the one caller that may go online.

    When ``OMP_NUM_THREADS`` is unset, importing ultralytics sets it to 1. OpenMP reads it once,
    when PyTorch loads it, so a PyTorch imported after that in this process, and every child
    process started later, would run single-threaded, the PyTorch CPU runner on one core of
    many. Here PyTorch is loaded first and the user's setting (or its absence) restored.
    The import also calls ``cv2.setNumThreads(0)`` (for PyTorch's DataLoader workers, which
    this package has none of): every later ``cv2.resize`` of the pre-processing would run on
    one core, 1.7x slower for a 1080p frame on two, but only in a process that had imported
    ultralytics (a first configure's export, a tracker). OpenCV's count is restored too.
    Raises ImportError like a plain import.
    """
    import cv2

    if not online:
        force_offline()
    saved, cv2_threads = os.environ.get('OMP_NUM_THREADS'), cv2.getNumThreads()
    try:
        import torch  # noqa: F401 - see above: load OpenMP before ultralytics changes the env
        import ultralytics
    finally:
        if saved is None:
            os.environ.pop('OMP_NUM_THREADS', None)
        else:
            os.environ['OMP_NUM_THREADS'] = saved
        cv2.setNumThreads(cv2_threads)
    return ultralytics


#: Tasks whose manifests take only Ultralytics weights of that same task.
_SAME_TASK = ('depth', 'segment', 'pose', 'obb', 'classify')


def _check_task(manifest: ModelManifest, task: Any) -> None:
    """Refuse weights of another task for all but detect, and theirs for another task."""
    if task != manifest.task and (task in _SAME_TASK or manifest.task in _SAME_TASK):
        raise ModelLoadError(f"the file holds a {task} model but manifest "
                             f"'{manifest.name}' has task '{manifest.task}': use "
                             f'`task: {task}` or weights of that task')


def _select_one_to_one_head(module: Any) -> None:
    """Run an end-to-end head's NMS-free one-to-one branch (YOLO26, YOLOv10) when it has one.

    Such heads carry two branches: one-to-many (its outputs need NMS; Ultralytics' predict
    runs it by default, ``nms=None``) and one-to-one, whose detections end in a top-k inside
    the network and need no NMS (``predict(nms=False)``, the family's design). Selected before
    fusing, which then drops the other branch; the task recognises the NMS-free output by
    its shape (``tasks/end2end.py``).
    """
    head = module.model[-1] if hasattr(module, 'model') else None
    if getattr(head, 'one2one_cv2', None) is not None and hasattr(module, 'end2end') and \
            callable(getattr(head, 'get_topk_index', None)):
        module.end2end = True
        head.postprocess = types.MethodType(_top_rows, head)


def _top_rows(head: Any, preds: Any) -> Any:
    """Return the head's top-k rows as Ultralytics' ``Detect.postprocess``, in one gather.

    The rows are box, score, class index, extra values (mask coefficients, keypoints).
    Ultralytics gathers the box and the extra columns from separate slices of ``preds``;
    OpenVINO's ONNX conversion folds such a slice into the gather after it and then refuses
    the graph (segment and pose heads: "data and indices must have equal or intersecting
    dimensions"). Gathering the rows, then slicing them, computes the same values.
    """
    import torch

    classes = int(head.nc)
    scores, class_ids, index = head.get_topk_index(preds[..., 4:4 + classes], head.max_det)
    rows = head._gather(preds, index)
    parts = [rows[..., :4], scores, class_ids]
    if preds.shape[-1] > 4 + classes:
        parts.append(rows[..., 4 + classes:])
    return torch.cat(parts, dim=-1)


def _depth_at_input_size(module: Any) -> None:
    """Make the depth head return depth at the input size, as Ultralytics' own export does.

    In eval mode the head returns a quarter-size map and Ultralytics' predictor upsamples it
    (bilinear, corners aligned); in export mode the head does that upsampling itself. Every
    backend then gets the same full-size output from the same graph.
    """
    head = module.model[-1] if hasattr(module, 'model') else None
    if head is None or not hasattr(head, 'cal_a'):
        raise ModelLoadError('this Ultralytics depth model has no Depth head as its last layer')
    head.export = True


def _probabilities_only(module: Any) -> None:
    """Make a classify head return its softmax alone, as Ultralytics' own export does.

    In eval mode the head returns (probabilities, logits); in export mode only the
    probabilities, which every backend then gets as the one output ``output0``.
    """
    head = module.model[-1] if hasattr(module, 'model') else None
    if head is None or not hasattr(head, 'linear'):
        raise ModelLoadError('this Ultralytics classify model has no Classify head as its '
                             'last layer')
    head.export = True


#: Built once per process by :func:`checkpoint_allowlist`.
_ALLOWLIST: list[Allowlist] = []


def _module_method(obj: Any, name: str) -> Any:
    """Stand in for ``getattr`` in checkpoints: only a layer's forward method may be fetched.

    Ultralytics pickles a fused ``Conv`` with ``forward`` set to its ``forward_fuse``, which a
    pickle spells ``getattr(layer, 'forward_fuse')``; a general ``getattr`` would reach any
    attribute of any object built so far.
    """
    import torch

    if isinstance(obj, torch.nn.Module) and name in ('forward', 'forward_fuse'):
        return getattr(type(obj), name).__get__(obj)
    raise pickle.UnpicklingError(
        f'getattr({type(obj).__name__}, {clip(name, 40)}) is not allowed in a checkpoint')


def _classes_of(module: Any, base: type | None) -> list[type]:
    """Classes defined in ``module`` itself (subclasses of ``base`` when given)."""
    return [obj for obj in vars(module).values()
            if isinstance(obj, type) and obj.__module__ == module.__name__
            and (base is None or issubclass(obj, base))]


def checkpoint_allowlist() -> Allowlist:
    """Every global an Ultralytics checkpoint legitimately names, and what to build for it.

    An Ultralytics ``.pt`` pickles the whole model object: the model class
    (``ultralytics.nn.tasks.DetectionModel`` …), its layers (``torch.nn`` and
    ``ultralytics.nn.modules`` classes), a layer's forward method fetched by ``getattr``, and
    training leftovers: loss and assigner objects, argument namespaces, NumPy scalars and
    dtypes, paths. Older checkpoints name a few classes by other module paths; they map to the
    current classes, as Ultralytics itself maps them.
    """
    if _ALLOWLIST:
        return _ALLOWLIST[0]
    import importlib
    import pathlib
    import pkgutil

    import numpy as np
    import torch

    import_ultralytics()
    from ultralytics.nn import modules as layers
    from ultralytics.nn import tasks
    from ultralytics.utils import IterableSimpleNamespace

    rebuilt: dict[str, type] = {}
    called: dict[str, Any] = {}

    def name_of(obj: Any) -> str:
        return f'{obj.__module__}.{obj.__qualname__}'

    for package in (torch.nn.modules, layers):
        for info in pkgutil.iter_modules(package.__path__, package.__name__ + '.'):
            for cls in _classes_of(importlib.import_module(info.name), torch.nn.Module):
                rebuilt[name_of(cls)] = cls
    for cls in _classes_of(tasks, torch.nn.Module):
        rebuilt[name_of(cls)] = cls
    loss = importlib.import_module('ultralytics.utils.loss')
    for module in (loss, importlib.import_module('ultralytics.utils.tal')):
        for cls in _classes_of(module, None):
            rebuilt[name_of(cls)] = cls
    rebuilt['ultralytics.nn.modules.block.Silence'] = torch.nn.Identity  # YOLOv9
    rebuilt['ultralytics.nn.tasks.YOLOv10DetectionModel'] = tasks.DetectionModel
    if hasattr(loss, 'E2EDetectLoss'):
        rebuilt['ultralytics.utils.loss.v10DetectLoss'] = loss.E2EDetectLoss
    called[name_of(IterableSimpleNamespace)] = IterableSimpleNamespace
    called['ultralytics.yolo.utils.IterableSimpleNamespace'] = IterableSimpleNamespace
    called['builtins.getattr'] = _module_method
    called['numpy.dtype'] = np.dtype
    called[name_of(type(np.dtype(np.float64)))] = type(np.dtype(np.float64))
    scalar = np.float64(0).__reduce__()[0]
    called['numpy.core.multiarray.scalar'] = called['numpy._core.multiarray.scalar'] = scalar
    for module_name in ('pathlib', 'pathlib._local'):
        for cls_name in ('PosixPath', 'WindowsPath', 'PurePosixPath', 'PureWindowsPath'):
            pure = cls_name.startswith('Pure')
            called[f'{module_name}.{cls_name}'] = \
                pathlib.PurePosixPath if pure else pathlib.PosixPath
    _ALLOWLIST.append(Allowlist(rebuilt, called))
    return _ALLOWLIST[0]


def _labels(names: Any) -> list[str] | None:
    """Class names from a model's ``names`` (a dict index → name), bounded."""
    if not isinstance(names, dict):
        return None
    if len(names) > MAX_LABELS:
        raise ModelLoadError(f'the checkpoint names {len(names)} classes; at most '
                             f'{MAX_LABELS} are accepted')
    try:
        return [clip(names[i], MAX_LABEL_CHARS) for i in sorted(names)]
    except TypeError as exc:
        raise ModelLoadError(f'the checkpoint\'s class names are not indexed by numbers '
                             f'({clip(exc, 80)})') from None


def load_ultralytics(manifest: ModelManifest, weights: Path,
                     cache_dir: Path | None = None) -> tuple[Any, list[str] | None]:
    """Return ``(module in eval mode on the CPU, labels or None)`` for the manifest's weights.

    The checkpoint is unpickled with :func:`.checkpoint.load_checkpoint` (no code from the
    file runs); then the model is prepared as Ultralytics prepares a loaded checkpoint:
    float32, layers fused, eval mode, in-place activations.
    """
    check_weights(weights)
    _quiet_ultralytics(cache_dir)
    try:
        import_ultralytics()
        import torch
        from ultralytics.nn.tasks import BaseModel, guess_model_task
    except ImportError as exc:
        raise ModelLoadError(
            'loading .pt weights needs the `ultralytics` package (pip install '
            "'vision_nodes[torch]'), or give the manifest an exported .onnx instead") from exc
    ckpt = load_checkpoint(weights, checkpoint_allowlist())
    model = None
    if isinstance(ckpt, dict):
        model = ckpt.get('ema') if ckpt.get('ema') is not None else ckpt.get('model')
    if not isinstance(model, BaseModel):
        raise ModelLoadError(
            f"{show_path(weights)} is a PyTorch file but not an Ultralytics checkpoint (no "
            '`model` entry holding an Ultralytics model): check the `weights` path')
    try:
        _check_task(manifest, guess_model_task(model))
        module = model.float()
        if manifest.task == 'depth':
            _depth_at_input_size(module)
        elif manifest.task == 'classify':
            _probabilities_only(module)
        else:
            _select_one_to_one_head(module)
        if not hasattr(module, 'stride'):
            module.stride = torch.tensor([32.0])
        if hasattr(module, 'fuse'):
            module = module.fuse()
        module = module.eval()
        for layer in module.modules():
            if hasattr(layer, 'inplace'):
                layer.inplace = True
            elif isinstance(layer, torch.nn.Upsample) and \
                    not hasattr(layer, 'recompute_scale_factor'):
                layer.recompute_scale_factor = None  # checkpoints pickled by torch < 1.11
        for param in module.parameters():
            param.requires_grad_(False)
        # A depth model has no classes.
        labels = None if manifest.task == 'depth' else _labels(getattr(module, 'names', None))
    except ModelLoadError as exc:
        raise ModelLoadError(f"{show_path(weights)}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - a checkpoint's objects are untrusted
        raise ModelLoadError(f"{show_path(weights)}: the model in this checkpoint cannot be "
                             f'prepared ({type(exc).__name__}: {clip(exc, 160)})') from None
    from .torch_wrappers import FirstOutput

    return FirstOutput(module).eval(), labels
