"""ByteTrack on NumPy and ``lap``: stable track ids for a detector's boxes, without torch.

ByteTrack (Zhang et al., ECCV 2022) associates every box, not only confident ones: a Kalman
filter predicts each track's box, the high-score boxes are assigned to the tracks by IoU
first, the low-score boxes then to the tracks still unmatched (recovering occluded objects
without starting tracks on clutter). Tracks a frame leaves unmatched are kept, lost, for
``track_buffer`` frames; a box no track takes starts a track when its score reaches
``new_track_thresh``, and that track is confirmed (published) once a second frame matches it.

Written here from the paper and from what Ultralytics' ``BYTETracker`` (``ultralytics.trackers``,
8.4) does, so that on the same detections both give the same track ids, frame by frame
(``test/unit/results/test_bytetrack.py`` holds them equal): its thresholds and fixed match
limits, its order of operations, float32 box arithmetic and IoU (costs tie and cross their
limits at the same boxes), the assignment by ``lap.lapjv`` on the same cost matrices, and its
bookkeeping, quirks included (a lost track that expires stays in the lost pool for one more
frame; a track that came back from there is dropped as soon as it is lost again). Class ids
take no part in association, as there.

Tracks are kept as arrays, one row per track (:class:`_Tracks`); a frame's work is a handful
of whole-array operations, whatever the number of tracks.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, fields
from typing import Any

import lap
import numpy as np

#: The default settings (the keys and values of Ultralytics' ``cfg/trackers/bytetrack.yaml``,
#: which a test holds equal where Ultralytics is installed).
DEFAULTS: dict[str, Any] = {
    'tracker_type': 'bytetrack',
    'track_high_thresh': 0.25,  # boxes at or above: the first association
    'track_low_thresh': 0.1,  # boxes above, below the high one: the second association
    'new_track_thresh': 0.25,  # an unmatched high box at or above starts a track
    'track_buffer': 30,  # frames a lost track is kept
    'match_thresh': 0.8,  # most cost of a first-association match
    'fuse_score': True,  # first-association costs weigh the IoU by the box's score
}
#: Kalman noise per pixel of box height: position and velocity (DeepSORT's weights).
POSITION_NOISE = 1 / 20
VELOCITY_NOISE = 1 / 160
#: Most cost (1 - IoU) of a second-association match and of an unconfirmed track's match.
LOW_MATCH_COST = 0.5
UNCONFIRMED_MATCH_COST = 0.7
#: A tracked and a lost track closer than this cost are one object: the younger is dropped.
DUPLICATE_COST = 0.15
#: Removals remembered: a lost track whose id is among them leaves the lost pool.
REMOVED_MEMORY = 1000
#: Added to each union, as Ultralytics' IoU does (so boxes of no area have IoU 0).
IOU_EPS = 1e-7

TRACKED, LOST, REMOVED = 0, 1, 2
#: Matched rows, their columns, free rows, free columns (:func:`assign`).
Assignment = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
#: Kalman means (n, 8) and covariances (n, 8, 8).
States = tuple[np.ndarray, np.ndarray]


@dataclass
class _Tracks:
    """Tracks as rows: Kalman state (cx, cy, aspect, height and their velocities) and ids."""

    ids: np.ndarray  # (n,) int64, from 1 per tracker
    mean: np.ndarray  # (n, 8) float64
    cov: np.ndarray  # (n, 8, 8) float64
    state: np.ndarray  # (n,) int8: TRACKED, LOST, REMOVED
    confirmed: np.ndarray  # (n,) bool: matched on a second frame (or born on the first)
    last: np.ndarray  # (n,) int64: the frame of the last match
    start: np.ndarray  # (n,) int64: the frame of birth
    idx: np.ndarray  # (n,) int64: the detection of the last match

    @classmethod
    def empty(cls) -> _Tracks:
        """Return no tracks."""
        return cls(np.zeros(0, np.int64), np.zeros((0, 8)), np.zeros((0, 8, 8)),
                   np.zeros(0, np.int8), np.zeros(0, bool), np.zeros(0, np.int64),
                   np.zeros(0, np.int64), np.zeros(0, np.int64))

    def __len__(self) -> int:
        return len(self.ids)

    def take(self, rows: np.ndarray) -> _Tracks:
        """Return the tracks of ``rows`` (indices or a mask), in that order."""
        return _Tracks(*(getattr(self, name)[rows] for name in _TRACK_FIELDS))

    def join(self, other: _Tracks) -> _Tracks:
        """Return these tracks, then ``other``'s."""
        return _Tracks(*(np.concatenate([getattr(self, name), getattr(other, name)])
                         for name in _TRACK_FIELDS))


_TRACK_FIELDS = tuple(f.name for f in fields(_Tracks))


def corners(mean: np.ndarray) -> np.ndarray:
    """Return the boxes of Kalman means (n, 8) as (n, 4) float32 corners."""
    height = mean[:, 3]
    width = mean[:, 2] * height
    left, top = mean[:, 0] - width / 2, mean[:, 1] - height / 2
    return np.stack([left, top, left + width, top + height], axis=1).astype(np.float32)


@dataclass
class _Detections:
    """One frame's boxes as the tracker measures them (float32, as Ultralytics rounds them)."""

    xyxy: np.ndarray  # (n, 4) corners, rebuilt from the top-left corner and the size
    xyah: np.ndarray  # (n, 4) centre, aspect (w / h), height: the Kalman measurement
    scores: np.ndarray  # (n,) float32
    valid: np.ndarray  # (n,) bool: a box of some width and height

    @classmethod
    def of(cls, boxes_xyxy: np.ndarray, scores: np.ndarray) -> _Detections:
        """Measure ``boxes_xyxy`` (n, 4) with their ``scores``."""
        boxes = np.asarray(boxes_xyxy, dtype=np.float32).reshape(-1, 4)
        centre = (boxes[:, :2] + boxes[:, 2:]) / 2
        size = boxes[:, 2:] - boxes[:, :2]
        corner = (centre.astype(np.float64) - size.astype(np.float64) / 2).astype(np.float32)
        with np.errstate(divide='ignore', invalid='ignore'):  # boxes of no height: not used
            aspect = size[:, 0] / size[:, 1]
        xyah = np.concatenate([corner + size / 2, aspect[:, None], size[:, 1:]], axis=1)
        return cls(np.concatenate([corner, corner + size], axis=1), xyah,
                   np.asarray(scores, dtype=np.float32).reshape(-1),
                   (size[:, 0] > 0) & (size[:, 1] > 0))


def iou(boxes: np.ndarray, others: np.ndarray) -> np.ndarray:
    """(n, 4) vs (m, 4) float32 corners → (n, m) IoU, :data:`IOU_EPS` added to each union."""
    x1, y1, x2, y2 = boxes.T
    u1, v1, u2, v2 = others.T
    width = np.maximum(np.minimum(x2[:, None], u2) - np.maximum(x1[:, None], u1), 0)
    height = np.maximum(np.minimum(y2[:, None], v2) - np.maximum(y1[:, None], v1), 0)
    inter = width * height
    union = (u2 - u1) * (v2 - v1) + ((x2 - x1) * (y2 - y1))[:, None] - inter
    return inter / (union + IOU_EPS)


def match_cost(tracks: np.ndarray, dets: np.ndarray, scores: np.ndarray | None) -> np.ndarray:
    """Return the cost of each (track, detection): 1 - IoU, or 1 - IoU × score (``scores``).

    The IoU is taken back from its cost before it is weighed, rounding as Ultralytics does.
    """
    cost = 1 - iou(tracks, dets)
    return cost if scores is None else 1 - (1 - cost) * scores


def assign(cost: np.ndarray, limit: float) -> Assignment:
    """Match rows to columns at least total cost, each match under ``limit`` (``lap.lapjv``).

    Return the matched rows (ascending), their columns, the free rows and the free columns.
    """
    rows, cols = cost.shape
    if cost.size == 0:
        none = np.zeros(0, np.int64)
        return none, none, np.arange(rows), np.arange(cols)
    _, col_of, row_of = lap.lapjv(cost, extend_cost=True, cost_limit=limit)
    matched = np.flatnonzero(col_of >= 0)
    return matched, col_of[matched], np.flatnonzero(col_of < 0), np.flatnonzero(row_of < 0)


def _add_variances(cov: np.ndarray, std: list[Any]) -> None:
    """Add the squares of ``std`` (a number or (n,) each) to the diagonals of ``cov``, in place."""
    for i, value in enumerate(std):
        cov[:, i, i] += np.square(value)


def initiate(xyah: np.ndarray) -> States:
    """Return the Kalman states of new tracks at measurements ``xyah`` (n, 4), at rest."""
    z = xyah.astype(np.float64)
    h = z[:, 3]
    mean = np.concatenate([z, np.zeros_like(z)], axis=1)
    pos, vel = 2 * POSITION_NOISE * h, 10 * VELOCITY_NOISE * h
    cov = np.zeros((len(z), 8, 8))
    _add_variances(cov, [pos, pos, 1e-2, pos, vel, vel, 1e-5, vel])
    return mean, cov


def predict(mean: np.ndarray, cov: np.ndarray, moving: np.ndarray) -> None:
    """Move states one frame ahead, in place, at constant velocity.

    A track not ``moving`` (lost) has its height's velocity zeroed first, so it neither
    grows nor shrinks while unseen. The noise added is relative to the height before.
    """
    mean[~moving, 7] = 0
    h = mean[:, 3].copy()
    pos, vel = POSITION_NOISE * h, VELOCITY_NOISE * h
    mean[:, :4] += mean[:, 4:]
    cov[:, :4, :] += cov[:, 4:, :]
    cov[:, :, :4] += cov[:, :, 4:]
    _add_variances(cov, [pos, pos, 1e-2, pos, vel, vel, 1e-5, vel])


def correct(mean: np.ndarray, cov: np.ndarray, xyah: np.ndarray) -> States:
    """Return the states ``mean``, ``cov`` (n, 8), (n, 8, 8) corrected by ``xyah`` (n, 4)."""
    h = mean[:, 3]
    pos = POSITION_NOISE * h
    innovation_cov = cov[:, :4, :4].copy()
    _add_variances(innovation_cov, [pos, pos, 1e-1, pos])
    gain = np.linalg.solve(innovation_cov, cov[:, :, :4].transpose(0, 2, 1)).transpose(0, 2, 1)
    innovation = xyah - mean[:, :4]
    mean = mean + np.matmul(innovation[:, None, :], gain.transpose(0, 2, 1))[:, 0]
    shrink = np.matmul(gain, np.matmul(innovation_cov, gain.transpose(0, 2, 1)))
    return mean, cov - shrink


def below(scores: np.ndarray, thresh: float) -> np.ndarray:
    """Say which float32 ``scores`` are below ``thresh`` as one score (a NumPy scalar) is.

    Ultralytics compares each new track's score alone, at the precision NumPy gives a float32
    scalar beside a Python number (float64 in NumPy 1, float32 in 2), not the arrays' float32.
    """
    dtype = np.result_type(np.float32(0), thresh)
    return scores.astype(dtype) < np.asarray(thresh, dtype)


class ByteTrack:
    """One ByteTrack state: feed it each frame's detections, in order, with :meth:`update`."""

    def __init__(self, track_high_thresh: float = DEFAULTS['track_high_thresh'],
                 track_low_thresh: float = DEFAULTS['track_low_thresh'],
                 new_track_thresh: float = DEFAULTS['new_track_thresh'],
                 track_buffer: int = DEFAULTS['track_buffer'],
                 match_thresh: float = DEFAULTS['match_thresh'],
                 fuse_score: bool = DEFAULTS['fuse_score'], tracker_type: str = 'bytetrack'
                 ) -> None:
        """Take the settings of :data:`DEFAULTS` (``tracker_type`` only as a key of them)."""
        if tracker_type != 'bytetrack':
            raise ValueError(f'tracker_type {tracker_type!r} is not bytetrack')
        self.high, self.low, self.new = track_high_thresh, track_low_thresh, new_track_thresh
        self.max_lost, self.match, self.fuse = track_buffer, match_thresh, fuse_score
        self.frame = 0
        self._next_id = 1
        self._tracked = _Tracks.empty()  # tracked (confirmed or not), in their order
        self._lost = _Tracks.empty()  # lost, in the order they were lost
        self._removed: deque[int] = deque(maxlen=REMOVED_MEMORY)
        self._removed_ids: set[int] = set()  # those of _removed

    def update(self, boxes_xyxy: np.ndarray, scores: np.ndarray,
               class_ids: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Track one frame; return (indices of the tracked detections, their track ids).

        Indices point into the given detections (ascending); only confirmed tracks are
        returned. ``class_ids`` take no part (a box that changes class keeps its track).
        """
        self.frame += 1
        dets = _Detections.of(boxes_xyxy, scores)
        table = self._tracked.join(self._lost)
        frame = _Frame(self, dets, table)
        frame.associate()
        born = frame.births()
        table = table.join(born) if len(born) else table
        tracked, lost = frame.pools(table)
        if len(frame.removed):
            self._removed.extend(table.ids[frame.removed].tolist())
            self._removed_ids = set(self._removed)
        self._tracked, self._lost = table.take(tracked), table.take(lost)
        out = self._tracked.take(self._tracked.confirmed)
        order = np.argsort(out.idx, kind='stable')
        return out.idx[order], out.ids[order]


class _Frame:
    """One :meth:`ByteTrack.update`: the associations, as rows of the frame's track table.

    The table holds the tracked tracks, then the lost ones (then, once born, the new ones).
    """

    def __init__(self, tracker: ByteTrack, dets: _Detections, table: _Tracks) -> None:
        self.tracker, self.dets, self.table = tracker, dets, table
        n_tracked = len(tracker._tracked)
        self.n_tracked = n_tracked
        self.lost = np.arange(n_tracked, len(table))
        self.confirmed = np.flatnonzero(table.confirmed[:n_tracked])
        self.unconfirmed = np.flatnonzero(~table.confirmed[:n_tracked])
        self.pool = np.concatenate([self.confirmed, self.lost])
        self.refound = np.zeros(0, np.int64)
        self.newly_lost = np.zeros(0, np.int64)
        self.removed = np.zeros(0, np.int64)
        self.born = np.zeros(0, np.int64)

    def associate(self) -> None:
        """Match the tracks to the detections in ByteTrack's three stages; correct them."""
        t, dets, tracker = self.table, self.dets, self.tracker
        high = np.flatnonzero(dets.valid & (dets.scores >= tracker.high))
        low = np.flatnonzero(dets.valid & (dets.scores > tracker.low)
                             & (dets.scores < tracker.high))
        pool = self.pool
        if len(pool):
            predict_rows(t, pool)
        rows1, dets1, free1, rest = self._stage(pool, high, tracker.match, tracker.fuse)
        unmatched = free1[free1 < len(self.confirmed)]  # tracked ones: the lost stay lost
        rows2, dets2, free2, _ = self._stage(pool[unmatched], low, LOW_MATCH_COST, False)
        rows3, dets3, free3, left = self._stage(self.unconfirmed, high[rest],
                                                UNCONFIRMED_MATCH_COST, tracker.fuse)
        rows = np.concatenate([pool[rows1], pool[unmatched][rows2], self.unconfirmed[rows3]])
        matched = np.concatenate([high[dets1], low[dets2], high[rest][dets3]])
        self._correct(rows, matched)
        self.refound = pool[rows1][pool[rows1] >= self.n_tracked]
        self.newly_lost = pool[unmatched][free2]
        t.state[self.newly_lost] = LOST
        self._remove(self.unconfirmed[free3])
        self.born = high[rest][left]

    def _stage(self, rows: np.ndarray, cols: np.ndarray, limit: float, fuse: bool
               ) -> Assignment:
        """Assign track ``rows`` to detections ``cols``; return :func:`assign`'s positions."""
        if not len(rows) or not len(cols):
            return assign(np.zeros((len(rows), len(cols)), np.float32), limit)
        scores = self.dets.scores[cols] if fuse else None
        cost = match_cost(corners(self.table.mean[rows]), self.dets.xyxy[cols], scores)
        return assign(cost, limit)

    def _correct(self, rows: np.ndarray, matched: np.ndarray) -> None:
        """Correct the tracks of ``rows`` by their detections ``matched``; they are tracked."""
        t = self.table
        t.mean[rows], t.cov[rows] = correct(t.mean[rows], t.cov[rows],
                                            self.dets.xyah[matched])
        t.state[rows], t.confirmed[rows] = TRACKED, True
        t.last[rows], t.idx[rows] = self.tracker.frame, matched

    def _remove(self, unconfirmed: np.ndarray) -> None:
        """Remove the unmatched ``unconfirmed`` tracks and the lost tracks past the buffer."""
        t, frame = self.table, self.tracker.frame
        expired = self.lost[frame - t.last[self.lost] > self.tracker.max_lost]
        self.removed = np.concatenate([unconfirmed, expired])
        t.state[self.removed] = REMOVED

    def births(self) -> _Tracks:
        """Return the tracks that the unmatched high boxes scoring ``new_track_thresh`` start."""
        tracker = self.tracker
        born = self.born[~below(self.dets.scores[self.born], tracker.new)]
        count = len(born)
        mean, cov = initiate(self.dets.xyah[born])
        ids = np.arange(tracker._next_id, tracker._next_id + count, dtype=np.int64)
        tracker._next_id += count
        frame = np.full(count, tracker.frame, np.int64)
        return _Tracks(ids, mean, cov, np.full(count, TRACKED, np.int8),
                       np.full(count, tracker.frame == 1), frame, frame.copy(),
                       born.astype(np.int64))

    def pools(self, table: _Tracks) -> tuple[np.ndarray, np.ndarray]:
        """Return the rows of ``table`` (births at its end) tracked and lost after this frame.

        Tracked: the tracked that stay so, the births, the refound. Lost: the lost not
        refound (those just expired too), the newly lost, less any removed before; then of a
        tracked and a lost track on one object, the younger goes.
        """
        n_old = len(self.table)
        tracked = np.concatenate([np.flatnonzero(table.state[:self.n_tracked] == TRACKED),
                                  np.arange(n_old, len(table)), self.refound])
        stays = np.ones(len(self.lost), bool)
        stays[self.refound - self.n_tracked] = False
        lost = np.concatenate([self.lost[stays], self.newly_lost])
        removed = self.tracker._removed_ids
        if removed and len(lost):
            lost = lost[[int(i) not in removed for i in table.ids[lost]]]
        return drop_duplicates(table, tracked, lost)


def predict_rows(table: _Tracks, rows: np.ndarray) -> None:
    """Predict the states of ``table``'s ``rows`` one frame ahead (:func:`predict`)."""
    mean, cov = table.mean[rows], table.cov[rows]
    predict(mean, cov, table.state[rows] == TRACKED)
    table.mean[rows], table.cov[rows] = mean, cov


def drop_duplicates(table: _Tracks, tracked: np.ndarray, lost: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Drop, of each tracked and lost pair under :data:`DUPLICATE_COST`, the younger track.

    Age is the frames from birth to the last match; at equal ages the tracked one goes.
    """
    if not len(tracked) or not len(lost):
        return tracked, lost
    cost = 1 - iou(corners(table.mean[tracked]), corners(table.mean[lost]))
    p, q = np.nonzero(cost < DUPLICATE_COST)
    age = table.last - table.start
    older = age[tracked[p]] > age[lost[q]]
    keep_tracked = np.ones(len(tracked), bool)
    keep_lost = np.ones(len(lost), bool)
    keep_tracked[p[~older]] = False
    keep_lost[q[older]] = False
    return tracked[keep_tracked], lost[keep_lost]
