"""PyTorch on a GPU: a frame's way onto the device and the detections' way back.

:class:`DeviceInput` takes the task's letterboxed u8 image (``tasks.preprocess.prepare_u8``),
copies it once into a pinned staging buffer kept for the next frame of the same shape, and
converts it on the device with the host's numerics (u8 -> float32, ``x * scale``, then
``- mean`` and ``/ std`` when they are not 0 and 1, NHWC ``U8_INPUT_ORDER`` -> NCHW in the
model's channel order): the host never makes a float copy of the frame.

:class:`DeviceOutput` keeps a network output on the device. ``np.asarray`` copies it back;
a detection output is decoded where it is (``decode_ops``: each step of the task's
``tasks.detect.decode_yolo`` in torch, NMS with torchvision's kernel) and only the kept boxes
are copied back. A segmentation model's masks are made there too (the kept
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


class _DecodeOps:
    """Each step of the YOLOv8-style decode (``tasks.detect.decode_yolo``) in torch.

    The host's steps (``tasks.decode_buffers``) in its float32 arithmetic, greedy NMS with
    torchvision's kernel; only the kept boxes come back, every frame's in one copy.
    """

    @staticmethod
    def frames(output: 'DeviceOutput') -> Any:
        """Return the ``(B, rows, anchors)`` output (of ``(rows, anchors)``: B = 1) in float32."""
        pred = output.tensor.float()
        return pred[None] if pred.dim() == 2 else pred

    @staticmethod
    def candidates(preds: Any, classes: int, confidence: float) -> list[tuple[Any, Any, Any]]:
        """Each frame's (anchors, scores, class ids) whose best class beats ``confidence``.

        One pass over the batch (one synchronisation for every frame's count).
        """
        torch = _torch()
        scores, class_ids = preds[:, 4:4 + classes].max(dim=1)
        frame, anchor = torch.nonzero(scores > confidence, as_tuple=True)
        counts = torch.bincount(frame, minlength=len(preds)).tolist()
        parts = (t.split(counts) for t in (anchor, scores[frame, anchor],
                                           class_ids[frame, anchor]))
        return list(zip(*parts))

    @staticmethod
    def corners(pred: Any, anchors: Any) -> Any:
        """Return the candidates' boxes, centre and size, as x1, y1, x2, y2: (N, 4)."""
        xywh = pred[:4, anchors].T
        half = xywh[:, 2:4] / 2
        return _torch().cat([xywh[:, 0:2] - half, xywh[:, 0:2] + half], dim=1)

    @staticmethod
    def top(scores: Any, count: int) -> Any:
        """Return the indices of the ``count`` highest scores."""
        return scores.topk(count).indices

    @staticmethod
    def shifted(boxes: Any, class_ids: Any, offset: float) -> Any:
        """Return the boxes moved apart by class (class id x ``offset``) for batched NMS."""
        return boxes + class_ids[:, None].to(boxes.dtype) * offset

    @staticmethod
    def nms(boxes: Any, scores: Any, iou: float, keep: int) -> Any:
        """Return the indices greedy NMS (torchvision's) keeps, highest first, at most ``keep``."""
        import torchvision

        return torchvision.ops.nms(boxes, scores, iou)[:keep]

    @staticmethod
    def to_host(found: list[tuple]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Each frame's kept (boxes, scores, class ids as int64) as host arrays, in one copy."""
        torch = _torch()
        rows = [torch.cat([boxes, scores[:, None], class_ids[:, None].to(boxes.dtype),
                           torch.full_like(scores[:, None], float(index))], dim=1)
                for index, (boxes, scores, class_ids) in enumerate(found)]
        packed = torch.cat(rows).cpu().numpy() if rows else np.zeros((0, 7), np.float32)
        frames = (packed[packed[:, 6] == index] for index in range(len(found)))
        return [(np.ascontiguousarray(part[:, :4]), np.ascontiguousarray(part[:, 4]),
                 part[:, 5].astype(np.int64)) for part in frames]

    @staticmethod
    def extras(pred: Any, classes: int, anchors: Any) -> 'DeviceOutput':
        """Return the rows after the class scores at ``anchors`` (N, extra), on the device."""
        return DeviceOutput(pred[4 + classes:, anchors].T)


class DeviceOutput:
    """A network output that stays on the device until asked for."""

    #: The steps of ``tasks.detect.decode_yolo`` on the output's device.
    decode_ops = _DecodeOps

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
