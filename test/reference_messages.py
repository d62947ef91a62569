"""Detections as a ``vision_msgs/Detection2DArray`` built field by field with the message types.

The package publishes detections as CDR bytes encoded with NumPy
(:func:`vision_nodes.ros.outputs.detection_messages.detections_to_cdr`); tests deserialise
those bytes and compare them with the message this builds.
"""

from __future__ import annotations

from vision_msgs.msg import Detection2D, Detection2DArray, ObjectHypothesisWithPose

from vision_nodes.tasks.detect import Detections


def detections_to_msg(dets: Detections, header) -> Detection2DArray:
    """Build a Detection2DArray; ``class_id`` is the class index as a string.

    Each Detection2D carries the input image's header, one hypothesis and an axis-aligned
    box (centre and size in source pixels, ``theta`` 0).
    """
    out = Detection2DArray(header=header)
    for (x1, y1, x2, y2), score, cls in zip(dets.boxes.astype(float).tolist(),
                                            dets.scores.astype(float).tolist(),
                                            dets.class_ids.tolist()):
        det = Detection2D(header=header)
        det.bbox.center.position.x = (x1 + x2) / 2.0
        det.bbox.center.position.y = (y1 + y2) / 2.0
        det.bbox.size_x = x2 - x1
        det.bbox.size_y = y2 - y1
        hyp = ObjectHypothesisWithPose()
        hyp.hypothesis.class_id = str(cls)
        hyp.hypothesis.score = score
        det.results = [hyp]
        out.detections.append(det)
    return out
