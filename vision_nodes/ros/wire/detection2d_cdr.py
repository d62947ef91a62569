"""Vectorised CDR encoding of ``vision_msgs/Detection2DArray``, for publishing as bytes.

rclpy builds a message from Python objects and converts every field to C on publish, a cost
that grows with every Detection2D (docs/benchmarks.md). This module writes the same
serialised message (little-endian plain CDR, as ``rclpy.serialization.serialize_message``
gives it; only the padding bytes differ: zeros here, whatever was in memory there) with a
few NumPy operations whatever the count; ``Publisher.publish`` accepts the bytes as they are.

Layout of one Detection2D (vision_msgs 4.x), offsets from the start of the CDR payload (the
byte after the 4-byte encapsulation header, :data:`.cdr_writer.CDR_LE`; primitives are
aligned to their size, :func:`.cdr_writer.align`)::

    int32 sec, uint32 nanosec, string frame_id      std_msgs/Header
    uint32 1                                        results: one ObjectHypothesisWithPose
    string class_id, float64 score                  ObjectHypothesis
    float64 x3 position, float64 x4 orientation     PoseWithCovariance.pose (identity)
    float64 x36 covariance                          zeros
    float64 x, y, theta, size_x, size_y             BoundingBox2D
    string id                                       given, or empty

A string is a uint32 length (bytes + 1) then the UTF-8 bytes and a NUL. The 49 float64s start
on an 8-byte boundary, so the distance from one detection's float64s to the next one's depends
only on this detection's ``id`` and the next one's ``class_id`` lengths: every offset is a
cumulative sum.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .cdr_writer import CDR_LE, align

_DOUBLES = 49  # score, pose (7), covariance (36), bbox (5)
_ORIENTATION_W = 7  # index of orientation.w among a detection's doubles
_BBOX = 44  # index of bbox.center.position.x among a detection's doubles
#: The doubles of a detection that are not 0: score, orientation.w, bbox x, y, size_x, size_y,
#: and bbox theta for rotated boxes.
_SET = np.array([0, _ORIENTATION_W, _BBOX, _BBOX + 1, _BBOX + 3, _BBOX + 4, _BBOX + 2])
#: Bytes from a detection's first float64 to its ``id``'s characters: the float64s, the length.
_TO_ID_CHARS = _DOUBLES * 8 + 4


def _strings(values) -> tuple[bytes, np.ndarray]:
    """UTF-8 bytes of ``values`` joined, and each one's length in bytes."""
    encoded = [v.encode('utf-8') for v in values]
    return b''.join(encoded), np.fromiter((len(b) for b in encoded), np.int64, len(encoded))


def _put_strings(payload: np.ndarray, at: np.ndarray, chars: bytes, lengths: np.ndarray
                 ) -> None:
    """Write each string's characters at ``at`` (its length field is written by the caller)."""
    if not chars:
        return
    before = np.cumsum(lengths) - lengths  # characters of the strings before each one
    payload[np.repeat(at - before, lengths) + np.arange(len(chars))] = \
        np.frombuffer(chars, dtype=np.uint8)


def encode_detection2d_array(sec: int, nanosec: int, frame_id: str, boxes_xyxy: np.ndarray,
                             scores: np.ndarray, class_ids: np.ndarray,
                             ids: Sequence[str] | None = None,
                             rotated: np.ndarray | None = None) -> bytes:
    """Serialise a Detection2DArray of these detections, every field as rclpy would.

    Every Detection2D carries the array's header, one hypothesis (``class_id`` the class
    index as a string, ``score``), an identity pose with zero covariance, the box as centre
    and size with ``theta`` 0, and its ``id`` from ``ids`` (empty without). With ``rotated``
    ((N, 5) cx, cy, w, h, angle in radians) the box is that rotated box instead: its centre,
    ``size_x`` = w, ``size_y`` = h and ``theta`` = angle (``boxes_xyxy`` is not read).
    """
    frame = frame_id.encode('utf-8')
    labels, lengths = _strings(str(int(c)) for c in class_ids)
    count = lengths.shape[0]
    id_chars, id_lengths = _strings(ids if ids is not None else [''] * count)
    # A Header that starts 4-aligned, padded to 4 (sec, nanosec, frame_id and its NUL),
    # then a uint32: in the array, the detection count, after which the first detection
    # starts; in a detection, the results count, after which its class_id's length field is.
    first = hyp = align(13 + len(frame), 4) + 4
    # Float64s of detection i start at doubles_at[i] (8-aligned); detection i + 1 starts
    # after detection i's id, 4-aligned, and its float64s after its class_id, 8-aligned.
    after_id = align(_TO_ID_CHARS + id_lengths + 1, 4)  # to the next detection's start
    doubles_at = np.zeros(count, dtype=np.int64)
    if count:
        doubles_at[0] = align(first + hyp + 5 + lengths[0], 8)
        steps = align(after_id[:-1] + hyp + 5 + lengths[1:], 8)
        doubles_at[1:] = doubles_at[0] + np.cumsum(steps)
    starts = np.concatenate([[first], doubles_at[:-1] + after_id[:-1]]) if count else \
        doubles_at
    hyp_at = starts + hyp
    end = int(doubles_at[-1] + _TO_ID_CHARS + id_lengths[-1] + 1) if count else first
    # payload (the CDR stream after the encapsulation header) starts 8-aligned in memory,
    # so its float64 and uint32 views are aligned.
    raw = np.zeros(align(end, 8) + 16, dtype=np.uint8)
    raw[4:8] = np.frombuffer(CDR_LE, dtype=np.uint8)
    payload = raw[8:]
    u32 = payload.view('<u4')
    f64 = payload.view('<f8')
    # The bytes every Detection2D starts with: its header, padding, one hypothesis; the
    # array starts with the same header.
    prefix = np.zeros(hyp, dtype=np.uint8)
    prefix[:12] = np.array([sec & 0xFFFFFFFF, nanosec, len(frame) + 1], '<u4').view(np.uint8)
    prefix[12:12 + len(frame)] = np.frombuffer(frame, np.uint8)
    prefix[hyp - 4] = 1
    payload[:first - 4] = prefix[:hyp - 4]
    u32[(first - 4) // 4] = count
    if count:
        words = prefix.view('<u4')  # starts and hyp are multiples of 4
        u32[(starts // 4)[:, None] + np.arange(words.shape[0])] = words
        u32[hyp_at // 4] = lengths + 1
        _put_strings(payload, hyp_at + 4, labels, lengths)
        rows = doubles_at // 8
        values = np.zeros((count, len(_SET)), dtype=np.float64)  # the doubles not 0
        values[:, 0], values[:, 1] = scores, 1.0
        if rotated is None:
            boxes = np.asarray(boxes_xyxy, dtype=np.float64)
            values[:, 2:4] = (boxes[:, 0:2] + boxes[:, 2:4]) / 2.0
            values[:, 4:6] = boxes[:, 2:4] - boxes[:, 0:2]
        else:
            values[:, 2:7] = np.asarray(rotated, dtype=np.float64).reshape(-1, 5)
        f64[rows[:, None] + _SET] = values
        u32[(rows + _DOUBLES) * 2] = id_lengths + 1
        _put_strings(payload, doubles_at + _TO_ID_CHARS, id_chars, id_lengths)
    return raw[4:8 + end].tobytes()
