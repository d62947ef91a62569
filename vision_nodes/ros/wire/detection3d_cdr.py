"""CDR encoding of ``vision_msgs/Detection3DArray``, for publishing as bytes.

rclpy would build a Detection3D, its hypothesis, poses and box as Python objects per detection
and convert each to C on publish. Here every detection's float64s are laid out at once with
NumPy, and each detection costs its header, two strings and one slice: the same serialised
message as ``rclpy.serialization.serialize_message`` gives (see :mod:`.cdr_writer`).

One Detection3D (vision_msgs 4.x): ``Header``; ``results``, a uint32 count (1) then
``class_id`` (string) and 54 float64s, contiguous once the first is 8-aligned: ``score``, the
hypothesis pose (position, orientation, 36 covariance), the box centre (position,
orientation) and ``size``; then ``id`` (string).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .cdr_writer import CdrWriter

#: Float64s of one detection, and where each group starts among them.
_DOUBLES = 54
_POSITION, _ORIENTATION_W, _CENTRE, _CENTRE_W, _SIZE = 1, 7, 44, 50, 51


def encode_detection3d_array(sec: int, nanosec: int, frame_id: str, class_ids: Sequence[str],
                             scores: np.ndarray, centres: np.ndarray, sizes: np.ndarray,
                             ids: Sequence[str]) -> bytes:
    """Serialise a Detection3DArray: detection i is ``class_ids[i]`` at ``centres[i]``.

    Each carries the array's header, one hypothesis (``score``; its pose the box centre,
    identity orientation, zero covariance), the box (centre, identity orientation, size) and
    its ``id``.
    """
    count = len(ids)
    doubles = np.zeros((count, _DOUBLES), dtype='<f8')
    doubles[:, 0] = scores
    doubles[:, _POSITION:_POSITION + 3] = centres
    doubles[:, _CENTRE:_CENTRE + 3] = centres
    doubles[:, _ORIENTATION_W] = doubles[:, _CENTRE_W] = 1.0
    doubles[:, _SIZE:_SIZE + 3] = sizes
    data = doubles.tobytes()
    size = _DOUBLES * 8
    writer = CdrWriter()
    writer.header(sec, nanosec, frame_id)
    writer.uint32(count)
    for index in range(count):
        writer.header(sec, nanosec, frame_id)
        writer.uint32(1)
        writer.string(class_ids[index])
        writer.float64s(data[index * size:(index + 1) * size])
        writer.string(ids[index])
    return writer.bytes()
