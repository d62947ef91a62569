"""Vectorised CDR encoding of ``vision_msgs/Detection2DArray``, for publishing as bytes.

rclpy builds a message from Python objects and converts every field to C on publish, a cost
that grows with every Detection2D (docs/benchmarks.md). This module writes the same
serialised message (little-endian plain CDR, as ``rclpy.serialization.serialize_message``
gives it; only the padding bytes differ: zeros here, whatever was in memory there) with a
few NumPy operations whatever the count; ``Publisher.publish`` accepts the bytes as they are.

Layout of one Detection2D (vision_msgs 4.x), offsets from the start of the CDR payload (the
byte after the 4-byte encapsulation header; primitives are aligned to their size)::

    int32 sec, uint32 nanosec, string frame_id      std_msgs/Header
    uint32 1                                        results: one ObjectHypothesisWithPose
    string class_id, float64 score                  ObjectHypothesis
    float64 x3 position, float64 x4 orientation     PoseWithCovariance.pose (identity)
    float64 x36 covariance                          zeros
    float64 x, y, theta, size_x, size_y             BoundingBox2D
    string id                                       empty

A string is a uint32 length (bytes + 1) then the UTF-8 bytes and a NUL. The 49 float64s end
on an 8-byte boundary, so every detection after the first starts 8-aligned and its size
depends only on the lengths of ``frame_id`` and ``class_id``.
"""

from __future__ import annotations

import numpy as np

#: Encapsulation header: plain CDR, little endian, no options.
_CDR_LE = b'\x00\x01\x00\x00'
_DOUBLES = 49  # score, pose (7), covariance (36), bbox (5)
_ORIENTATION_W = 7  # index of orientation.w among a detection's doubles
_BBOX = 44  # index of bbox.center.position.x among a detection's doubles
#: Bytes from a detection's first float64 to the next detection: the float64s, then ``id``
#: (uint32 length 1, NUL) padded to 8.
_DETECTION_TAIL = _DOUBLES * 8 + 8


def _align(offset, alignment: int):
    """Round ``offset`` (an int or an integer array) up to a multiple of ``alignment``."""
    return (offset + alignment - 1) // alignment * alignment


def encode_detection2d_array(sec: int, nanosec: int, frame_id: str, boxes_xyxy: np.ndarray,
                             scores: np.ndarray, class_ids: np.ndarray) -> bytes:
    """Serialise a Detection2DArray of these detections, every field as rclpy would.

    Every Detection2D carries the array's header, one hypothesis (``class_id`` the class
    index as a string, ``score``), an identity pose with zero covariance, the box as centre
    and size with ``theta`` 0, and an empty ``id``.
    """
    frame = frame_id.encode('utf-8')
    labels = [str(int(c)).encode('ascii') for c in class_ids]
    count = len(labels)
    lengths = np.fromiter((len(b) for b in labels), dtype=np.int64, count=count)
    # A Header that starts 4-aligned, padded to 4 (sec, nanosec, frame_id and its NUL),
    # then a uint32: in the array, the detection count, after which the first detection
    # starts; in a detection, the results count, after which its class_id's length field is.
    first = hyp = _align(13 + len(frame), 4) + 4
    # From a detection's start to its first float64, for a start on an 8-byte boundary; the
    # first detection may start 4 bytes off one, the others (after 8-aligned float64s) not.
    to_doubles = _align(hyp + 5 + lengths, 8)
    if count:
        to_doubles[0] = _align(first + hyp + 5 + lengths[0], 8) - first
    sizes = to_doubles + _DETECTION_TAIL
    starts = first + np.cumsum(sizes) - sizes
    hyp_at = starts + hyp
    doubles_at = starts + to_doubles
    end = int(doubles_at[-1]) + _DOUBLES * 8 + 5 if count else first
    # payload (the CDR stream after the encapsulation header) starts 8-aligned in memory,
    # so its float64 and uint32 views are aligned.
    raw = np.zeros(_align(end, 8) + 16, dtype=np.uint8)
    raw[4:8] = np.frombuffer(_CDR_LE, dtype=np.uint8)
    payload = raw[8:]
    u32 = payload.view('<u4')
    f64 = payload.view('<f8')

    def put_header(at: np.ndarray) -> None:
        u32[at // 4] = sec & 0xFFFFFFFF
        u32[at // 4 + 1] = nanosec
        u32[at // 4 + 2] = len(frame) + 1
        if frame:
            payload[(at + 12)[:, None] + np.arange(len(frame))] = np.frombuffer(frame, np.uint8)

    put_header(np.zeros(1, dtype=np.int64))
    u32[(first - 4) // 4] = count
    if count:
        put_header(starts)
        u32[(hyp_at - 4) // 4] = 1  # one hypothesis per detection
        u32[hyp_at // 4] = lengths + 1
        chars = np.frombuffer(b''.join(labels), dtype=np.uint8)
        before = np.cumsum(lengths) - lengths  # characters of the labels before each one
        payload[np.repeat(hyp_at + 4 - before, lengths) + np.arange(chars.shape[0])] = chars
        rows = doubles_at // 8
        f64[rows] = scores
        f64[rows + _ORIENTATION_W] = 1.0
        boxes = np.asarray(boxes_xyxy, dtype=np.float64)
        f64[rows + _BBOX] = (boxes[:, 0] + boxes[:, 2]) / 2.0
        f64[rows + _BBOX + 1] = (boxes[:, 1] + boxes[:, 3]) / 2.0
        f64[rows + _BBOX + 3] = boxes[:, 2] - boxes[:, 0]
        f64[rows + _BBOX + 4] = boxes[:, 3] - boxes[:, 1]
        u32[(rows + _DOUBLES) * 2] = 1  # id: the empty string (length 1: the NUL)
    return raw[4:8 + end].tobytes()
