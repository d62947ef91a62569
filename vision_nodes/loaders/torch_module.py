"""Weights → a PyTorch module in eval mode, dispatched on the manifest's ``architecture``.

The PyTorch runner and the ONNX exporter call :func:`load_torch_module`; each architecture's
loader lives in its own file and is imported only when that architecture is used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..manifest import ModelManifest
from .common import ModelLoadError


def load_torch_module(manifest: ModelManifest, weights: Path,
                      cache_dir: Path | None = None) -> tuple[Any, list[str] | None]:
    """Return ``(module in eval mode on the CPU, labels or None)`` for the manifest's weights."""
    if manifest.architecture == 'ultralytics':
        from .ultralytics import load_ultralytics

        return load_ultralytics(manifest, weights, cache_dir)
    if manifest.architecture == 'transformers':
        from .transformers import load_transformers

        return load_transformers(manifest, weights, cache_dir)
    raise ModelLoadError(
        f"architecture '{manifest.architecture}' has no PyTorch loader "
        "(PyTorch backends need 'ultralytics' or 'transformers' weights)")
