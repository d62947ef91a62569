"""What every loader shares: its error class, reading weights, and staying offline."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ..files import check_regular, read_regular
from ..limits import MAX_WEIGHTS_BYTES
from ..text import clip, show_path

#: Environment settings that keep the model libraries off the network, whatever the user's
#: environment says: the Hugging Face Hub (transformers) and Ultralytics (no downloads, no
#: package installs).
OFFLINE_ENV = {'HF_HUB_OFFLINE': '1', 'TRANSFORMERS_OFFLINE': '1',
               'HF_HUB_DISABLE_TELEMETRY': '1', 'YOLO_OFFLINE': '1',
               'YOLO_AUTOINSTALL': 'False'}


class ModelLoadError(RuntimeError):
    """Weights that cannot be loaded (missing file, missing package, wrong format)."""


def summary(exc: BaseException, limit: int = 160) -> str:
    """``Type: first line`` of a library's exception (some span paragraphs or stack traces).

    A first line that ends with a colon introduces the next one, which is kept too.
    """
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = ' '.join(lines[:2]) if len(lines) > 1 and lines[0].endswith(':') else \
        (lines[0] if lines else '')
    return f'{type(exc).__name__}: {clip(text, limit)}'


def check_weights(path: Path) -> Path:
    """Raise a clear error unless the weights file is a regular file of bounded size.

    For weights a runtime opens by their name (ONNX Runtime); :func:`read_weights` for those
    read here.
    """
    try:
        found = os.path.exists(path)
    except (OSError, ValueError):  # a name too long for the file system, a NUL
        found = False
    if not found:
        raise ModelLoadError(
            f"weights file {show_path(path)} not found (set the `model_dir` parameter or "
            'VISION_NODES_MODEL_DIR, or give an absolute `weights` path in the manifest)')
    check_regular(path, MAX_WEIGHTS_BYTES, 'weights file', ModelLoadError)
    return path


def read_weights(path: Path) -> bytes:
    """Return the bytes of a weights file: a regular file of at most ``MAX_WEIGHTS_BYTES``."""
    check_weights(path)  # a missing file gets the message naming the settings
    return read_regular(path, MAX_WEIGHTS_BYTES, 'weights file', ModelLoadError)


def force_offline() -> None:
    """Put this process's model libraries offline before they load anything.

    The node never downloads: every loader calls this first. It sets :data:`OFFLINE_ENV`
    (read by the libraries when they are imported, and by child processes) and, where the
    Hugging Face Hub client is already imported, its offline flag, which every Hub request
    checks when it is made.
    """
    os.environ.update(OFFLINE_ENV)
    hub = sys.modules.get('huggingface_hub.constants')
    if hub is not None:
        hub.HF_HUB_OFFLINE = True
