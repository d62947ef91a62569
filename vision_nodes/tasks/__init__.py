"""Tasks: pre- and post-processing per task, shared by every runner."""

from __future__ import annotations

from ..manifest import ModelManifest
from .detect import DetectionTask

#: task name (manifest ``task``) → task class. ``depth`` is reserved for the depth task.
TASKS = {'detect': DetectionTask}


def create_task(manifest: ModelManifest):
    """Return the task object for a manifest, or ValueError naming the missing task."""
    cls = TASKS.get(manifest.task)
    if cls is None:
        raise ValueError(f"task '{manifest.task}' of model '{manifest.name}' is not "
                         f"implemented in this version (implemented: {', '.join(TASKS)})")
    return cls(manifest)
