"""Classification results -> ``vision_msgs/Classification``, serialised (CDR bytes).

``results`` holds the top-k classes, highest probability first: ``class_id`` the class index as
a decimal string (as a Detection2D's hypothesis names its class), ``score`` the probability;
the header is the input image's. The node publishes the bytes (:func:`classification_to_cdr`,
written field by field with :class:`.cdr_writer.CdrWriter`: the message rclpy would serialise).
"""

from __future__ import annotations

import struct

from ...tasks.classify import Classification as ClassifyResult
from .cdr_writer import CdrWriter


def classification_to_cdr(result: ClassifyResult, header) -> bytes:
    """Serialise the frame's Classification message (top-k, highest first)."""
    writer = CdrWriter()
    writer.header(header.stamp.sec, header.stamp.nanosec, header.frame_id)
    writer.uint32(len(result.class_ids))
    for cls, score in zip(result.class_ids.tolist(), result.scores.tolist()):
        writer.string(str(int(cls)))
        writer.float64s(struct.pack('<d', float(score)))
    return writer.bytes()
