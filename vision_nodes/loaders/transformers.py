"""Hugging Face ``transformers`` weights (a ``save_pretrained`` folder) → a PyTorch module.

Only Depth Anything (``DepthAnythingForDepthEstimation``, V1 and V2, relative and metric) is
served. Loading never touches the network or the Hub cache: ``local_files_only`` and a local
folder path; only ``model.safetensors`` weights are read (no pickled ``.bin``, no remote
code). The model's configuration must agree with the manifest's ``depth`` block, so a metric model
is never published as relative or the other way round.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..manifest import ModelManifest, depth_range_problem
from ..text import clip
from .common import ModelLoadError

#: ``config.json`` ``model_type`` values this loader serves → the transformers class.
MODEL_TYPES = {'depth_anything': 'DepthAnythingForDepthEstimation'}
CONFIG_FILE = 'config.json'
WEIGHTS_FILE = 'model.safetensors'


def check_pretrained_folder(folder: Path) -> dict[str, Any]:
    """Return the folder's parsed ``config.json``, or raise ModelLoadError saying what is wrong."""
    if not folder.is_dir():
        hint = (' (a transformers model is the folder save_pretrained wrote, not a file)'
                if folder.is_file() else '')
        raise ModelLoadError(
            f"weights folder '{clip(str(folder))}' not found{hint}: set the `model_dir` "
            'parameter or VISION_NODES_MODEL_DIR, or give an absolute `weights` path in the '
            'manifest')
    config_path = folder / CONFIG_FILE
    try:
        config = json.loads(config_path.read_text())
    except OSError as exc:
        raise ModelLoadError(f"'{clip(str(config_path))}' cannot be read "
                             f'({exc.strerror or exc}): the folder save_pretrained wrote has '
                             'a config.json') from exc
    except ValueError as exc:
        raise ModelLoadError(f"'{clip(str(config_path))}' is not valid JSON: "
                             f'{clip(str(exc))}') from exc
    if not isinstance(config, dict):
        raise ModelLoadError(f"'{clip(str(config_path))}' must hold a JSON object")
    model_type = config.get('model_type')
    if model_type not in MODEL_TYPES:
        raise ModelLoadError(
            f"'{clip(str(config_path))}': model_type {clip(repr(model_type))} is not served "
            f"(served: {', '.join(MODEL_TYPES)})")
    if not (folder / WEIGHTS_FILE).is_file():
        raise ModelLoadError(
            f"'{clip(str(folder))}' has no {WEIGHTS_FILE}: save the model with "
            'save_pretrained(..., safe_serialization=True) (pickled .bin weights are not read)')
    return config


def check_depth_config(manifest: ModelManifest, config: dict[str, Any], source: str) -> None:
    """Raise ModelLoadError unless the model's config agrees with the manifest's ``depth``."""
    spec = manifest.depth
    if spec is None:
        raise ModelLoadError(f"'{source}' is a depth model; manifest '{manifest.name}' has "
                             f"task '{manifest.task}' (use task: depth and a depth block)")
    kind = config.get('depth_estimation_type', 'relative')
    if kind != spec.kind:
        raise ModelLoadError(
            f"'{source}' is a {clip(str(kind))} depth model (config.json "
            f"depth_estimation_type) but manifest '{manifest.name}' says depth.kind "
            f"'{spec.kind}': make them agree")
    if kind == 'relative' and spec.output != 'disparity':
        raise ModelLoadError(
            f"'{source}': Depth Anything's relative models output disparity (larger is "
            f"nearer); set depth.output: disparity in manifest '{manifest.name}'")
    # Depth Anything scales its output by max_depth (metric and relative alike).
    problem = depth_range_problem(config.get('max_depth'))
    if problem:
        raise ModelLoadError(f"'{source}': config.json max_depth {problem}: the model's "
                             'output is scaled by it; set it to the positive depth range '
                             'the model was trained for')
    if kind == 'metric' and spec.max_depth is not None:
        max_depth = config.get('max_depth')
        if not isinstance(max_depth, (int, float)) or float(max_depth) != spec.max_depth:
            raise ModelLoadError(
                f"'{source}': config.json max_depth is {clip(repr(max_depth))} but manifest "
                f"'{manifest.name}' says depth.max_depth {spec.max_depth}: make them agree "
                '(or leave depth.max_depth out)')


def load_transformers(manifest: ModelManifest, weights: Path,
                      cache_dir: Path | None = None) -> tuple[Any, list[str] | None]:
    """Return ``(module in eval mode on the CPU, None)`` for a ``save_pretrained`` folder.

    The module takes the (N, 3, H, W) normalised image and returns (N, 1, H, W) depth.
    """
    config = check_pretrained_folder(weights)
    try:
        import transformers
    except ImportError as exc:
        raise ModelLoadError("architecture 'transformers' needs the `transformers` package "
                             "(pip install 'vision_nodes[torch]'), or export the model "
                             'to .onnx and give the manifest that file') from exc
    cls = getattr(transformers, MODEL_TYPES[config['model_type']])
    bars = transformers.utils.logging.is_progress_bar_enabled()
    transformers.utils.logging.disable_progress_bar()  # one log line, not a progress bar
    try:
        model = cls.from_pretrained(str(weights), local_files_only=True, use_safetensors=True)
    except Exception as exc:  # noqa: BLE001 - transformers raises many types for bad folders
        raise ModelLoadError(f"cannot load '{clip(str(weights))}' with transformers: "
                             f'{clip(str(exc))}') from exc
    finally:
        if bars:
            transformers.utils.logging.enable_progress_bar()
    # What transformers built is what runs: check its config, not the raw JSON.
    check_depth_config(manifest, model.config.to_dict(), clip(str(weights)))
    model = model.float().eval()
    for param in model.parameters():
        param.requires_grad_(False)
    from .torch_modules import PredictedDepth

    return PredictedDepth(model).eval(), None
