"""The image inputs of a multi-camera node (``image_topics``): one per camera, one batcher.

:class:`CameraInputs` stands where the single :class:`~.subscription.ImageInput` stands for the
node (check, subscribe, lazy and QoS updates, unsubscribe, what the diagnostics show), and holds
one ``ImageInput`` per camera, each raw or compressed with its own QoS auto-match, the
:class:`~.frame_taker.FrameTaker` that takes their frames, and the
:class:`~.batcher.FrameBatcher` that runs them together.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

from ..process.diagnostics import diagnostic_status
from .batcher import FrameBatcher
from .frame_path import FramePath
from .frame_taker import FrameTaker
from .qos import explain_slow_delivery
from .subscription import ImageInput


class CameraInputs:
    """Every camera's subscription and the batcher behind them."""

    def __init__(self, node: Any, frames: FramePath, param: Callable[[str], Any],
                 log_error: Callable[[str], None], topics: list[str]) -> None:
        self.batcher = FrameBatcher(node, frames, topics, param, log_error)
        self._frames = frames
        self._param = param
        #: One input per camera, in ``image_topics`` order.
        self.inputs = [ImageInput(node, camera.on_image, param, log_error,
                                  camera.callback_group,
                                  topic=topic, on_error=self.batcher.error_from(index))
                       for index, (camera, topic) in enumerate(zip(self.batcher.cameras,
                                                                   topics))]
        cameras = self.batcher.cameras
        self.taker = FrameTaker(node.context, self.inputs,
                                [lambda camera=camera: camera.holding for camera in cameras],
                                [self.batcher.error_from(i) for i in range(len(cameras))],
                                log_error)
        for camera in self.batcher.cameras:
            camera.taken_by(self.taker.wake)
        self.transport = self.inputs[0].transport
        self.topic_name = ', '.join(i.topic_name for i in self.inputs)

    @property
    def subscribed(self) -> bool:
        """Whether any camera's subscription exists."""
        return any(i.subscribed for i in self.inputs)

    def check_topic(self) -> None:
        """Refuse (TopicClashError) a camera topic that clashes with another of the node's."""
        for item in self.inputs:
            item.check_topic()

    def start(self) -> None:
        """Start the batcher and the taker (before the first subscription)."""
        self.batcher.start()
        self.taker.start()

    def _wanted(self, index: int, wanted: bool) -> bool:
        """Lazy: a camera is taken while one of its own outputs has a subscriber."""
        if not wanted or not self._param('lazy'):
            return wanted
        return any(m.outputs.cameras[index].wanted() for m in self._frames.models)

    def update(self, wanted: bool) -> None:
        """Each camera's :meth:`~.subscription.ImageInput.update` (lazy mode, QoS auto)."""
        for index, item in enumerate(self.inputs):
            item.update(self._wanted(index, wanted))

    def update_in_timer(self, wanted: Callable[[], bool]) -> None:
        """Each camera's :meth:`~.subscription.ImageInput.update_in_timer`."""
        for index, item in enumerate(self.inputs):
            item.update_in_timer(lambda index=index: self._wanted(index, wanted()))

    def unsubscribe(self) -> None:
        """Drop every subscription, stop taking, finish the batch in flight (idempotent)."""
        for item in self.inputs:
            item.unsubscribe()
        self.taker.stop()
        self.batcher.stop()
        self.batcher.cameras = []

    def qos_text(self) -> str:
        """Describe the first camera's QoS (each camera's own is in its diagnostics entry)."""
        return self.inputs[0].qos_text()

    def explain_silence(self) -> str:
        """Why no camera sends images."""
        return '; '.join(i.explain_silence() for i in self.inputs)

    def statuses(self, facts: Any, limits: Any, state: str) -> list[Any]:
        """One diagnostics entry per camera: its rate, drops, latency, silence and stages.

        A camera whose frames reach the node late (``receive``) is said on its own entry.
        """
        out = []
        for item, camera in zip(self.inputs, self.batcher.cameras):
            mine = replace(facts, node_name=f'{facts.node_name}: {item.topic_name}',
                           image_topic=item.topic_name, qos=item.qos_text())
            values, delivery = camera.stages.report()
            out.append(diagnostic_status(
                camera.stats.snapshot(), mine, limits, state,
                explain_silence=item.explain_silence, extra=values, delivery=delivery,
                explain_slow_delivery=explain_slow_delivery))
        return out
