"""Detections → ``vision_msgs/Detection2DArray``, as a message object or as serialised bytes."""

from __future__ import annotations

from typing import Sequence

from vision_msgs.msg import Detection2D, Detection2DArray, ObjectHypothesisWithPose

from .cdr import encode_detection2d_array
from ...tasks.detect import Detections


def index_ids(count: int) -> list[str]:
    """Return the ids of a frame without tracking: each detection's index, as a string.

    What ``instance_mask`` pixels (1 + index) and ``Keypoints2D.id`` refer to.
    """
    return [str(i) for i in range(count)]


def detections_to_msg(dets: Detections, header, ids: Sequence[str] | None = None
                      ) -> Detection2DArray:
    """Build a Detection2DArray; ``class_id`` is the class index as a string.

    Each Detection2D carries the input image's header, one hypothesis, an axis-aligned box
    (centre and size in source pixels, ``theta`` 0) and its ``id``: from ``ids`` when given,
    else the detection's own (:meth:`Detections.ids`: its track id when a tracker follows the
    detections, else its index; decimal strings).
    """
    out = Detection2DArray()
    out.header = header
    boxes = dets.boxes.astype(float).tolist()
    scores = dets.scores.astype(float).tolist()
    classes = dets.class_ids.tolist()
    detections = []
    ids = dets.ids() if ids is None else ids
    for (x1, y1, x2, y2), score, cls, ident in zip(boxes, scores, classes, ids):
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


def detections_to_cdr(dets: Detections, header, ids: Sequence[str] | None = None) -> bytes:
    """Serialise :func:`detections_to_msg`'s message to CDR bytes for ``Publisher.publish``.

    Encoded with NumPy (see :mod:`.cdr`), so the cost hardly grows with the number of
    detections, unlike building and publishing the message objects.
    """
    return encode_detection2d_array(header.stamp.sec, header.stamp.nanosec, header.frame_id,
                                    dets.boxes, dets.scores, dets.class_ids,
                                    dets.ids() if ids is None else ids)
