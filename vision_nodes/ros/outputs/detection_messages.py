"""Detections → ``vision_msgs/Detection2DArray``, as a message object or as serialised bytes."""

from __future__ import annotations

from vision_msgs.msg import Detection2D, Detection2DArray, ObjectHypothesisWithPose

from .cdr import encode_detection2d_array
from ...tasks.detect import Detections


def detections_to_msg(dets: Detections, header) -> Detection2DArray:
    """Build a Detection2DArray; ``class_id`` is the class index as a string.

    ``id`` is the detection's track id when a tracker follows the detections, else its index
    in the array (both as decimal strings). Each Detection2D carries the input image's header,
    one hypothesis and an axis-aligned box (centre and size in source pixels, ``theta`` 0).
    """
    out = Detection2DArray()
    out.header = header
    boxes = dets.boxes.astype(float).tolist()
    scores = dets.scores.astype(float).tolist()
    classes = dets.class_ids.tolist()
    detections = []
    for (x1, y1, x2, y2), score, cls, ident in zip(boxes, scores, classes, dets.ids()):
        det = Detection2D()
        det.header = header
        det.id = ident
        det.bbox.center.position.x = (x1 + x2) / 2.0
        det.bbox.center.position.y = (y1 + y2) / 2.0
        det.bbox.size_x = x2 - x1
        det.bbox.size_y = y2 - y1
        hyp = ObjectHypothesisWithPose()
        hyp.hypothesis.class_id = str(cls)
        hyp.hypothesis.score = score
        det.results = [hyp]
        detections.append(det)
    out.detections = detections
    return out


def detections_to_cdr(dets: Detections, header) -> bytes:
    """Serialise :func:`detections_to_msg`'s message to CDR bytes for ``Publisher.publish``.

    Encoded with NumPy (see :mod:`.cdr`), so the cost hardly grows with the number of
    detections, unlike building and publishing the message objects.
    """
    return encode_detection2d_array(header.stamp.sec, header.stamp.nanosec, header.frame_id,
                                    dets.boxes, dets.scores, dets.class_ids, dets.ids())
