"""Pose results → ``vision_nodes_msgs/Keypoints2DArray``: the message, or its CDR bytes.

One Keypoints2D per detection, in the order of the Detection2DArray of the same stamp, its
``id`` equal to that Detection2D's ``id``; keypoints in the order of ``names``, x and y in
source-image pixels, ``score`` the keypoint's confidence. The node publishes the bytes
(:func:`keypoints_to_cdr`, encoded by :mod:`.keypoints_cdr` without an object per keypoint).
"""

from __future__ import annotations

from typing import Sequence

from vision_nodes_msgs.msg import Keypoint2D, Keypoints2D, Keypoints2DArray

from ...tasks.instances import PoseResult
from .keypoints_cdr import encode_keypoints2d_array


def keypoints_to_msg(result: PoseResult, header, ids: Sequence[str]) -> Keypoints2DArray:
    """Build the frame's Keypoints2DArray; ``ids[i]`` is detection ``i``'s Detection2D id."""
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


def keypoints_to_cdr(result: PoseResult, header, ids: Sequence[str]) -> bytes:
    """Return :func:`keypoints_to_msg`'s message serialised for ``Publisher.publish``."""
    return encode_keypoints2d_array(header.stamp.sec, header.stamp.nanosec, header.frame_id,
                                    result.names, ids, result.keypoints)
