"""YOLO26n detect, segment, pose and obb checkpoints with seeded weights (no YOLO26 weights here).

Built from Ultralytics' own ``yolo26n.yaml`` / ``-seg`` / ``-pose`` / ``-obb.yaml``
with ``torch.manual_seed(seed)`` and saved with ``Model.save``, as a user's checkpoint is. The
architecture is the real one: a one-to-many head (for NMS) and the NMS-free one-to-one head
(top-k inside the network). Three fixed departures from plain default init make the outputs
worth comparing (boxes, masks and keypoints checked for parity, never for accuracy):

- batch-norm statistics are measured on bus.jpg and zidane.jpg (one training-mode pass with a
  cumulative average): with the default statistics the features fade to ~1e-9 by the head and
  every anchor gets the same score and box;
- the one-to-one head's last class conv is scaled (``CLASS_GAIN``, bias ``CLASS_BIAS``) so
  scores spread over ~0.1 .. 0.3 on bus.jpg, and its last box conv (``BOX_GAIN``, bias 2 as
  Ultralytics initialises it) so every box has a positive size;
- the mask prototype upsampler is nearest-neighbour (as in ../shared/models' seg test model:
  a random transposed conv stamps a checkerboard on every mask).

Each file is built once per path; a path already holding it is reused.
"""

from __future__ import annotations

import os
from pathlib import Path

#: yaml per task (scale n).
YAMLS = {'detect': 'yolo26n.yaml', 'segment': 'yolo26n-seg.yaml', 'pose': 'yolo26n-pose.yaml',
         'obb': 'yolo26n-obb.yaml'}
CLASS_GAIN, CLASS_BIAS, BOX_GAIN = 0.3, -4.0, 0.2
#: The images whose statistics the batch norms get (bundled with ultralytics).
STAT_IMAGES = ('bus.jpg', 'zidane.jpg')


def _stat_batch():
    import cv2
    import numpy as np
    import torch
    import ultralytics

    assets = Path(ultralytics.__file__).parent / 'assets'
    images = [cv2.resize(cv2.imread(str(assets / name))[:, :, ::-1], (640, 640))
              for name in STAT_IMAGES]
    batch = np.stack(images).transpose(0, 3, 1, 2).astype(np.float32) / 255
    return torch.from_numpy(batch)


def _measure_batch_norms(model) -> None:
    import torch

    for layer in model.modules():
        if isinstance(layer, torch.nn.BatchNorm2d):
            layer.reset_running_stats()
            layer.momentum = None  # a cumulative average: one pass gives the batch's statistics
    model.train()
    with torch.no_grad():
        model(_stat_batch())
    model.eval()


def _spread_one_to_one_head(head) -> None:
    import torch

    with torch.no_grad():
        for classes, boxes in zip(head.one2one_cv3, head.one2one_cv2):
            classes[-1].weight.mul_(CLASS_GAIN)
            classes[-1].bias.fill_(CLASS_BIAS)
            boxes[-1].weight.mul_(BOX_GAIN)
            boxes[-1].bias.fill_(2.0)
        if hasattr(head, 'proto'):
            upsample = head.proto.upsample
            upsample.weight.zero_()
            for channel in range(upsample.weight.shape[0]):
                upsample.weight[channel, channel] = 1.0
            upsample.bias.zero_()


def yolo26_pt(path: Path, task: str = 'detect', seed: int = 0) -> Path:
    """Write a seeded YOLO26n checkpoint of ``task`` (detect, segment, pose, obb) at ``path``."""
    if path.is_file():
        return path
    os.environ.setdefault('YOLO_OFFLINE', '1')
    import torch
    from vision_nodes.loaders.ultralytics import import_ultralytics

    torch.manual_seed(seed)
    yolo = import_ultralytics().YOLO(YAMLS[task])
    _measure_batch_norms(yolo.model)
    _spread_one_to_one_head(yolo.model.model[-1])
    path.parent.mkdir(parents=True, exist_ok=True)
    yolo.save(str(path))
    return path
