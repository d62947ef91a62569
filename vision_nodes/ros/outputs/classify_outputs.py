"""What a classification model publishes: ``classification``, ``label_info``, ``annotated``.

``classification`` (``vision_msgs/Classification``, the input image's header) lists the
``classification_top_k`` most probable classes, highest first (:func:`classification_to_cdr`:
``class_id`` the class index as a decimal string, as a Detection2D's hypothesis names its
class, ``score`` the probability);
``label_info`` maps class ids to names (transient local, sent on activate); with
``publish_annotated`` (a ROS output switch these outputs declare) the image with those classes
written on it, built only while someone subscribes.
"""

from __future__ import annotations

import struct
from typing import Any, Callable, ClassVar, Mapping

import numpy as np
from sensor_msgs.msg import Image
from std_msgs.msg import Header
from vision_msgs.msg import Classification, LabelInfo

from ...drawing import draw_classes
from ...images import to_rgb
from ...param_spec import ParamSpec
from ...pipeline import LoadedModel
from ...stage_times import mark
from ...tasks.classify import Classification as ClassifyResult
from ..wire.cdr_writer import CdrWriter
from ..wire.image_cdr import encode_image
from .detection_outputs import IMAGES, LATCHED
from .label_info import label_info_msg

#: Publish the picture with the top classes written on it: a switch of these outputs.
PUBLISH_ANNOTATED = ParamSpec(
    'publish_annotated', False,
    'Publish annotated (bgr8): the image with the top classes and their probabilities '
    'written on it, built only while someone subscribes.', applies='activate')


class ClassifyOutputs:
    """Publishers of one classification model: ``<ns>classification``, ``<ns>label_info``."""

    #: The ROS output switches these outputs declare (node parameters).
    params: ClassVar[tuple[ParamSpec, ...]] = (PUBLISH_ANNOTATED,)

    def __init__(self, node: Any, model: LoadedModel, namespace: str = '',
                 report_error: Callable[[str], None] = lambda text: None) -> None:
        self._node = node
        self._namespace = namespace
        self._labels = model.labels
        if not self._labels:
            node.get_logger().warning(f"model '{model.manifest.name}' has no class names: "
                                      'label_info is empty (list `labels` in its manifest)')
        self._classification, self._label_info = node.endpoints.publishers([
            (Classification, f'{namespace}classification', 10),
            (LabelInfo, f'{namespace}label_info', LATCHED)])
        self._annotated: Any = None

    @property
    def topics(self) -> list[str]:
        """Resolved names of the topics published (the classification first)."""
        extra = [self._annotated.topic_name] if self._annotated else []
        return [self._classification.topic_name, self._label_info.topic_name] + extra

    def wanted(self) -> bool:
        """Whether anything subscribes to the classification or the annotated image."""
        return (self._classification.get_subscription_count() > 0
                or (self._annotated is not None
                    and self._annotated.get_subscription_count() > 0))

    def activate(self, params: Any, switches: Mapping[str, Any]) -> None:
        """Send label_info; publish the annotated image when asked."""
        if switches.get(PUBLISH_ANNOTATED.name, False):
            self._annotated = self._node.endpoints.publisher(
                Image, f'{self._namespace}annotated', IMAGES)
        header = Header(stamp=self._node.get_clock().now().to_msg())
        self._label_info.publish(label_info_msg(self._labels, header, 0.0))

    def deactivate(self) -> None:
        """Stop the annotated image."""
        if self._annotated is not None:
            self._node.endpoints.destroy(self._annotated)
            self._annotated = None

    def params_changed(self, old: Any, new: Any) -> None:
        """Nothing to do: ``classification_top_k`` reaches the next frame's result."""

    def update_switches(self, switches: Mapping[str, Any]) -> None:
        """Nothing live: ``publish_annotated`` applies at activate."""

    def publish(self, result: ClassifyResult, header: Any, frame: Any) -> None:
        """Publish one frame's top classes, and the annotated image if someone listens."""
        self._classification.publish(classification_to_cdr(result, header))
        mark('message')
        annotated = self._annotated
        if annotated is not None and annotated.get_subscription_count() > 0:
            bgr = to_rgb(frame.image, frame.encoding)[:, :, ::-1]
            picture = draw_classes(bgr, result.class_ids, result.scores, self._labels)
            annotated.publish(encode_image(np.ascontiguousarray(picture), 'bgr8', header))

    def destroy(self) -> None:
        """Destroy the publishers."""
        self.deactivate()
        for pub in (self._classification, self._label_info):
            self._node.endpoints.destroy(pub)


def classification_to_cdr(result: ClassifyResult, header) -> bytes:
    """Serialise the frame's Classification message (top-k, highest first)."""
    writer = CdrWriter()
    writer.header(header.stamp.sec, header.stamp.nanosec, header.frame_id)
    writer.uint32(len(result.class_ids))
    for cls, score in zip(result.class_ids.tolist(), result.scores.tolist()):
        writer.string(str(int(cls)))
        writer.float64s(struct.pack('<d', float(score)))
    return writer.bytes()
