"""What the node asks of a task's outputs (one class per task, looked up in :mod:`.registry`).

An outputs class is built as ``cls(node, model, namespace, report_error)``: it makes its publishers
(and subscriptions, e.g. a camera_info to republish) through ``node.endpoints``
(:mod:`..process.endpoints`), so a remap that puts two of the node's endpoints on one topic is
refused in one line; it reads the node's clock and logger; it reports a problem with one frame's
output through ``report_error`` (counted and rate-limited by the frame path). It never calls the
node back otherwise; at activate it may read the node's models (``node.frames.models``), e.g. to
check that the depth model a detector's ``depth_source`` names is one of them. Its ROS output
switches (e.g. depth's ``publish_camera_info``) are its own: it declares them in ``params``, the
node's parameter policy declares them beside the task's parameters, and their values reach
``activate`` and, after every change of one of them, ``update_switches`` (where a live one, e.g. a
detector's ``depth_slop``, takes effect).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Mapping, Protocol, runtime_checkable

import numpy as np

from ...param_spec import ParamSpec
from ...pipeline import LoadedModel


def _no_result(name: str) -> Any:
    return None


@dataclass(frozen=True)
class Frame:
    """One input frame as every model's outputs see it."""

    #: The converted image (shared by every model: never written to) and its encoding.
    image: np.ndarray
    encoding: str
    #: The input image's header.
    header: Any
    #: Which input the frame came from: state kept per camera (tracks, depth pairing) is
    #: keyed by it.
    input: str = 'image'
    #: ``result_of(name)``: another model's result on this frame (waits for it; None when
    #: that model did not run on it or failed).
    result_of: Callable[[str], Any] = field(default=_no_result)


@runtime_checkable
class Outputs(Protocol):
    """The publishers of one model."""

    #: The ROS output switches it declares (node parameters; ``()`` for none).
    params: ClassVar[tuple[ParamSpec, ...]]

    @property
    def topics(self) -> list[str]:
        """Resolved names of the topics published (the per-frame one first)."""

    def wanted(self) -> bool:
        """Whether anything subscribes to a per-frame output (lazy mode asks)."""

    def activate(self, params: Any, switches: Mapping[str, Any]) -> None:
        """Start publishing with the task's parameters and its switches' values, by name."""

    def deactivate(self) -> None:
        """Stop what activate started; the publishers stay."""

    def params_changed(self, old: Any, new: Any) -> None:
        """Take the task's changed parameters (the next frame uses ``new``)."""

    def update_switches(self, switches: Mapping[str, Any]) -> None:
        """Take its switches' values, by name, after one changed (a live one applies now)."""

    def publish(self, result: Any, header: Any, frame: Frame) -> None:
        """Publish one frame's result with the input image's header."""

    def destroy(self) -> None:
        """Destroy every publisher and subscription."""


#: ``cls(node, model, namespace, report_error)`` → the model's outputs.
OutputsFactory = Callable[[Any, LoadedModel, str, Callable[[str], None]], Outputs]
