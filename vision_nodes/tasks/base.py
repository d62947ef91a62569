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

    @classmethod
    def parse_manifest_blocks(cls, source: str, data: Mapping[str, Any]) -> dict[str, Any]:
        """Parse and validate this task's own manifest blocks from the top-level mapping.

        Called for every manifest of the task (one without blocks of its own gives ``{}``,
        and may refuse a generic field the task cannot honour); raises ManifestError naming
        the field (the helpers of :mod:`vision_nodes.manifest` keep the one error format).
        """

    @classmethod
    def param_defaults(cls, manifest: ModelManifest) -> dict[str, Any]:
        """Each live parameter's default for ``manifest``, keyed by spec name.

        The manifest's value where it has one, else the spec's: the node declares its
        parameters with these.
        """

    def make_params(self, values: Mapping[str, Any]) -> Any:
        """Build the object ``postprocess`` takes from values keyed by spec name."""

    def preprocess(self, image: np.ndarray, encoding: str, shape: tuple[int, int]
                   ) -> tuple[np.ndarray, Any]:
        """Turn a decoded image into (network input of ``shape`` (height, width), metadata)."""

    def postprocess(self, outputs: list[np.ndarray], meta: Any, params: Any) -> Any:
        """Raw network outputs → results in source-image terms."""


def default_values(task: type[Task] | Task) -> dict[str, Any]:
    """Each of the task's live parameters at its spec's default value (no manifest)."""
    return {spec.name: spec.default for spec in task.params}
