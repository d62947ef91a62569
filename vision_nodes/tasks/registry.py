"""The task map: manifest ``task`` name → task class, imported when first used.

The node and the pipeline look tasks up here, as they look runners up in the backend map;
adding a task means adding one task file, one line here and its outputs in ``ros/outputs``.
"""

from __future__ import annotations

import importlib

from ..manifest import KNOWN_TASKS, ModelManifest
from .base import Task

#: task name → (module, class); ``None`` marks a task name that is reserved, not built yet.
TASK_MAP: dict[str, tuple[str, str] | None] = {
    'detect': ('vision_nodes.tasks.detect', 'DetectionTask'),
    'depth': ('vision_nodes.tasks.depth', 'DepthTask'),
}
assert set(TASK_MAP) == set(KNOWN_TASKS)


class TaskError(ValueError):
    """A task name with no implementation."""


def task_class(name: str) -> type[Task]:
    """Return the class serving manifest task ``name``, or TaskError saying why there is none."""
    target = TASK_MAP.get(name)
    if target is None:
        built = ', '.join(k for k, v in TASK_MAP.items() if v is not None)
        raise TaskError(f"task '{name}' is not implemented in this version "
                        f'(implemented: {built})')
    module, cls = target
    return getattr(importlib.import_module(module), cls)


def create_task(manifest: ModelManifest) -> Task:
    """Return the task object for a manifest."""
    try:
        cls = task_class(manifest.task)
    except TaskError as exc:
        raise TaskError(f"model '{manifest.name}': {exc}") from None
    return cls(manifest)
