"""The agreement measures of vision_nodes.accuracy on cases whose answers are known."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip('pycocotools', reason='pycocotools is not installed (requirements/)')

from vision_nodes.accuracy import (COCO_SIGMAS, agreement, classification_agreement,  # noqa: E402,E501
                                   depth_agreement, detection_agreement, mask_agreement,
                                   obb_agreement, pose_agreement)
from vision_nodes.tasks.classify import Classification  # noqa: E402
from vision_nodes.tasks.detect import Detections  # noqa: E402
from vision_nodes.tasks.instances import PoseResult, SegmentResult  # noqa: E402
from vision_nodes.tasks.obb import OrientedBoxes  # noqa: E402
from vision_nodes.tasks.rotated import hull  # noqa: E402

#: COCO's IoU thresholds 0.50:0.05:0.95.
THRESHOLDS = np.linspace(0.5, 0.95, 10)


def _dets(boxes, scores, classes) -> Detections:
    return Detections(np.array(boxes, np.float32).reshape(-1, 4),
                      np.array(scores, np.float32), np.array(classes, np.int64))


def _ap_at(overlap: float) -> float:
    """One reference, one candidate at ``overlap``: AP is the share of thresholds it passes."""
    return float(np.mean(overlap >= THRESHOLDS - 1e-12))


def test_identical_detections_agree_fully():
    ref = [_dets([[10, 10, 110, 210], [300, 40, 380, 90]], [0.9, 0.3], [0, 2]),
           _dets([[5, 5, 50, 50]], [0.7], [1])]
    result = detection_agreement(ref, ref)
    assert result.value == pytest.approx(1.0)
    assert result.details['recall50'] == 1.0
    assert result.line('bf16') == 'precision bf16: 1.000 box mAP50-95 of fp32 on 2 images'
    assert result.drop() == pytest.approx(0.0)


def test_a_shifted_box_scores_the_thresholds_its_iou_passes():
    # 100x100 boxes 16 px apart: IoU 84 / 116 = 0.724, above 0.50..0.70 (5 of 10).
    ref = [_dets([[0, 0, 100, 100]], [0.9], [0])]
    shifted = [_dets([[16, 0, 116, 100]], [0.9], [0])]
    value = detection_agreement(ref, shifted).value
    assert value == pytest.approx(_ap_at(84 / 116)) == pytest.approx(0.5)


def test_a_missed_class_halves_the_mean_and_recall_counts_confident_ones():
    ref = [_dets([[0, 0, 100, 100], [200, 200, 260, 300]], [0.9, 0.3], [0, 1])]
    only_first = [_dets([[0, 0, 100, 100]], [0.8], [0])]
    result = detection_agreement(ref, only_first)
    assert result.value == pytest.approx(0.5)  # class 0 perfect, class 1 missed
    assert result.details['recall50'] == 1.0   # the 0.3 one is not required
    only_second = [_dets([[200, 200, 260, 300]], [0.8], [1])]
    assert detection_agreement(ref, only_second).details['recall50'] == 0.0
    wrong_class = [_dets([[0, 0, 100, 100]], [0.9], [5])]
    assert detection_agreement(ref, wrong_class).details['recall50'] == 0.0


def test_nothing_against_nothing_agrees_and_invented_objects_do_not():
    empty = [_dets([], [], [])]
    assert detection_agreement(empty, empty).value == 1.0
    assert detection_agreement(empty, [_dets([[0, 0, 9, 9]], [0.9], [0])]).value == 0.0
    assert detection_agreement([_dets([[0, 0, 9, 9]], [0.9], [0])], empty).value == 0.0


def _segment(masks, classes, scores) -> SegmentResult:
    masks = np.array(masks, bool)
    boxes = []
    for mask in masks:
        rows, cols = np.nonzero(mask)
        boxes.append([cols.min(), rows.min(), cols.max() + 1, rows.max() + 1])
    return SegmentResult(np.array(boxes, np.float32).reshape(-1, 4),
                         np.array(scores, np.float32), np.array(classes, np.int64), masks)


def test_masks_identical_then_with_a_known_overlap():
    square = np.zeros((120, 160), bool)
    square[20:80, 30:90] = True   # 60 x 60
    ref = [_segment([square], [3], [0.9])]
    assert mask_agreement(ref, ref).value == pytest.approx(1.0)
    narrower = np.zeros_like(square)
    narrower[20:80, 30:72] = True  # 42 of 60 columns: IoU 0.70
    value = mask_agreement(ref, [_segment([narrower], [3], [0.9])]).value
    assert value == pytest.approx(_ap_at(42 / 60)) == pytest.approx(0.5)


def _pose(points, box, score=0.9) -> PoseResult:
    return PoseResult(np.array([box], np.float32), np.array([score], np.float32),
                      np.zeros(1, np.int64), np.array([points], np.float32))


def test_poses_identical_then_shifted_by_a_known_oks():
    rng = np.random.default_rng(3)
    box = [100, 100, 300, 500]          # area 80000, pycocotools' scale for the reference
    points = np.column_stack([rng.uniform(110, 290, 17), rng.uniform(110, 490, 17),
                              np.ones(17)])
    ref = [_pose(points, box)]
    assert pose_agreement(ref, ref).value == pytest.approx(1.0)
    moved = points.copy()
    moved[:, 0] += 14.0
    # OKS as COCO defines it: mean of exp(-d^2 / (2 * area * (2 sigma)^2)).
    oks = np.mean(np.exp(-196.0 / (2 * 80000 * (2 * COCO_SIGMAS) ** 2)))
    assert 0.55 < oks < 0.95 and np.min(np.abs(oks - THRESHOLDS)) > 0.01
    assert pose_agreement(ref, [_pose(moved, box)]).value == pytest.approx(_ap_at(oks))


def test_unseen_reference_keypoints_are_not_judged():
    points = np.column_stack([np.linspace(110, 290, 17), np.linspace(110, 490, 17),
                              np.r_[np.ones(8), np.zeros(9)]])
    moved = points.copy()
    moved[8:, :2] += 500.0  # only keypoints the reference did not see move
    box = [100, 100, 300, 500]
    assert pose_agreement([_pose(points, box)], [_pose(moved, box)]).value == pytest.approx(1.0)


def test_depth_absrel_and_delta_on_known_scalings():
    ref = np.linspace(0.5, 10.0, 400, dtype=np.float32).reshape(20, 20)
    same = depth_agreement([ref], [ref])
    assert (same.value, same.details['absrel']) == (1.0, 0.0)
    farther = depth_agreement([ref], [ref * 1.1])
    assert farther.value == 1.0 and farther.details['absrel'] == pytest.approx(0.1, rel=1e-5)
    half = ref.copy()
    half[:10] *= 1.3            # beyond 1.25 on half the pixels
    result = depth_agreement([ref], [half])
    assert result.value == pytest.approx(0.5)
    assert result.details['absrel'] == pytest.approx(0.15, rel=1e-5)
    holes = ref.copy()
    holes[0] = 0.0             # pixels fp32 has no depth for are not judged
    assert depth_agreement([holes], [holes * 1.1]).details['pixels'] == 380


def test_agreement_dispatches_by_task_and_names_unknown_ones():
    ref = [_dets([[0, 0, 10, 10]], [0.9], [0])]
    assert agreement('detect', ref, ref).measure == 'box mAP50-95'
    with pytest.raises(ValueError, match="no agreement measure for task 'caption'"):
        agreement('caption', ref, ref)
    with pytest.raises(ValueError, match='one of each per image'):
        detection_agreement(ref, ref + ref)


def _obb(xywhr, scores, classes) -> OrientedBoxes:
    boxes = np.array(xywhr, np.float32).reshape(-1, 5)
    return OrientedBoxes(hull(boxes), np.array(scores, np.float32), np.array(classes, np.int64),
                         boxes)


def test_rotated_boxes_are_judged_by_their_rotated_overlap():
    ref = [_obb([[100, 100, 80, 40, 0.5], [300, 200, 50, 120, 1.0]], [0.9, 0.4], [0, 2])]
    same = obb_agreement(ref, ref)
    assert same.value == pytest.approx(1.0) and same.details['recall50'] == 1.0
    assert same.line('int8') == 'precision int8: 1.000 rotated-box mAP50-95 of fp32 on 1 images'
    # The same region written with w and h swapped and the angle turned by 90 degrees.
    swapped = [_obb([[100, 100, 40, 80, 0.5 + np.pi / 2], [300, 200, 120, 50, 1.0 - np.pi / 2]],
                    [0.9, 0.4], [0, 2])]
    assert obb_agreement(ref, swapped).value == pytest.approx(1.0)
    # Turned by 90 degrees about its centre: rotated IoU 1600 / 4800, below every threshold,
    # though the boxes' axis-aligned hulls would overlap much more.
    turned = [_obb([[100, 100, 80, 40, 0.5 + np.pi / 2], [300, 200, 50, 120, 1.0]],
                   [0.9, 0.4], [0, 2])]
    result = obb_agreement(ref, turned)
    assert result.value == pytest.approx(0.5) and result.details['recall50'] == 0.0
    # Shifted along its length by 16 px: IoU 64 / 96 = 0.667 passes 0.50..0.65 (4 of 10).
    along = [_obb([[100 + 16 * np.cos(0.5), 100 + 16 * np.sin(0.5), 80, 40, 0.5],
                   [300, 200, 50, 120, 1.0]], [0.9, 0.4], [0, 2])]
    assert obb_agreement(ref, along).value == pytest.approx((0.4 + 1.0) / 2)
    assert agreement('obb', ref, ref).measure == 'rotated-box mAP50-95'


def _probs(values) -> Classification:
    probs = np.array(values, np.float32)
    top = np.argsort(-probs, kind='stable')[:5]
    return Classification(probs, top, probs[top])


def test_classification_top1_agreement_and_probability_errors():
    ref = [_probs([0.6, 0.3, 0.1, 0, 0, 0]), _probs([0.1, 0.2, 0.7, 0, 0, 0])]
    same = classification_agreement(ref, ref)
    assert same.value == 1.0 and same.details['probability_mae'] == 0.0
    assert same.details['top5_agreement'] == 1.0 and same.measure == 'top-1 agreement'
    moved = [_probs([0.5, 0.4, 0.1, 0, 0, 0]), _probs([0.1, 0.5, 0.4, 0, 0, 0])]
    result = classification_agreement(ref, moved)
    assert result.value == 0.5  # the second image's top-1 changed
    assert result.details['probability_mae'] == pytest.approx((0.2 / 6 + 0.6 / 6) / 2)
    assert result.details['top5_probability_mae'] == pytest.approx((0.2 / 5 + 0.6 / 5) / 2)
    assert result.details['top5_agreement'] == 0.5
    assert agreement('classify', ref, moved).drop() == pytest.approx(0.5)
    with pytest.raises(ValueError, match='one of each per image'):
        classification_agreement(ref, ref[:1])
