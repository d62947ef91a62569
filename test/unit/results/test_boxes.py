"""The one box IoU (NMS, accuracy, tests and benchmarks read it) and detection matching."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from vision_nodes.boxes import pairwise_iou, unmatched


def test_iou_of_known_overlaps():
    """Same box 1, half overlap 1/3, apart 0, a box of no area 0 (never NaN)."""
    boxes = np.array([[0, 0, 10, 10], [5, 0, 15, 10], [20, 20, 30, 30], [3, 3, 3, 3]],
                     np.float32)
    iou = pairwise_iou(boxes)
    assert iou.shape == (4, 4) and iou.dtype == np.float32
    np.testing.assert_allclose(iou[0], [1, 1 / 3, 0, 0], rtol=1e-6)
    assert iou[3, 3] == 0 and not np.isnan(iou).any()
    np.testing.assert_array_equal(iou, iou.T)


def test_iou_in_given_arrays_is_the_same_matrix():
    """Computed into reused arrays (NMS's scratch), bit for bit the fresh matrix."""
    rng = np.random.default_rng(3)
    xy = rng.uniform(0, 300, (40, 2))
    boxes = np.concatenate([xy, xy + rng.uniform(1, 80, (40, 2))], 1)
    others = boxes[::3] + 2.5
    out = tuple(np.full((40, others.shape[0]), np.nan) for _ in range(3))
    got = pairwise_iou(boxes, others, out)
    assert got is out[0]
    assert got.tobytes() == pairwise_iou(boxes, others).tobytes()


def test_unmatched_lists_the_confident_detections_without_a_partner():
    a = SimpleNamespace(boxes=np.array([[0, 0, 10, 10], [50, 50, 60, 60], [0, 0, 5, 5.0]]),
                        scores=np.array([0.9, 0.8, 0.1]), class_ids=np.array([1, 2, 3]))
    b = SimpleNamespace(boxes=np.array([[0, 0, 10, 10.5], [50, 50, 60, 60.0]]),
                        scores=np.array([0.9, 0.8]), class_ids=np.array([1, 5]))
    missing = unmatched(a, b, 0.5, 0.9, 'run b: ')
    assert missing == ['run b: class 2 score 0.80 box [50.0, 50.0, 60.0, 60.0] '
                       '(best IoU 0.00)']
    assert unmatched(b, b, 0.5, 0.9) == []
