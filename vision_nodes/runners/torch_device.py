"""PyTorch on a GPU: a frame's way onto the device and the detections' way back.

:class:`DeviceInput` takes the task's letterboxed u8 image (``tasks.preprocess.prepare_u8``),
copies it once into a pinned staging buffer kept for the next frame of the same shape, and
converts it on the device with the host's numerics (u8 -> float32, ``x * scale``, then
``- mean`` and ``/ std`` when they are not 0 and 1, NHWC ``U8_INPUT_ORDER`` -> NCHW in the
model's channel order): the host never makes a float copy of the frame.

:class:`DeviceOutput` keeps a network output on the device. ``np.asarray`` copies it back;
a detection output is decoded where it is (confidence filter, top-k, class-separated greedy
NMS with torchvision's kernel, as ``tasks.detect.decode`` does on the host) and only the kept
boxes are copied back. A segmentation model's masks are made there too (the kept
detections' coefficients times the prototypes, upsampled, cropped to the box, the letterbox
undone, as ``tasks.segment.instance_masks`` does on the host) and come back as masks.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..images import U8_INPUT_ORDER
from ..manifest import Preprocessing


#: Float pixels (network or source resolution) one chunk of masks may take on the device:
#: 16 masks of a 1080p frame, 4 of a 4K one (128 MB of float32 at a time).
MASK_CHUNK_PIXELS = 32 * 1024 * 1024


def _torch():
    import torch

    return torch


class DeviceInput:
    """Host arrays -> the network's input tensor on ``device`` at ``dtype``."""

    def __init__(self, device: Any, dtype: Any, prep: Preprocessing) -> None:
        torch = _torch()
        self.device, self.dtype = device, dtype
        self._flip = prep.color_order != U8_INPUT_ORDER
        self._scale = float(np.float32(prep.scale))
        self._plain = tuple(prep.mean) == (0.0, 0.0, 0.0) and tuple(prep.std) == (1.0, 1.0, 1.0)
        self._mean = torch.tensor(prep.mean, dtype=torch.float32, device=device).view(1, 3, 1, 1)
        self._std = torch.tensor(prep.std, dtype=torch.float32, device=device).view(1, 3, 1, 1)
        #: Pinned staging buffer of the last input's shape and dtype (GPU devices only).
        self._staging: Any = None

    def host_buffer(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """Return a host array that :meth:`stage` takes without copying it.

        On a GPU that is the pinned staging buffer (the caller fills it in place), elsewhere a
        fresh array.
        """
        if self.device.type == 'cpu':
            return np.empty(shape, dtype)
        return self._staging_for(tuple(shape), np.dtype(dtype)).numpy()

    def stage(self, array: np.ndarray) -> Any:
        """Return ``array`` as a host tensor: a pinned copy on a GPU, else a view if it can."""
        torch = _torch()
        if self.device.type == 'cpu':
            if not array.flags.writeable:
                array = array.copy()
            return torch.from_numpy(np.ascontiguousarray(array))
        staging = self._staging_for(array.shape, array.dtype)
        if array.ctypes.data != staging.data_ptr():  # not already filled in place
            staging.numpy()[...] = array
        return staging

    def _staging_for(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        """Return the pinned staging buffer, made anew when ``shape`` or ``dtype`` changed."""
        torch = _torch()
        staging = self._staging
        if staging is None or tuple(staging.shape) != shape \
                or staging.numpy().dtype != dtype:
            staging = self._staging = torch.empty(
                shape, dtype=torch.from_numpy(np.empty(0, dtype)).dtype, pin_memory=True)
        return staging

    def convert(self, x: Any) -> Any:
        """Device tensor from :meth:`stage` -> contiguous NCHW network input at ``dtype``.

        A u8 (1, H, W, 3) image is converted with the host's float32 operations; anything
        else is taken to be the float (1, 3, H, W) tensor and only cast.
        """
        torch = _torch()
        if x.dtype != torch.uint8:
            return x.to(self.dtype)
        x = x.permute(0, 3, 1, 2)
        if self._flip:
            x = x.flip(1)
        x = x.to(torch.float32) * self._scale
        if not self._plain:
            x = (x - self._mean) / self._std
        return x.to(self.dtype).contiguous()

    @staticmethod
    def network_shape(array: Any) -> tuple[int, int]:
        """(height, width) of the network input that ``array`` (u8 NHWC or float NCHW) gives."""
        shape = tuple(array.shape)
        return (int(shape[1]), int(shape[2])) if str(array.dtype).endswith('uint8') \
            else (int(shape[2]), int(shape[3]))


class DeviceOutput:
    """A network output that stays on the device until asked for."""

    def __init__(self, tensor: Any) -> None:
        self.tensor = tensor

    @property
    def shape(self) -> tuple[int, ...]:
        """The output's shape."""
        return tuple(self.tensor.shape)

    @property
    def ndim(self) -> int:
        """The output's number of dimensions."""
        return self.tensor.dim()

    def __getitem__(self, key: Any) -> 'DeviceOutput':
        return DeviceOutput(self.tensor[key])

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        array = self.tensor.float().cpu().numpy()
        return array if dtype is None else array.astype(dtype)

    def decode_detections(self, confidence: float, iou: float, max_detections: int,
                          max_candidates: int, class_offset: float
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """YOLOv8-style ``(1, 4 + nc, A)`` -> kept (boxes xyxy, scores, class ids), host arrays.

        The host decode's steps in its float32 arithmetic: best class per anchor, scores above
        ``confidence``, at most ``max_candidates`` best, boxes offset by class times
        ``class_offset`` for one greedy NMS over all classes, cut to ``max_detections``.
        """
        return self.decode_detections_batch(confidence, iou, max_detections, max_candidates,
                                            class_offset)[0]

    def decode_detections_batch(self, confidence: float, iou: float, max_detections: int,
                                max_candidates: int, class_offset: float
                                ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """:meth:`decode_detections` of every frame of a ``(B, 4 + nc, A)`` output at once.

        One pass finds every frame's candidates (in the order a frame alone gives them), each
        frame then has its own top-k and NMS with the same arithmetic, and the kept boxes of
        all frames come back in one copy.
        """
        torch = _torch()
        pred = self.tensor.float()
        if pred.dim() == 2:
            pred = pred[None]
        frames = int(pred.shape[0])
        scores, class_ids = pred[:, 4:].max(dim=1)
        frame, anchor = torch.nonzero(scores > confidence, as_tuple=True)
        counts = torch.bincount(frame, minlength=frames).tolist()
        scores, class_ids = scores[frame, anchor], class_ids[frame, anchor]
        boxes = _xyxy(torch, pred[frame, :4, anchor])
        kept, start = [], 0
        for index, count in enumerate(counts):
            part = slice(start, start + count)
            start += count
            if count:
                rows = _select(torch, boxes[part], scores[part], class_ids[part], iou,
                               max_detections, max_candidates, class_offset)
                kept.append(_rows(torch, boxes[part][rows], scores[part][rows],
                                  class_ids[part][rows], float(index)))
        packed = torch.cat(kept).cpu().numpy() if kept else np.zeros((0, 7), np.float32)
        found = []
        for index in range(frames):
            rows = packed[packed[:, 6] == index]
            found.append((np.ascontiguousarray(rows[:, :4]), np.ascontiguousarray(rows[:, 4]),
                          rows[:, 5].astype(np.int64)))
        return found

    def decode_instances(self, classes: int, confidence: float, iou: float,
                         max_detections: int, max_candidates: int, class_offset: float
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray, 'DeviceOutput']:
        """One frame's ``(1, 4 + classes + extra, A)`` output -> kept detections and extras.

        The detections (boxes xyxy, scores, class ids: host arrays) as
        :meth:`decode_detections` keeps them from the ``classes`` score rows; the rows after
        those (mask coefficients, keypoints) of each kept detection, (N, extra), stay on the
        device.
        """
        torch = _torch()
        pred = self.tensor.float()
        pred = pred[0] if pred.dim() == 3 else pred
        scores, class_ids = pred[4:4 + classes].max(dim=0)
        anchors = torch.nonzero(scores > confidence).squeeze(1)
        boxes = _xyxy(torch, pred[:4, anchors].T)
        scores, class_ids = scores[anchors], class_ids[anchors]
        rows = _select(torch, boxes, scores, class_ids, iou, max_detections, max_candidates,
                       class_offset)
        packed = _rows(torch, boxes[rows], scores[rows], class_ids[rows], 0.0).cpu().numpy()
        return (np.ascontiguousarray(packed[:, :4]), np.ascontiguousarray(packed[:, 4]),
                packed[:, 5].astype(np.int64),
                DeviceOutput(pred[4 + classes:, anchors[rows]].T))

    def instance_masks(self, coefficients: 'DeviceOutput', boxes: np.ndarray,
                       network_shape: tuple[int, int], content: tuple[int, int, int, int],
                       source_shape: tuple[int, int], chunk: int | None = None
                       ) -> tuple[np.ndarray, np.ndarray]:
        """Prototypes ``(1, nm, mh, mw)`` -> (masks (M, H, W) bool in source pixels, kept).

        ``coefficients`` (N, nm) and the xyxy ``boxes`` (network pixels) are the kept
        detections'; ``content`` is the image's (left, top, width, height) inside the network
        input, ``source_shape`` its (H, W). The host's steps (``tasks.segment``): logits
        upsampled bilinearly (half-pixel centres, edges replicated) to the network input,
        above 0 inside the box (x1 <= column < x2, y1 <= row < y2), the image's part resized
        bilinearly to the source and above one half. A detection whose mask is empty at network
        resolution is left out (``kept``: the indices of the others). ``chunk`` masks at a
        time (default: as many as keep a chunk's float planes within ``MASK_CHUNK_PIXELS``,
        at most 16) bound the device memory; the masks come back in one copy.
        """
        torch = _torch()
        functional = torch.nn.functional
        protos = self.tensor.float()
        protos = protos[0] if protos.dim() == 4 else protos
        nm, mh, mw = (int(v) for v in protos.shape)
        height, width = network_shape
        left, top, inner_w, inner_h = content
        device = protos.device
        count = len(boxes)
        masks = torch.zeros((count,) + tuple(source_shape), dtype=torch.bool, device=device)
        kept = torch.zeros(count, dtype=torch.bool, device=device)
        columns = torch.arange(width, device=device, dtype=torch.float32)
        rows = torch.arange(height, device=device, dtype=torch.float32)[:, None]
        corners = torch.as_tensor(np.asarray(boxes, np.float32), device=device)
        planes = protos.reshape(nm, mh * mw)
        if chunk is None:
            largest = max(height * width, int(source_shape[0]) * int(source_shape[1]), 1)
            chunk = max(1, min(16, MASK_CHUNK_PIXELS // largest))
        for start in range(0, count, chunk):
            part = slice(start, min(start + chunk, count))
            logits = (coefficients.tensor[part].float() @ planes).reshape(-1, 1, mh, mw)
            up = functional.interpolate(logits, size=(height, width), mode='bilinear',
                                        align_corners=False)[:, 0]
            box = corners[part, :, None, None]
            inside = ((columns >= box[:, 0]) & (columns < box[:, 2]) &
                      (rows >= box[:, 1]) & (rows < box[:, 3]))
            network = (up > 0) & inside
            kept[part] = network.flatten(1).any(dim=1)
            image = network[:, top:top + inner_h, left:left + inner_w].float()[:, None]
            masks[part] = functional.interpolate(image, size=tuple(source_shape),
                                                 mode='bilinear', align_corners=False)[:, 0] > 0.5
        index = np.flatnonzero(kept.cpu().numpy())
        if len(index) < count:  # some are empty: only the others come back
            masks = masks[torch.as_tensor(index, device=device)]
        return masks.cpu().numpy(), index


def _xyxy(torch: Any, xywh: Any) -> Any:
    """(N, 4) centre/size boxes -> corners, as the host's ``xywh_to_xyxy``."""
    half = xywh[:, 2:4] / 2
    return torch.cat([xywh[:, 0:2] - half, xywh[:, 0:2] + half], dim=1)


def _select(torch: Any, boxes: Any, scores: Any, class_ids: Any, iou: float,
            max_detections: int, max_candidates: int, class_offset: float) -> Any:
    """Return the indices of the candidates one frame keeps: top-k, then class NMS."""
    import torchvision

    top = None
    if scores.shape[0] > max_candidates:
        top = scores.topk(max_candidates).indices
        boxes, scores, class_ids = boxes[top], scores[top], class_ids[top]
    offset = class_ids[:, None].to(torch.float32) * class_offset
    kept = torchvision.ops.nms(boxes + offset, scores, iou)[:max_detections]
    return kept if top is None else top[kept]


def _rows(torch: Any, boxes: Any, scores: Any, class_ids: Any, index: float) -> Any:
    """Return detections as rows (x1, y1, x2, y2, score, class, frame index), on the device."""
    return torch.cat([boxes, scores[:, None], class_ids[:, None].to(torch.float32),
                      torch.full_like(scores[:, None], index)], dim=1)
