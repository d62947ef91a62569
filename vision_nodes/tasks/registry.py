"""The task map: manifest ``task`` name → task class, imported when first used; manifests loaded.

The node and the pipeline look tasks up here, as they look runners up in the backend table,
and load manifests here: the generic fields, then the task's file parses its own blocks.
Adding a task means one task file, one line here, one outputs file and a manifest example.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

from ..manifest import ModelManifest, find_manifest, parse_generic, read_manifest
from ..param_spec import ParamSpec
from .base import Task


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
#: Each task's own top-level manifest blocks (what the generic manifest checks keys against).
TASK_BLOCKS = {name: entry.blocks if entry else () for name, entry in TASK_MAP.items()}


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


def parse_manifest(data: Any, source: str = '<manifest>', path: Path | None = None
                   ) -> ModelManifest:
    """Validate a manifest parsed from YAML: the generic fields, then the task's own blocks.

    The task's file sees every manifest of its task: it may refuse generic fields its task
    cannot honour (classify: a letterboxed input).
    """
    manifest = parse_generic(data, source, path, TASK_BLOCKS)
    if TASK_MAP.get(manifest.task) is None:
        return manifest
    parsed = task_class(manifest.task).parse_manifest_blocks(source, data)
    return replace(manifest, task_blocks=tuple(parsed.items()))


def load_manifest(path: str | os.PathLike) -> ModelManifest:
    """Read and validate one manifest file."""
    path = Path(path)
    return parse_manifest(read_manifest(path), str(path), path.resolve())


def resolve_manifest(model: str, search_dirs: list[Path] | None = None) -> ModelManifest:
    """Load a manifest given a path to a file or the name of one under ``config/models``."""
    return load_manifest(find_manifest(model, search_dirs))
