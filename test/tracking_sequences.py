"""Test helper: detection sequences for trackers, and Ultralytics' ByteTrack as the reference.

:func:`synthetic` makes seeded sequences that reach each of ByteTrack's rules; :func:`pan`
slides a crop window over a photograph (a camera panning over a still scene) for a detector
to run on; :class:`UltralyticsByteTrack` is Ultralytics' ``BYTETracker`` fed as
``vision_nodes/tracking.py`` fed it before the package had its own (``_Boxes``), and counts
the rules a sequence reached. Used by test/unit/results/test_bytetrack.py and
benchmarks/bench_bytetrack.py.
"""

from __future__ import annotations

import types
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import numpy as np

#: A frame's detections: (n, 4) float32 xyxy boxes, (n,) float32 scores, (n,) int64 classes.
Frame = tuple[np.ndarray, np.ndarray, np.ndarray]
#: The image and the frame size of the panned sequences.
WIDTH, HEIGHT = 1280.0, 720.0
#: Scores near which a rule changes (the thresholds of the settings the tests compare under).
EDGES = (0.1, 0.25, 0.5, 0.6, 0.7, 0.8)


def _edge_score(rng: np.random.Generator) -> np.float32:
    """Return a score at, just under, just over or near one of :data:`EDGES` (float32)."""
    edge = np.float32(rng.choice(EDGES))
    return rng.choice([edge, np.nextafter(edge, np.float32(0)),
                       np.nextafter(edge, np.float32(1)),
                       np.float32(edge + rng.uniform(-0.02, 0.02))])


def _interval(rng: np.random.Generator, start: int, stop: int, longest: int
              ) -> tuple[int, int]:
    first = int(rng.integers(start, max(start + 1, stop)))
    return first, first + int(rng.integers(1, longest + 1))


def _object(rng: np.random.Generator, frames: int) -> dict[str, Any]:
    """Return an object: where and when, how it moves, when it hides, twins, changes class."""
    birth = int(rng.integers(0, frames // 2)) if rng.random() < 0.6 else 0
    death = int(rng.integers(birth + 5, frames + 40))
    hidden = [(*_interval(rng, birth, death, 7), rng.random() < 0.5)
              for _ in range(int(rng.integers(0, 3)))]  # (start, stop, seen at a low score)
    return dict(birth=birth, death=death, size=rng.uniform([15, 15], [200, 300]),
                centre=rng.uniform([0, 0], [WIDTH, HEIGHT]), velocity=rng.normal(0, 4, 2),
                turns=rng.random() < 0.4, hidden=hidden, cls=int(rng.integers(0, 3)),
                score=rng.uniform(0.3, 0.95), change=int(rng.integers(0, frames)),
                twin=_interval(rng, 0, frames, 9) if rng.random() < 0.3 else (-1, -1))


def _move(obj: dict[str, Any], rng: np.random.Generator) -> None:
    if obj['turns'] and rng.random() < 0.1:
        obj['velocity'] = obj['velocity'] + rng.normal(0, 3, 2)
    obj['centre'] = obj['centre'] + obj['velocity']
    obj['size'] = obj['size'] * np.exp(rng.normal(0, 0.01, 2))


def _detect(obj: dict[str, Any], k: int, rng: np.random.Generator) -> list[tuple]:
    """Return the boxes the detector gives of ``obj`` in frame ``k``: (box, score, class)."""
    if not obj['birth'] <= k < obj['death']:
        return []
    hidden = [low for start, stop, low in obj['hidden'] if start <= k < stop]
    if hidden and not hidden[0]:
        return []
    score = rng.uniform(0.11, 0.24) if hidden else obj['score'] + rng.normal(0, 0.05)
    score = _edge_score(rng) if rng.random() < 0.08 else score
    centre = obj['centre'] + rng.normal(0, 1.5, 2)
    half = obj['size'] * (1 + rng.normal(0, 0.03, 2)) / 2
    box = np.concatenate([centre - half, centre + half])
    cls = obj['cls'] if k < obj['change'] else (obj['cls'] + 1) % 3
    out = [(box, float(np.clip(score, 0.01, 0.99)), cls)]
    if obj['twin'][0] <= k < obj['twin'][1]:  # a second box on it (a detector without NMS)
        out.append((box + rng.normal(0, 2, 4), rng.uniform(0.2, 0.9), cls))
    return out


def _extras(rng: np.random.Generator, found: list[tuple]) -> list[tuple]:
    """Return clutter boxes, now and then a one-frame duplicate and a box of no width."""
    out = []
    for _ in range(int(rng.poisson(1.0))):
        centre, size = rng.uniform([0, 0], [WIDTH, HEIGHT]), rng.uniform(10, 80, 2)
        out.append((np.concatenate([centre - size / 2, centre + size / 2]),
                    rng.uniform(0.05, 0.4), int(rng.integers(0, 3))))
    if found and rng.random() < 0.05:
        box, _, cls = found[int(rng.integers(len(found)))]
        out.append((box + rng.normal(0, 1, 4), rng.uniform(0.1, 0.9), cls))
    if found and rng.random() < 0.02:
        out.append((np.array([10.0, 10.0, 10.0, 50.0]), 0.9, 0))
    return out


def synthetic(seed: int, frames: int = 120) -> list[Frame]:
    """Return a seeded sequence of ``frames``: 3 to 11 objects and clutter, shuffled.

    Objects move at constant or changing velocities (crossing, leaving the frame), are born
    and die, hide for a few frames (missing, or seen only at a low score), change class once,
    are detected twice for a few frames; some scores sit at a threshold; a few frames are
    empty.
    """
    rng = np.random.default_rng(seed)
    objects = [_object(rng, frames) for _ in range(int(rng.integers(3, 12)))]
    empty = set(rng.choice(frames, size=int(rng.integers(0, 4)), replace=False).tolist())
    out = []
    for k in range(frames):
        found = []
        for obj in objects:
            _move(obj, rng)
            found += _detect(obj, k, rng)
        found = [] if k in empty else found + _extras(rng, found)
        order = rng.permutation(len(found))
        out.append((np.array([found[i][0] for i in order], np.float32).reshape(-1, 4),
                    np.array([found[i][1] for i in order], np.float32),
                    np.array([found[i][2] for i in order], np.int64)))
    return out


def pan(image: np.ndarray, frames: int, size: tuple[int, int] = (640, 480)
        ) -> Iterator[np.ndarray]:
    """Yield crops of ``image`` (BGR) in a window of ``size`` (w, h) sweeping it and back.

    The window moves a few pixels a frame, speeding up and slowing down (a camera panning
    unevenly over a still scene): objects glide, leave the crop and come back.
    """
    height, width = image.shape[:2]
    span_x, span_y = max(width - size[0], 0), max(height - size[1], 0)
    for k in range(frames):
        phase = k / max(frames - 1, 1)
        x = span_x * (1 - np.cos(2 * np.pi * phase)) / 2  # out and back: speeds up, slows down
        y = span_y * (1 - np.cos(3 * np.pi * phase)) / 2
        left, top = int(round(x)), int(round(y))
        yield image[top:top + size[1], left:left + size[0]]


def detect(weights: Path, images: list[np.ndarray], conf: float = 0.05) -> list[Frame]:
    """Return Ultralytics' YOLO ``predict`` of each image (CPU, imgsz 640) as frames.

    ``conf`` keeps the low-score boxes ByteTrack's second association takes.
    """
    import torch

    from vision_nodes.loaders.ultralytics import import_ultralytics

    threads = torch.get_num_threads()
    try:
        yolo = import_ultralytics().YOLO(str(weights))
        out = []
        for image in images:
            boxes = yolo.predict(image, imgsz=640, conf=conf, device='cpu', verbose=False)[0]
            boxes = boxes.boxes.cpu().numpy()
            out.append((boxes.xyxy.astype(np.float32), boxes.conf.astype(np.float32),
                        boxes.cls.astype(np.int64)))
        return out
    finally:
        torch.set_num_threads(threads)  # Ultralytics' CPU predict changes it process-wide


class UltralyticsByteTrack:
    """Ultralytics' ``BYTETracker``, fed as tracking.py fed it (``_Boxes``, no image).

    :attr:`events` counts the rules its frames reached, read from its state: ``second``
    (a low-score box tracked), ``refound`` (a lost track back), ``lingering`` (one back from
    the lost pool after it expired), ``expired``, ``duplicate`` (a track dropped as another's
    duplicate).
    """

    def __init__(self, settings: dict[str, Any]) -> None:
        from ultralytics.trackers import BYTETracker

        self.settings = settings
        self.tracker = BYTETracker(types.SimpleNamespace(**settings))
        self.events: Counter[str] = Counter()

    def update(self, boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
        """Track one frame; return (detection indices, track ids), in index order."""
        from vision_nodes.tracking import _Boxes

        before = {t.track_id: t.state for t in self.tracker.tracked_stracks
                  + self.tracker.lost_stracks}
        out = self.tracker.update(_Boxes(boxes, scores, classes), None)
        self._count(before, out)
        if len(out) == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        order = np.argsort(out[:, -1], kind='stable')
        return out[order, -1].astype(np.int64), out[order, 4].astype(np.int64)

    def _count(self, before: dict[int, int], out: np.ndarray) -> None:
        tracker, events = self.tracker, self.events
        events['second'] += int((out[:, 5] < self.settings['track_high_thresh']).sum()) \
            if len(out) else 0
        states = [before.get(int(i)) for i in (out[:, 4] if len(out) else [])]
        events['refound'] += states.count(2)  # TrackState.Lost
        events['lingering'] += states.count(3)  # TrackState.Removed
        events['expired'] += sum(1 for t in tracker.removed_stracks_frame if t.is_activated)
        now = {t.track_id for t in tracker.tracked_stracks + tracker.lost_stracks}
        gone = {t.track_id for t in tracker.removed_stracks}
        events['duplicate'] += sum(1 for i in before if i not in now and i not in gone)
