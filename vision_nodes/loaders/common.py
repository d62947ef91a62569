"""What every loader shares: its error class and the check that a weights file exists."""

from __future__ import annotations

from pathlib import Path

from ..text import clip


class ModelLoadError(RuntimeError):
    """Weights that cannot be loaded (missing file, missing package, wrong format)."""


def check_weights(path: Path) -> Path:
    """Raise a clear error when the weights file is absent (or not a regular file)."""
    try:
        found = path.is_file()
    except (OSError, ValueError):  # a name too long for the file system, a NUL
        found = False
    if not found:
        raise ModelLoadError(
            f"weights file '{clip(path)}' not found (set the `model_dir` parameter or "
            'VISION_NODES_MODEL_DIR, or give an absolute `weights` path in the manifest)')
    return path
