"""Pose results → ``vision_nodes_msgs/Keypoints2DArray``.

One Keypoints2D per detection, in the order of the Detection2DArray of the same stamp, its
``id`` equal to that Detection2D's ``id``; keypoints in the order of ``names``, x and y in
source-image pixels, ``score`` the keypoint's confidence.
"""

from __future__ import annotations

from typing import Sequence

from vision_nodes_msgs.msg import Keypoint2D, Keypoints2D, Keypoints2DArray

from ...tasks.instances import PoseResult


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
