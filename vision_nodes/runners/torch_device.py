"""PyTorch on a GPU: a frame's way onto the device and the detections' way back.

:class:`DeviceInput` takes the task's letterboxed u8 image (``tasks.preprocess.prepare_u8``),
copies it once into a pinned staging buffer kept for the next frame of the same shape, and
converts it on the device with the host's numerics (u8 -> float32, ``x * scale``, then
``- mean`` and ``/ std`` when they are not 0 and 1, NHWC ``U8_INPUT_ORDER`` -> NCHW in the
model's channel order): the host never makes a float copy of the frame.

:class:`DeviceOutput` keeps a network output on the device. ``np.asarray`` copies it back;
a detection output is decoded where it is (confidence filter, top-k, class-separated greedy
NMS with torchvision's kernel, as ``tasks.detect.decode`` does on the host) and only the kept
boxes are copied back.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..images import U8_INPUT_ORDER
from ..manifest import Preprocessing


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
        xywh = pred[frame, :4, anchor]
        half = xywh[:, 2:4] / 2
        boxes = torch.cat([xywh[:, 0:2] - half, xywh[:, 0:2] + half], dim=1)
        kept, start = [], 0
        for index, count in enumerate(counts):
            part = slice(start, start + count)
            start += count
            if count:
                kept.append(_frame_nms(torch, index, boxes[part], scores[part],
                                       class_ids[part], iou, max_detections, max_candidates,
                                       class_offset))
        packed = torch.cat(kept).cpu().numpy() if kept else np.zeros((0, 7), np.float32)
        found = []
        for index in range(frames):
            rows = packed[packed[:, 6] == index]
            found.append((np.ascontiguousarray(rows[:, :4]), np.ascontiguousarray(rows[:, 4]),
                          rows[:, 5].astype(np.int64)))
        return found


def _frame_nms(torch: Any, index: int, boxes: Any, scores: Any, class_ids: Any, iou: float,
               max_detections: int, max_candidates: int, class_offset: float) -> Any:
    """One frame's kept rows (x1, y1, x2, y2, score, class, frame index), on the device."""
    import torchvision

    if scores.shape[0] > max_candidates:
        top = scores.topk(max_candidates).indices
        boxes, scores, class_ids = boxes[top], scores[top], class_ids[top]
    offset = class_ids[:, None].to(torch.float32) * class_offset
    kept = torchvision.ops.nms(boxes + offset, scores, iou)[:max_detections]
    return torch.cat([boxes[kept], scores[kept, None], class_ids[kept, None].to(torch.float32),
                      torch.full_like(scores[kept, None], float(index))], dim=1)
