"""Detections with 3D boxes → ``vision_msgs/Detection3DArray``: the message, or its CDR bytes."""

from __future__ import annotations

from vision_msgs.msg import Detection3D, Detection3DArray, ObjectHypothesisWithPose

from ...geometry3d import Boxes3D
from ...tasks.detect import Detections
from .detection3d_cdr import encode_detection3d_array


def detections_3d_to_msg(dets: Detections, boxes: Boxes3D, header) -> Detection3DArray:
    """Build a Detection3DArray: one Detection3D per detection that has a 3D box.

    Each carries the image's header (its optical frame), the 2D detection's hypothesis (its
    pose: the box centre) and ``id``, and the box (centre, identity orientation, size), in
    metres.
    """
    out = Detection3DArray()
    out.header = header
    ids = dets.ids()
    classes = dets.class_ids.tolist()
    scores = dets.scores.astype(float).tolist()
    detections = []
    for i, centre, size in zip(boxes.index.tolist(), boxes.centers.tolist(),
                               boxes.sizes.tolist()):
        det = Detection3D()
        det.header = header
        det.id = ids[i]
        hyp = ObjectHypothesisWithPose()
        hyp.hypothesis.class_id = str(classes[i])
        hyp.hypothesis.score = scores[i]
        position = hyp.pose.pose.position
        position.x, position.y, position.z = centre
        det.results = [hyp]
        det.bbox.center.position.x, det.bbox.center.position.y, \
            det.bbox.center.position.z = centre
        det.bbox.size.x, det.bbox.size.y, det.bbox.size.z = size
        detections.append(det)
    out.detections = detections
    return out


def detections_3d_to_cdr(dets: Detections, boxes: Boxes3D, header) -> bytes:
    """Return :func:`detections_3d_to_msg`'s message serialised for ``Publisher.publish``."""
    ids = dets.ids()
    index = boxes.index.tolist()
    classes = dets.class_ids.tolist()
    return encode_detection3d_array(
        header.stamp.sec, header.stamp.nanosec, header.frame_id,
        [str(classes[i]) for i in index], dets.scores.astype(float)[boxes.index],
        boxes.centers, boxes.sizes, [ids[i] for i in index])
