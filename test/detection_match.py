"""Test helper: assert that two sets of detections agree (:func:`vision_nodes.boxes.unmatched`)."""

from __future__ import annotations

from vision_nodes.boxes import unmatched


def assert_same_detections(a, b, min_score: float = 0.5, min_iou: float = 0.9,
                           at_least: int = 1) -> None:
    """Every confident detection of each set has a same-class match (IoU) in the other."""
    confident = int((a.scores >= min_score).sum())
    assert confident >= at_least, f'only {confident} detections above {min_score}'
    problems = unmatched(a, b, min_score, min_iou) + unmatched(b, a, min_score, min_iou)
    assert not problems, '; '.join(problems)
