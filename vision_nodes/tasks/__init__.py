"""Tasks: pre- and post-processing per task, shared by every runner."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from ..manifest import ModelManifest
from .detect import DetectionTask


class Task(Protocol):
    """What the pipeline needs from a task; every runner shares the task's processing."""

    name: str

    def preprocess(self, image: np.ndarray, encoding: str) -> tuple[np.ndarray, Any]:
        """Turn a decoded image into (network input tensor, metadata for ``postprocess``)."""

    def postprocess(self, outputs: list[np.ndarray], meta: Any, params: Any) -> Any:
        """Decode raw network outputs into results in source-image terms."""


#: task name (manifest ``task``) → task class. ``depth`` is reserved for the depth task.
TASKS = {'detect': DetectionTask}


def create_task(manifest: ModelManifest) -> Task:
    """Return the task object for a manifest, or ValueError naming the missing task."""
    cls = TASKS.get(manifest.task)
    if cls is None:
        raise ValueError(f"task '{manifest.task}' of model '{manifest.name}' is not "
                         f"implemented in this version (implemented: {', '.join(TASKS)})")
    return cls(manifest)
