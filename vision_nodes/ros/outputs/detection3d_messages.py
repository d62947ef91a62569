"""Detections with 3D boxes → ``vision_msgs/Detection3DArray``, serialised (CDR bytes)."""

from __future__ import annotations

from ...geometry3d import Boxes3D
from ...tasks.detect import Detections
from .detection3d_cdr import encode_detection3d_array


def detections_3d_to_cdr(dets: Detections, boxes: Boxes3D, header) -> bytes:
    """Serialise a Detection3DArray: one Detection3D per detection that has a 3D box.

    Each carries the image's header (its optical frame), the 2D detection's hypothesis (its
    pose: the box centre) and ``id``, and the box (centre, identity orientation, size), in
    metres.
    """
    ids = dets.ids()
    index = boxes.index.tolist()
    classes = dets.class_ids.tolist()
    return encode_detection3d_array(
        header.stamp.sec, header.stamp.nanosec, header.frame_id,
        [str(classes[i]) for i in index], dets.scores.astype(float)[boxes.index],
        boxes.centers, boxes.sizes, [ids[i] for i in index])
