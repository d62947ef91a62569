"""Every message the node publishes as CDR bytes, built field by field with the message types.

The package publishes its per-frame outputs as serialised bytes (``*_to_cdr`` in
``vision_nodes/ros/outputs``); tests deserialise those bytes and compare them with the message
built here, the reference: detections, 3D detections, keypoints, classifications and the depth
images.
"""

from __future__ import annotations

import array
import sys
from typing import Sequence

import numpy as np
from sensor_msgs.msg import Image
from vision_msgs.msg import (Classification, Detection2D, Detection2DArray, Detection3D,
                             Detection3DArray, ObjectHypothesis, ObjectHypothesisWithPose)

from vision_nodes.geometry3d import Boxes3D
from vision_nodes.ros.outputs.depth_outputs import (COLORED_ENCODING, DEPTH_ENCODING,
                                                    colored_pixels, depth_pixels)
from vision_nodes.tasks.classify import Classification as ClassifyResult
from vision_nodes.tasks.depth import DepthResult
from vision_nodes.tasks.detect import Detections
from vision_nodes.tasks.instances import PoseResult


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


def keypoints_to_msg(result: PoseResult, header, ids: Sequence[str]):
    """Build the frame's Keypoints2DArray; ``ids[i]`` is detection ``i``'s Detection2D id."""
    from vision_nodes_msgs.msg import Keypoint2D, Keypoints2D, Keypoints2DArray

    msg = Keypoints2DArray()
    msg.header = header
    msg.names = list(result.names)
    poses = []
    for pose_id, points in zip(ids, result.keypoints.astype(float).tolist()):
        pose = Keypoints2D()
        pose.id = pose_id
        pose.keypoints = [Keypoint2D(x=x, y=y, score=score) for x, y, score in points]
        poses.append(pose)
    msg.poses = poses
    return msg


def classification_to_msg(result: ClassifyResult, header) -> Classification:
    """Build the frame's Classification message (top-k, highest first)."""
    msg = Classification()
    msg.header = header
    msg.results = [ObjectHypothesis(class_id=str(int(c)), score=float(s))
                   for c, s in zip(result.class_ids.tolist(), result.scores.tolist())]
    return msg


def image_msg(pixels: np.ndarray, encoding: str, header) -> Image:
    """Build an Image around a C-contiguous (H, W[, C]) array, its bytes copied once."""
    data = array.array('B')
    data.frombytes(memoryview(pixels).cast('B'))
    msg = Image()
    msg.header = header
    msg.height, msg.width = int(pixels.shape[0]), int(pixels.shape[1])
    msg.encoding = encoding
    msg.is_bigendian = int(sys.byteorder == 'big')
    msg.step = int(pixels.strides[0])
    msg.data = data
    return msg


def depth_to_msg(result: DepthResult, header) -> Image:
    """Return the ``32FC1`` Image of a depth map, with the input image's ``header``.

    Metric results are metres along the optical axis, NaN where invalid and +Inf beyond the
    model's range (REP 118 / REP 117); relative ones are the model's unitless values.
    """
    return image_msg(depth_pixels(result), DEPTH_ENCODING, header)


def colored_to_msg(rgb: np.ndarray, header) -> Image:
    """Return the ``rgb8`` Image of a colourised depth map (:func:`tasks.depth.colorize`)."""
    return image_msg(colored_pixels(rgb), COLORED_ENCODING, header)
