"""What a task is: its pre- and post-processing, its result type and its live parameters.

A task never imports a runtime or ROS: runners run the network, ``ros/outputs`` turn a task's
results into messages. The pipeline and the node only use the members of :class:`Task`.
"""

from __future__ import annotations

from typing import Any, ClassVar, Mapping, Protocol

import numpy as np

from ..manifest import ModelManifest
from ..param_spec import ParamSpec


class Task(Protocol):
    """Pre/post-processing of one model, shared by every runner."""

    #: The manifest ``task`` value this class serves (e.g. 'detect', 'depth').
    name: ClassVar[str]
    #: Parameters a user tunes while the node runs (applies='live'); names without the
    #: model prefix a node adds when it runs several models.
    params: ClassVar[tuple[ParamSpec, ...]]
    manifest: ModelManifest

    def __init__(self, manifest: ModelManifest) -> None:
        ...

    def make_params(self, values: Mapping[str, Any]) -> Any:
        """Build the object ``postprocess`` takes from values keyed by spec name."""

    def preprocess(self, image: np.ndarray, encoding: str, shape: tuple[int, int]
                   ) -> tuple[np.ndarray, Any]:
        """Turn a decoded image into (network input of ``shape`` (height, width), metadata)."""

    def postprocess(self, outputs: list[np.ndarray], meta: Any, params: Any) -> Any:
        """Raw network outputs → results in source-image terms."""


def default_values(task: type[Task] | Task) -> dict[str, Any]:
    """Each of the task's live parameters at its default value."""
    return {spec.name: spec.default for spec in task.params}
