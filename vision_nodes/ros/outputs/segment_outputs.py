"""What a segmentation model publishes: ``detections``, ``label_info`` and ``instance_mask``.

``detections`` and ``label_info`` are a detector's (:class:`.detection_outputs.DetectionOutputs`:
each Detection2D's ``id`` its index, or its track id with a tracker, which then also selects
the detections); ``instance_mask`` (``mono16``, the input image's header and size) holds 1 +
the detection's index in ``detections`` where its mask is, 0 elsewhere (where masks overlap the
higher-scoring detection wins). The mask image is built only while someone subscribes to it.
"""

from __future__ import annotations

from typing import Any, Callable

from sensor_msgs.msg import Image

from ...pipeline import LoadedModel
from ...tasks.instances import SegmentResult
from ..wire.image_cdr import encode_image
from .detection_outputs import IMAGES, DetectionOutputs


class SegmentOutputs(DetectionOutputs):
    """Publishers of one segmentation model: a detector's and ``<ns>instance_mask``."""

    def __init__(self, node: Any, model: LoadedModel, namespace: str = '',
                 report_error: Callable[[str], None] = lambda text: None) -> None:
        super().__init__(node, model, namespace, report_error)
        try:
            self._mask = node.endpoints.publisher(Image, f'{namespace}instance_mask', IMAGES,
                                                  lifecycle=True)
        except BaseException:
            super().destroy()
            raise

    @property
    def topics(self) -> list[str]:
        """Resolved names of the topics published (detections first)."""
        return super().topics + [self._mask.topic_name]

    def wanted(self) -> bool:
        """Whether anything subscribes to the detections or the instance mask."""
        return super().wanted() or self._mask.get_subscription_count() > 0

    def _publish_instances(self, result: SegmentResult, header: Any) -> None:
        """Publish the instance mask, if wanted (pixel = 1 + index in ``detections``)."""
        if self._mask.get_subscription_count() > 0:
            self._mask.publish(instance_mask_to_cdr(result, header))

    def destroy(self) -> None:
        """Destroy the publishers."""
        super().destroy()
        self._node.endpoints.destroy(self._mask)


#: Encoding of the instance mask: 16-bit labels, so up to 65535 instances per image.
MASK_ENCODING = 'mono16'


def instance_mask_to_cdr(result: SegmentResult, header) -> bytes:
    """Serialise the ``mono16`` label image of a frame's masks, with the input image's header."""
    return encode_image(result.label_image(), MASK_ENCODING, header)
