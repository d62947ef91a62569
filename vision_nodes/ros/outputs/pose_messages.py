"""Pose results → ``vision_nodes_msgs/Keypoints2DArray``, serialised (CDR bytes).

One Keypoints2D per detection, in the order of the Detection2DArray of the same stamp, its
``id`` equal to that Detection2D's ``id``; keypoints in the order of ``names``, x and y in
source-image pixels, ``score`` the keypoint's confidence. The node publishes the bytes
(:func:`keypoints_to_cdr`, encoded by :mod:`.keypoints_cdr` without an object per keypoint).
"""

from __future__ import annotations

from typing import Sequence

from ...tasks.instances import PoseResult
from .keypoints_cdr import encode_keypoints2d_array


def keypoints_to_cdr(result: PoseResult, header, ids: Sequence[str]) -> bytes:
    """Serialise the frame's Keypoints2DArray; ``ids[i]`` is detection ``i``'s Detection2D id."""
    return encode_keypoints2d_array(header.stamp.sec, header.stamp.nanosec, header.frame_id,
                                    result.names, ids, result.keypoints)
