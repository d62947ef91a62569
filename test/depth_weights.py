"""Depth models with random weights, saved the way a user's weights are saved.

No depth weights can be downloaded here, so tests build the real architectures with a fixed
seed and save them as a user would get them: an Ultralytics checkpoint written by
``Model.save`` (``yolo26n-depth.yaml``), a transformers ``save_pretrained`` folder (Depth
Anything: the real V2 Small configuration, and a tiny one for plumbing tests). The last layers
are re-drawn with a wider spread so that the depth maps vary over the image (freshly
initialised heads give nearly constant maps, which would hide resampling mistakes). Each
model is built once per folder; a folder already holding it is reused.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Depth Anything V2 Small (depth-anything/Depth-Anything-V2-Small-hf's config.json): ViT-S/14
#: DINOv2 backbone, hidden 384, 6 heads, 12 layers, features from layers 3, 6, 9, 12.
SMALL_BACKBONE = dict(image_size=518, patch_size=14, hidden_size=384, num_attention_heads=6,
                      num_hidden_layers=12, out_indices=[3, 6, 9, 12],
                      reshape_hidden_states=False)
SMALL_HEAD = dict(patch_size=14, reassemble_hidden_size=384,
                  neck_hidden_sizes=[48, 96, 192, 384], fusion_hidden_size=64,
                  head_hidden_size=32)
#: A tiny model of the same architecture (plumbing tests: seconds, not minutes).
TINY_BACKBONE = dict(image_size=518, patch_size=14, hidden_size=16, num_attention_heads=1,
                     num_hidden_layers=3, intermediate_size=32, out_indices=[0, 1, 2, 3],
                     reshape_hidden_states=False)
TINY_HEAD = dict(patch_size=14, reassemble_hidden_size=16, neck_hidden_sizes=[4, 8, 16, 16],
                 fusion_hidden_size=8, head_hidden_size=4)
IMAGENET = dict(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])


def depth_anything_folder(folder: Path, *, small: bool = False, metric: bool = False,
                          max_depth: int = 20, seed: int = 0) -> Path:
    """Write a random-weights Depth Anything model with ``save_pretrained``; return the folder."""
    if (folder / 'model.safetensors').is_file():
        return folder
    import torch
    from transformers import DepthAnythingConfig, DepthAnythingForDepthEstimation, Dinov2Config

    torch.manual_seed(seed)
    backbone = Dinov2Config(**(SMALL_BACKBONE if small else TINY_BACKBONE))
    head = dict(SMALL_HEAD if small else TINY_HEAD)
    if metric:
        head.update(depth_estimation_type='metric', max_depth=max_depth)
    model = DepthAnythingForDepthEstimation(DepthAnythingConfig(backbone_config=backbone, **head))
    with torch.no_grad():
        # transformers draws every weight with std 0.02, which leaves the head's output flat
        # (and all zero after a relative model's ReLU); PyTorch's own init keeps it varied.
        for module in list(model.neck.modules()) + list(model.head.modules()):
            if isinstance(module, (torch.nn.Conv2d, torch.nn.ConvTranspose2d)):
                module.reset_parameters()
        model.head.conv3.weight.mul_(4.0)
        model.head.conv3.bias.zero_()
    model.save_pretrained(str(folder))
    return folder


def yolo_depth_pt(path: Path, seed: int = 0) -> Path:
    """Write a random-weights YOLO26n-depth checkpoint with Ultralytics' ``Model.save``."""
    if path.is_file():
        return path
    os.environ.setdefault('YOLO_OFFLINE', '1')
    import torch
    from vision_nodes.loaders.ultralytics import import_ultralytics

    torch.manual_seed(seed)
    model = import_ultralytics().YOLO('yolo26n-depth.yaml')
    head = model.model.model[-1]
    with torch.no_grad():
        head.head[-1].weight.normal_(0.0, 20.0)  # log-depth spread: ~0.1 .. 0.4 m on bus.jpg
    path.parent.mkdir(parents=True, exist_ok=True)
    model.save(str(path))
    return path


def shared_folder(tmp_path_factory) -> Path:
    """One folder per test session for these weights, whichever test module asks first."""
    folder = tmp_path_factory.getbasetemp() / 'depth_weights'
    folder.mkdir(exist_ok=True)
    return folder


def tiny_manifest(weights: Path, path: Path, name: str, kind: str = 'metric') -> str:
    """Write a manifest for a tiny Depth Anything folder (70 x 98 input); return its path."""
    import yaml

    depth = {'kind': kind, **({'max_depth': 20.0} if kind == 'metric' else {})}
    path.write_text(yaml.safe_dump({
        'name': name, 'task': 'depth', 'weights': str(weights),
        'architecture': 'transformers', 'input_size': [70, 98],
        'preprocessing': {'letterbox': False, 'interpolation': 'cubic', **IMAGENET},
        'depth': depth, 'backends': ['cpu', 'onnx', 'openvino']}))
    return str(path)
