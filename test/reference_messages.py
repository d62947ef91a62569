"""Detections as a ``vision_msgs/Detection2DArray`` built field by field with the message types.

The package publishes detections as CDR bytes encoded with NumPy
(:func:`vision_nodes.ros.outputs.detection_messages.detections_to_cdr`); tests deserialise
those bytes and compare them with the message this builds.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from vision_msgs.msg import Detection2D, Detection2DArray, ObjectHypothesisWithPose

from vision_nodes.tasks.detect import Detections


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
    else the detection's own (``Detections.ids()``). Rotated boxes (``xywhr``: obb results)
    are their centre, size and ``theta`` instead.
    """
    out = Detection2DArray(header=header)
    ids = dets.ids() if ids is None else ids
    rotated = getattr(dets, 'xywhr', None)
    if rotated is None:
        boxes = dets.boxes.astype(float)
        rotated = np.concatenate([(boxes[:, :2] + boxes[:, 2:]) / 2.0,
                                  boxes[:, 2:] - boxes[:, :2], np.zeros((len(boxes), 1))], 1)
    for (x, y, w, h, theta), score, cls, ident in zip(np.asarray(rotated, float).tolist(),
                                                      dets.scores.astype(float).tolist(),
                                                      dets.class_ids.tolist(), ids):
        det = Detection2D(header=header, id=ident)
        det.bbox.center.position.x, det.bbox.center.position.y = x, y
        det.bbox.center.theta = theta
        det.bbox.size_x, det.bbox.size_y = w, h
        hyp = ObjectHypothesisWithPose()
        hyp.hypothesis.class_id = str(cls)
        hyp.hypothesis.score = score
        det.results = [hyp]
        out.detections.append(det)
    return out
