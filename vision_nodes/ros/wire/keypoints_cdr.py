"""CDR encoding of ``vision_nodes_msgs/Keypoints2DArray``, for publishing as bytes.

rclpy would build one ``Keypoint2D`` object per keypoint (17 per person with COCO weights) and
convert each to C on publish. Here every keypoint record is written at once with NumPy and
each pose costs one string and one slice: the same serialised message as
``rclpy.serialization.serialize_message`` gives (little-endian plain CDR; padding bytes are
zeros here).

Layout, offsets counted from the byte after the 4-byte encapsulation header, each primitive
aligned to its size: ``Header`` (int32 sec, uint32 nanosec, string frame_id); ``names``
(uint32 count, strings); ``poses`` (uint32 count, then per pose: string id, uint32 count,
keypoints). A keypoint is float64 x, float64 y, float32 score: 20 bytes, and the next one's
x starts 8-aligned, so a pose's keypoints are records of 24 bytes (the last without its 4
bytes of padding) starting 8-aligned.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .cdr_writer import CdrWriter

_RECORD = np.dtype([('x', '<f8'), ('y', '<f8'), ('score', '<f4'), ('pad', '<u4')])


def encode_keypoints2d_array(sec: int, nanosec: int, frame_id: str, names: Sequence[str],
                             ids: Sequence[str], keypoints: np.ndarray) -> bytes:
    """Serialise a Keypoints2DArray: ``keypoints`` (N, K, 3) as x, y, score; pose i's id ids[i]."""
    points = np.asarray(keypoints, dtype=np.float64)
    if points.ndim != 3 or points.shape[0] != len(ids) or points.shape[2] != 3:
        raise ValueError(f'keypoints are (poses, keypoints, 3) for {len(ids)} ids, got shape '
                         f'{points.shape}')
    count = points.shape[1]
    records = np.zeros(points.shape[:2], dtype=_RECORD)
    records['x'], records['y'] = points[:, :, 0], points[:, :, 1]
    records['score'] = points[:, :, 2]
    data = records.tobytes()
    size = _RECORD.itemsize * count
    writer = CdrWriter()
    writer.header(sec, nanosec, frame_id)
    writer.uint32(len(names))
    for name in names:
        writer.string(name)
    writer.uint32(len(ids))
    for index, pose_id in enumerate(ids):
        writer.string(pose_id)
        writer.uint32(count)
        if count:
            writer.float64s(data[index * size:(index + 1) * size - 4])
    return writer.bytes()
