"""What a pose model publishes: ``detections``, ``label_info`` and ``keypoints``.

``detections`` and ``label_info`` are a detector's (:class:`.detection_outputs.DetectionOutputs`:
each Detection2D's ``id`` its index, or its track id with a tracker); ``keypoints``
(``vision_nodes_msgs/Keypoints2DArray``, the input image's header) holds one Keypoints2D per
detection, in the order of the Detection2DArray of the same stamp, with the same ``id``;
keypoints in the order of ``names``, x and y in source-image pixels, ``score`` the keypoint's
confidence. Its bytes are encoded without an object per keypoint (:mod:`..wire.keypoints_cdr`).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from vision_nodes_msgs.msg import Keypoints2DArray

from ...pipeline import LoadedModel
from ...tasks.instances import PoseResult
from ..wire.keypoints_cdr import encode_keypoints2d_array
from .detection_outputs import DetectionOutputs


class PoseOutputs(DetectionOutputs):
    """Publishers of one pose model: a detector's and ``<ns>keypoints``."""

    def __init__(self, node: Any, model: LoadedModel, namespace: str = '',
                 report_error: Callable[[str], None] = lambda text: None) -> None:
        super().__init__(node, model, namespace, report_error)
        try:
            self._keypoints = node.endpoints.publisher(
                Keypoints2DArray, f'{namespace}keypoints', 10, lifecycle=True)
        except BaseException:
            super().destroy()
            raise

    @property
    def topics(self) -> list[str]:
        """Resolved names of the topics published (detections first)."""
        return super().topics + [self._keypoints.topic_name]

    def wanted(self) -> bool:
        """Whether anything subscribes to the detections or the keypoints."""
        return super().wanted() or self._keypoints.get_subscription_count() > 0

    def _publish_instances(self, result: PoseResult, header: Any) -> None:
        """Publish the keypoints, each Keypoints2D with its detection's id."""
        self._keypoints.publish(keypoints_to_cdr(result, header, result.ids()))

    def destroy(self) -> None:
        """Destroy the publishers."""
        super().destroy()
        self._node.endpoints.destroy(self._keypoints)


def keypoints_to_cdr(result: PoseResult, header, ids: Sequence[str]) -> bytes:
    """Serialise the frame's Keypoints2DArray; ``ids[i]`` is detection ``i``'s Detection2D id."""
    return encode_keypoints2d_array(header.stamp.sec, header.stamp.nanosec, header.frame_id,
                                    result.names, ids, result.keypoints)
