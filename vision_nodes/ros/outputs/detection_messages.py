"""Detections → ``vision_msgs/Detection2DArray``, serialised (CDR bytes) for publishing."""

from __future__ import annotations

from typing import Sequence

from .cdr import encode_detection2d_array
from ...tasks.detect import Detections


def detections_to_cdr(dets: Detections, header, ids: Sequence[str] | None = None) -> bytes:
    """Serialise the detections as a Detection2DArray in CDR bytes for ``Publisher.publish``.

    ``class_id`` is the class index as a string; each Detection2D carries the input image's
    header, one hypothesis, an axis-aligned box (centre and size in source pixels, ``theta``
    0) and its ``id``: from ``ids`` when given, else the detection's own
    (:meth:`Detections.ids`: its track id when a tracker follows the detections, else its
    index; decimal strings). Rotated boxes (results with ``xywhr``, the obb task) are
    published as they are: centre, ``size_x`` = w, ``size_y`` = h, ``theta`` = the angle in
    radians, so that ``cv2.boxPoints(((x, y), (size_x, size_y), degrees(theta)))`` gives the
    box's corners. Encoded with NumPy (see :mod:`.cdr`), so the cost hardly grows with the
    number of detections, unlike building and publishing the message objects.
    """
    return encode_detection2d_array(header.stamp.sec, header.stamp.nanosec, header.frame_id,
                                    dets.boxes, dets.scores, dets.class_ids,
                                    dets.ids() if ids is None else ids,
                                    rotated=getattr(dets, 'xywhr', None))
