"""What every loader shares: its error class and the check that a weights file exists."""

from __future__ import annotations

from pathlib import Path


class ModelLoadError(RuntimeError):
    """Weights that cannot be loaded (missing file, missing package, wrong format)."""


def check_weights(path: Path) -> Path:
    """Raise a clear error when the weights file is absent."""
    if not path.is_file():
        raise ModelLoadError(
            f"weights file '{path}' not found (set the `model_dir` parameter or "
            'VISION_NODES_MODEL_DIR, or give an absolute `weights` path in the manifest)')
    return path
