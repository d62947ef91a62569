"""Test helper: Ultralytics' own ``predict`` as the reference, and matching results to it.

Used by the segment/pose and the NMS-free (YOLO26) parity tests: same classes, boxes IoU >=
0.9, masks compared in source pixels.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vision_nodes.boxes import pairwise_iou


def predict(weights, image: np.ndarray, **overrides: Any):
    """Ultralytics' predict on the CPU (imgsz 640, conf 0.25, iou 0.45 unless overridden)."""
    import torch

    from vision_nodes.loaders.ultralytics import import_ultralytics

    threads = torch.get_num_threads()
    args = dict(imgsz=640, conf=0.25, iou=0.45, verbose=False, device='cpu')
    args.update(overrides)
    try:
        yolo = import_ultralytics().YOLO(str(weights))
        return yolo.predict(image, **args)[0]
    finally:
        torch.set_num_threads(threads)  # Ultralytics' CPU predict changes it process-wide


def source_masks(result) -> np.ndarray:
    """Ultralytics' masks (network resolution) in source pixels, as its plots map them."""
    from ultralytics.utils import ops

    if result.masks is None:
        return np.zeros((0,) + result.orig_shape, bool)
    return ops.scale_masks(result.masks.data[None].float(), result.orig_shape)[0].numpy() > 0.5


def whole_masks(masks, windows: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """(N, H, W) bool whole-image masks of masks held at their windows' size."""
    out = np.zeros((len(masks),) + tuple(shape), bool)
    for whole, mask, (top, bottom, left, right) in zip(out, masks, np.asarray(windows).tolist()):
        whole[top:bottom, left:right] = mask
    return out


def result_masks(result) -> np.ndarray:
    """(N, H, W) bool: a ``SegmentResult``'s masks over the whole image."""
    return whole_masks(result.masks, result.windows, result.shape)


def match_reference(ours, ref) -> list[int]:
    """For each reference detection, the index of ours with the same class and IoU >= 0.9."""
    boxes, classes = ref.boxes.xyxy.numpy(), ref.boxes.cls.numpy().astype(int)
    assert len(ours) == len(boxes), (ours.scores, ref.boxes.conf)
    found = []
    for box, cls in zip(boxes, classes):
        overlap = np.where(ours.class_ids == cls, pairwise_iou(box[None], ours.boxes)[0], 0.0)
        assert overlap.max() >= 0.9, (box, cls, ours.boxes)
        found.append(int(overlap.argmax()))
    assert sorted(found) == list(range(len(ours)))
    return found


def mask_iou(a: np.ndarray, b: np.ndarray) -> float:
    """Return the IoU of two boolean masks (1 when both are empty)."""
    union = np.logical_or(a, b).sum()
    return float(np.logical_and(a, b).sum() / union) if union else 1.0
