"""The task map: manifest ``task`` name → task class, imported when first used.

The node and the pipeline look tasks up here, as they look runners up in the backend table;
the manifest reads here which top-level blocks belong to which task. Adding a task means one
task file, one line here, one outputs file in ``ros/outputs`` and its manifest example.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, NamedTuple

from ..param_spec import ParamSpec
from .base import Task

if TYPE_CHECKING:  # the manifest reads this map: no import of it at run time
    from ..manifest import ModelManifest


class TaskEntry(NamedTuple):
    """Where a task's class lives and the manifest blocks it owns (parsed by that class)."""

    module: str
    cls: str
    #: Top-level manifest keys only this task's manifests may have (its class parses them).
    blocks: tuple[str, ...] = ()


#: task name → entry; ``None`` marks a task name that is reserved, not built yet.
TASK_MAP: dict[str, TaskEntry | None] = {
    'detect': TaskEntry('vision_nodes.tasks.detect', 'DetectionTask'),
    'depth': TaskEntry('vision_nodes.tasks.depth', 'DepthTask', blocks=('depth',)),
    'segment': TaskEntry('vision_nodes.tasks.segment', 'SegmentationTask'),
    'pose': TaskEntry('vision_nodes.tasks.pose', 'PoseTask', blocks=('keypoints', 'skeleton')),
    'obb': TaskEntry('vision_nodes.tasks.obb', 'OrientedBoxTask'),
    'classify': TaskEntry('vision_nodes.tasks.classify', 'ClassifyTask'),
}
#: Values a manifest's ``task`` may have.
KNOWN_TASKS = tuple(TASK_MAP)


class TaskError(ValueError):
    """A task name with no implementation."""


def task_class(name: str) -> type[Task]:
    """Return the class serving manifest task ``name``, or TaskError saying why there is none."""
    target = TASK_MAP.get(name)
    if target is None:
        built = ', '.join(k for k, v in TASK_MAP.items() if v is not None)
        raise TaskError(f"task '{name}' is not implemented in this version "
                        f'(implemented: {built})')
    return getattr(importlib.import_module(target.module), target.cls)


def create_task(manifest: ModelManifest) -> Task:
    """Return the task object for a manifest."""
    try:
        cls = task_class(manifest.task)
    except TaskError as exc:
        raise TaskError(f"model '{manifest.name}': {exc}") from None
    return cls(manifest)


def param_defaults(manifest: ModelManifest) -> dict[str, Any]:
    """Return the defaults of ``manifest``'s task's live parameters, from the manifest.

    ROS-free: the node declares each parameter with this value unless the user set it (e.g.
    ``confidence_threshold`` from the manifest's ``thresholds.confidence``). Keys are spec
    names, without the prefix a node adds when it runs several models.
    """
    return task_class(manifest.task).param_defaults(manifest)


def param_specs(manifest: ModelManifest) -> tuple[ParamSpec, ...]:
    """Return the task's live parameter specs, each defaulting to ``manifest``'s value.

    What a node declares: :func:`param_defaults` applied to the task's ``params``.
    """
    defaults = param_defaults(manifest)
    return tuple(spec.with_default(defaults[spec.name]) for spec in
                 task_class(manifest.task).params)
