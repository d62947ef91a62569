"""How far a reduced precision's answers are from fp32's on the same images, per task. ROS-free.

The same model at fp32 is the ground truth: its detections (every one the thresholds kept) are
the reference boxes, masks or poses, and the reduced precision's detections, with their scores,
are ranked against them as COCO ranks a detector against labels (pycocotools' ``COCOeval``):

- detection: box mAP50-95, and the recall of fp32's detections scoring at least 0.5 (a
  same-class detection at IoU >= 0.5, each used once);
- segmentation: mask mAP50-95 (the masks in source pixels);
- pose: OKS AP50-95 (COCO's per-keypoint sigmas for 17 keypoints, their mean for another count;
  a reference keypoint counts where its score is at least 0.5; each reference pose's scale is
  its box's area);
- oriented boxes: rotated-box mAP50-95 (COCO's evaluation with the IoU of the rotated boxes'
  areas, :func:`.tasks.rotated.rotated_iou`, in place of the axis-aligned one), and the recall
  of fp32's boxes scoring at least 0.5 at rotated IoU >= 0.5;
- classification: top-1 agreement (the share of images whose most probable class is fp32's),
  with the probabilities' mean absolute error, over all classes and over fp32's top 5;
- depth: AbsRel (mean |d - d32| / d32) and δ<1.25 (the share of pixels within 1.25x of fp32),
  over the pixels where fp32's depth is positive and finite.

mAP is COCO's: the mean over the classes the reference has of the precision averaged over
recall and IoU thresholds 0.50:0.05:0.95; a class only the candidate has is not counted (the
recall measure and the detection count say when a precision invents objects). Identical
answers give 1.0 (AbsRel 0.0); images without any reference detection give 1.0 when the
candidate has none either, else 0.0.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from .boxes import pairwise_iou
from .tasks.rotated import rotated_iou

#: COCO's keypoint sigmas (nose ... right ankle), as pycocotools' ``Params`` holds them.
COCO_SIGMAS = np.array([.26, .25, .25, .35, .35, .79, .79, .72, .72, .62, .62, 1.07, 1.07,
                        .87, .87, .89, .89]) / 10.0
#: A reference keypoint with at least this score is labelled (visible); others are ignored.
KEYPOINT_VISIBLE = 0.5
#: fp32 detections at least this confident must be found again (``recall``).
RECALL_SCORE = 0.5
#: Enough detections per image that COCO's cut (100 by default) never drops one.
_MAX_DETS = 10_000


@dataclass(frozen=True)
class Agreement:
    """One reduced precision against fp32 on a set of images: the headline value and more."""

    task: str
    #: What ``value`` measures, as the log says it ('box mAP50-95', 'depth δ<1.25', ...).
    measure: str
    value: float
    images: int
    #: Other measures of the same comparison (recall, AbsRel, detection counts, ...).
    details: dict[str, float] = field(default_factory=dict)

    def line(self, precision: str) -> str:
        """Return the line the node logs ('precision bf16: 0.987 box mAP50-95 of fp32 on ...')."""
        return (f'precision {precision}: {self.value:.3f} {self.measure} of fp32 on '
                f'{self.images} images')

    def drop(self) -> float:
        """How much this precision loses against fp32 (0 = none): 1 - value, never below 0."""
        return max(0.0, 1.0 - self.value)


def detection_agreement(reference: Sequence[Any], candidate: Sequence[Any]) -> Agreement:
    """Box mAP50-95 of ``candidate`` with ``reference`` (fp32) as ground truth, and recall.

    Each sequence holds one result per image (``boxes`` xyxy, ``scores``, ``class_ids``).
    """
    value = _coco_ap(reference, candidate, 'bbox', _box_fields)
    details = {'recall50': _recall(reference, candidate, RECALL_SCORE),
               'reference_detections': float(sum(len(r.scores) for r in reference)),
               'detections': float(sum(len(c.scores) for c in candidate))}
    return Agreement('detect', 'box mAP50-95', value, len(reference), details)


def mask_agreement(reference: Sequence[Any], candidate: Sequence[Any]) -> Agreement:
    """Mask mAP50-95 of ``candidate`` against ``reference`` (results with masks, per image)."""
    value = _coco_ap(reference, candidate, 'segm', _mask_fields)
    details = {'box_map50_95': _coco_ap(reference, candidate, 'bbox', _box_fields),
               'recall50': _recall(reference, candidate, RECALL_SCORE)}
    return Agreement('segment', 'mask mAP50-95', value, len(reference), details)


def pose_agreement(reference: Sequence[Any], candidate: Sequence[Any]) -> Agreement:
    """OKS AP50-95 of ``candidate`` against ``reference`` (results with ``keypoints``)."""
    count = max((r.keypoints.shape[1] for r in list(reference) + list(candidate)
                 if len(r.scores)), default=17)
    sigmas = COCO_SIGMAS if count == 17 else np.full(count, COCO_SIGMAS.mean())
    value = _coco_ap(reference, candidate, 'keypoints', _pose_fields, sigmas=sigmas)
    details = {'box_map50_95': _coco_ap(reference, candidate, 'bbox', _box_fields),
               'recall50': _recall(reference, candidate, RECALL_SCORE)}
    return Agreement('pose', 'OKS AP50-95', value, len(reference), details)


def obb_agreement(reference: Sequence[Any], candidate: Sequence[Any]) -> Agreement:
    """Rotated-box mAP50-95 of ``candidate`` against ``reference`` (results with ``xywhr``)."""
    value = _coco_ap(reference, candidate, 'bbox', _rotated_fields, evaluator=_rotated_eval())
    details = {'recall50': _recall(reference, candidate, RECALL_SCORE, _rotated_overlaps),
               'reference_detections': float(sum(len(r.scores) for r in reference)),
               'detections': float(sum(len(c.scores) for c in candidate))}
    return Agreement('obb', 'rotated-box mAP50-95', value, len(reference), details)


def classification_agreement(reference: Sequence[Any], candidate: Sequence[Any]) -> Agreement:
    """Top-1 agreement of ``candidate`` with ``reference`` (results with ``probs``), and errors.

    Details: ``probability_mae`` (mean |p - p32| over every class and image),
    ``top5_probability_mae`` (the same over fp32's five most probable classes of each image)
    and ``top5_agreement`` (the share of images whose top 5, in order, are fp32's).
    """
    if len(reference) != len(candidate):
        raise ValueError(f'{len(reference)} reference results but {len(candidate)} candidate '
                         'ones: one of each per image')
    top1, top5, errors, top_errors = [], [], [], []
    for ref, cand in zip(reference, candidate):
        want, got = np.asarray(ref.probs, np.float64), np.asarray(cand.probs, np.float64)
        if want.shape != got.shape:
            raise ValueError(f'probabilities of shapes {want.shape} and {got.shape} differ')
        order = np.argsort(-want, kind='stable')[:5]
        top1.append(int(np.argmax(want)) == int(np.argmax(got)))
        top5.append(np.array_equal(order, np.argsort(-got, kind='stable')[:5]))
        errors.append(float(np.mean(np.abs(got - want))) if want.size else 0.0)
        top_errors.append(float(np.mean(np.abs(got[order] - want[order]))) if want.size else 0.0)
    mean = (lambda values: float(np.mean(values)) if values else 0.0)
    value = float(np.mean(top1)) if top1 else 1.0
    return Agreement('classify', 'top-1 agreement', value, len(reference),
                     {'probability_mae': mean(errors), 'top5_probability_mae': mean(top_errors),
                      'top5_agreement': float(np.mean(top5)) if top5 else 1.0})


def depth_agreement(reference: Sequence[np.ndarray], candidate: Sequence[np.ndarray]
                    ) -> Agreement:
    """δ<1.25 and AbsRel of ``candidate`` depth maps against ``reference`` (fp32) maps."""
    ratios, errors = [], []
    for ref, cand in zip(reference, candidate, strict=True):
        ref, cand = np.asarray(ref, np.float64), np.asarray(cand, np.float64)
        if ref.shape != cand.shape:
            raise ValueError(f'depth maps of shapes {ref.shape} and {cand.shape} differ')
        valid = np.isfinite(ref) & (ref > 0)
        r, c = ref[valid], np.where(np.isfinite(cand[valid]), cand[valid], np.inf)
        with np.errstate(divide='ignore', invalid='ignore'):
            ratio = np.maximum(c / r, np.where(c > 0, r / c, np.inf))
        ratios.append(ratio)
        errors.append(np.abs(c - r) / r)
    ratio, error = (np.concatenate(x) if x else np.zeros(0) for x in (ratios, errors))
    delta = float(np.mean(ratio < 1.25)) if ratio.size else 1.0
    absrel = float(np.mean(error)) if error.size else 0.0
    return Agreement('depth', 'depth δ<1.25', delta, len(reference),
                     {'absrel': absrel, 'pixels': float(ratio.size)})


#: The measure of each task (what :func:`agreement` dispatches to).
MEASURES: dict[str, Callable[[Sequence[Any], Sequence[Any]], Agreement]] = {
    'detect': detection_agreement, 'segment': mask_agreement, 'pose': pose_agreement,
    'obb': obb_agreement, 'classify': classification_agreement, 'depth': depth_agreement}


def agreement(task: str, reference: Sequence[Any], candidate: Sequence[Any]) -> Agreement:
    """Return the agreement measure of ``task`` (one of :data:`MEASURES`)."""
    if task not in MEASURES:
        raise ValueError(f"no agreement measure for task {task!r} (known: "
                         f"{', '.join(MEASURES)})")
    return MEASURES[task](reference, candidate)


# -- COCO evaluation ----------------------------------------------------------------------
def _box_fields(result: Any, i: int) -> dict[str, Any]:
    x1, y1, x2, y2 = (float(v) for v in result.boxes[i])
    return {'bbox': [x1, y1, x2 - x1, y2 - y1], 'area': max(x2 - x1, 0.0) * max(y2 - y1, 0.0)}


def _mask_fields(result: Any, i: int) -> dict[str, Any]:
    from pycocotools import mask as coco_mask

    whole = result.mask(i) if hasattr(result, 'mask') else np.asarray(result.masks[i])
    rle = coco_mask.encode(np.asfortranarray(whole.astype(np.uint8)))
    fields = _box_fields(result, i)
    fields.update(segmentation=rle, area=float(coco_mask.area(rle)))
    return fields


def _pose_fields(result: Any, i: int) -> dict[str, Any]:
    points = np.asarray(result.keypoints[i], np.float64)
    visible = np.where(points[:, 2] >= KEYPOINT_VISIBLE, 2.0, 0.0)
    fields = _box_fields(result, i)
    fields.update(keypoints=np.column_stack([points[:, :2], visible]).ravel().tolist(),
                  num_keypoints=int((visible > 0).sum()))
    return fields


def _rotated_fields(result: Any, i: int) -> dict[str, Any]:
    fields = _box_fields(result, i)
    box = [float(v) for v in result.xywhr[i]]
    fields.update(rbox=box, area=max(box[2], 0.0) * max(box[3], 0.0))
    return fields


def _rotated_eval() -> type:
    """Return COCOeval with rotated-box IoU (each annotation's ``rbox``) for ``bbox``."""
    from pycocotools.cocoeval import COCOeval

    class RotatedEval(COCOeval):
        def computeIoU(self, imgId, catId):  # noqa: N802, N803 - pycocotools' names
            """Return the (detections, references) rotated IoU, as COCOeval orders them."""
            truth, found = self._gts[imgId, catId], self._dts[imgId, catId]
            if not truth or not found:
                return []
            order = np.argsort([-d['score'] for d in found], kind='mergesort')
            found = [found[i] for i in order][:self.params.maxDets[-1]]
            return rotated_iou(np.array([d['rbox'] for d in found]),
                               np.array([g['rbox'] for g in truth]))

    return RotatedEval


def _coco_ap(reference: Sequence[Any], candidate: Sequence[Any], kind: str,
             fields: Callable[[Any, int], dict[str, Any]], sigmas: np.ndarray | None = None,
             evaluator: type | None = None) -> float:
    """Return the AP50-95 (COCO's, all areas) of ``candidate`` with ``reference`` as truth.

    ``evaluator`` replaces pycocotools' ``COCOeval`` (rotated boxes: another IoU).
    """
    if len(reference) != len(candidate):
        raise ValueError(f'{len(reference)} reference results but {len(candidate)} candidate '
                         'ones: one of each per image')
    if not any(len(r.scores) for r in reference):
        return 0.0 if any(len(c.scores) for c in candidate) else 1.0
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    labels, found = _annotations(reference, candidate, fields)
    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints its progress
        truth = COCO()
        truth.dataset = labels
        truth.createIndex()
        answers = truth.loadRes(found) if found else None
        if answers is None:
            return 0.0
        evaluation = (evaluator or COCOeval)(truth, answers, kind)
        evaluation.params.maxDets = [1, 10, _MAX_DETS]
        if sigmas is not None:
            evaluation.params.kpt_oks_sigmas = sigmas
        evaluation.evaluate()
        evaluation.accumulate()
    precision = evaluation.eval['precision'][:, :, :, 0, -1]  # IoU, recall, class; all areas
    valid = precision[precision > -1]
    return float(valid.mean()) if valid.size else 0.0


def _annotations(reference: Sequence[Any], candidate: Sequence[Any],
                 fields: Callable[[Any, int], dict[str, Any]]
                 ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Return the reference as a COCO data set and the candidate as COCO results."""
    images, labels, found = [], [], []
    classes: set[int] = set()
    for image_id, (ref, cand) in enumerate(zip(reference, candidate), start=1):
        height, width = _shape(ref, cand)
        images.append({'id': image_id, 'height': height, 'width': width})
        for i in range(len(ref.scores)):
            classes.add(int(ref.class_ids[i]))
            labels.append({'id': len(labels) + 1, 'image_id': image_id, 'iscrowd': 0,
                           'category_id': int(ref.class_ids[i]), **fields(ref, i)})
        for i in range(len(cand.scores)):
            classes.add(int(cand.class_ids[i]))
            found.append({'image_id': image_id, 'category_id': int(cand.class_ids[i]),
                          'score': float(cand.scores[i]), **fields(cand, i)})
    data = {'images': images, 'annotations': labels,
            'categories': [{'id': c, 'name': str(c)} for c in sorted(classes)]}
    return data, found


def _shape(*results: Any) -> tuple[int, int]:
    """Return the image's (height, width): a segmentation result's, else a bound on boxes."""
    for result in results:
        if getattr(result, 'shape', None) is not None:
            return int(result.shape[0]), int(result.shape[1])
    boxes = [np.asarray(r.boxes).reshape(-1, 4) for r in results]
    top = max([float(b[:, 2:].max()) for b in boxes if len(b)] + [1.0])
    side = int(np.ceil(top)) + 1
    return side, side


def _box_overlaps(ref: Any, i: int, cand: Any) -> np.ndarray:
    """Return the IoU of reference detection ``i``'s box with each candidate box."""
    return pairwise_iou(np.asarray(ref.boxes[i:i + 1], np.float64),
                        np.asarray(cand.boxes, np.float64).reshape(-1, 4))[0]


def _rotated_overlaps(ref: Any, i: int, cand: Any) -> np.ndarray:
    """Return the rotated IoU of reference detection ``i``'s box with each candidate's."""
    return rotated_iou(ref.xywhr[i:i + 1], cand.xywhr)[0]


def _recall(reference: Sequence[Any], candidate: Sequence[Any], min_score: float,
            overlaps: Callable[[Any, int, Any], np.ndarray] = _box_overlaps) -> float:
    """Share of the reference's detections scoring >= ``min_score`` found again.

    Found: a candidate detection of the same class at IoU >= 0.5 (``overlaps``: of the
    boxes), each used once (the reference's most confident first, each taking its best free
    match).
    """
    wanted = found = 0
    for ref, cand in zip(reference, candidate):
        free = np.ones(len(cand.scores), bool)
        for i in np.argsort(-np.asarray(ref.scores), kind='stable'):
            if ref.scores[i] < min_score:
                continue
            wanted += 1
            overlap = np.where(free & (np.asarray(cand.class_ids) == ref.class_ids[i]),
                               overlaps(ref, i, cand), 0.0)
            if overlap.size and overlap.max() >= 0.5:
                found += 1
                free[int(overlap.argmax())] = False
    return found / wanted if wanted else 1.0


__all__ = ['Agreement', 'MEASURES', 'agreement', 'classification_agreement', 'depth_agreement',
           'detection_agreement', 'mask_agreement', 'obb_agreement', 'pose_agreement']
