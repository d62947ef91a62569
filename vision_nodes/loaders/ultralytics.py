"""Ultralytics weights (``.pt`` checkpoints) → a PyTorch module, offline and quietly.

Only this module imports ``ultralytics``, and only when called: a runtime-only deployment
(ONNX Runtime, OpenVINO) never imports it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..manifest import ModelManifest
from ..text import clip
from .common import ModelLoadError, check_weights


def _quiet_offline_ultralytics(cache_dir: Path | None) -> None:
    """Keep ultralytics off the network and out of $HOME unless the user says otherwise."""
    os.environ.setdefault('YOLO_OFFLINE', '1')
    os.environ.setdefault('YOLO_AUTOINSTALL', 'False')
    os.environ.setdefault('YOLO_VERBOSE', 'False')
    if cache_dir is not None:
        os.environ.setdefault('YOLO_CONFIG_DIR', str(cache_dir / 'ultralytics'))


def import_ultralytics() -> Any:
    """Import and return ``ultralytics`` without its import-time thread setting leaking.

    When ``OMP_NUM_THREADS`` is unset, importing ultralytics sets it to 1. OpenMP reads it once,
    when PyTorch loads it, so a PyTorch imported after that in this process, and every child
    process started later, ran single-threaded: the PyTorch CPU runner took ~1.8x as long on
    two cores. Here PyTorch is loaded first and the user's setting (or its absence) restored.
    Raises ImportError like a plain import.
    """
    saved = os.environ.get('OMP_NUM_THREADS')
    try:
        import torch  # noqa: F401 - see above: load OpenMP before ultralytics changes the env
        import ultralytics
    finally:
        if saved is None:
            os.environ.pop('OMP_NUM_THREADS', None)
        else:
            os.environ['OMP_NUM_THREADS'] = saved
    return ultralytics


def _check_task(manifest: ModelManifest, task: Any, weights: Path) -> None:
    """Refuse depth weights for another task, and other weights for the depth task."""
    if (task == 'depth') != (manifest.task == 'depth'):
        raise ModelLoadError(f"'{clip(str(weights))}' holds a {task} model but manifest "
                             f"'{manifest.name}' has task '{manifest.task}'")


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


def load_ultralytics(manifest: ModelManifest, weights: Path,
                     cache_dir: Path | None = None) -> tuple[Any, list[str] | None]:
    """Return ``(module in eval mode on the CPU, labels or None)`` for the manifest's weights."""
    check_weights(weights)
    _quiet_offline_ultralytics(cache_dir)
    try:
        YOLO = import_ultralytics().YOLO
    except ImportError as exc:
        raise ModelLoadError(
            'loading .pt weights needs the `ultralytics` package (pip install '
            "'vision_nodes[torch]'), or give the manifest an exported .onnx instead") from exc
    try:
        model = YOLO(str(weights))
    except Exception as exc:  # noqa: BLE001 - ultralytics raises many types for bad files
        raise ModelLoadError(f"cannot load '{weights}' with ultralytics: {exc}") from exc
    _check_task(manifest, getattr(model, 'task', None), weights)
    module = model.model
    if manifest.task == 'depth':
        _depth_at_input_size(module)
    if hasattr(module, 'fuse'):
        module = module.fuse()
    module = module.float().eval()
    for param in module.parameters():
        param.requires_grad_(False)
    names = getattr(module, 'names', None)
    labels = [str(names[i]) for i in sorted(names)] \
        if isinstance(names, dict) and manifest.task != 'depth' else None  # depth: no classes
    from .torch_modules import FirstOutput

    return FirstOutput(module).eval(), labels
