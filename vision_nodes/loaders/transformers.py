"""Hugging Face ``transformers`` weights (a ``save_pretrained`` folder) → a PyTorch module.

Only Depth Anything (``DepthAnythingForDepthEstimation``, V1 and V2, relative and metric) is
served. The folder is untrusted input, read in this order, each step before the next costs
anything:

* ``config.json``: a regular file of bounded size (:mod:`..files`), a JSON object of a served
  ``model_type``, naming nothing to fetch (a backbone by name, pretrained backbone weights,
  timm, remote code: refused, never looked up), with at most ``MAX_MODEL_LAYERS`` layers.
* ``model.safetensors``: a regular file of bounded size whose header lists its tensors.
* The model the config describes is built on PyTorch's ``meta`` device (shapes, no memory):
  at most ``MAX_MODEL_PARAMETERS`` parameters, exactly as many as the file holds.

Only then does transformers load the weights, from the very file that was checked (through
its open descriptor), with the configuration built here: it never reads the folder itself,
never the network (``local_files_only``, and :func:`.common.force_offline` for the process),
never pickled ``.bin`` weights or remote code. The model's configuration must agree with the
manifest's ``depth`` block, so a metric model is never published as relative or the other
way round.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator

from ..files import fd_path, open_regular, read_regular
from ..limits import (MAX_MODEL_LAYERS, MAX_MODEL_METADATA_BYTES, MAX_MODEL_PARAMETERS,
                      MAX_WEIGHTS_BYTES, depth_range_problem)
from ..manifest import ModelManifest
from ..text import clip, clip_path, show, show_path
from .common import ModelLoadError, force_offline, summary
from .safetensors_header import read_tensor_shapes

#: ``config.json`` ``model_type`` values this loader serves → the transformers class.
MODEL_TYPES = {'depth_anything': 'DepthAnythingForDepthEstimation'}
#: ``backbone_config`` ``model_type`` values served (Depth Anything V1 and V2: DINOv2).
BACKBONE_TYPES = ('dinov2',)
CONFIG_FILE = 'config.json'
WEIGHTS_FILE = 'model.safetensors'
#: ``config.json`` keys that, set, make transformers fetch something: a backbone config or
#: weights by name (from the Hub or timm), or code (``auto_map``).
FETCHING_KEYS = ('backbone', 'use_pretrained_backbone', 'use_timm_backbone', 'auto_map')


def _folder_error(message: str) -> ModelLoadError:
    return ModelLoadError(f'{message} (a save_pretrained folder holds config.json and '
                          'model.safetensors as regular files)')


def _values(config: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """Every ``(key, value)`` in a parsed JSON document, at any depth (list items: key '')."""
    todo: list[tuple[str, Any]] = [('', config)]
    while todo:
        key, value = todo.pop()
        yield key, value
        if isinstance(value, dict):
            todo.extend((str(k), v) for k, v in value.items())
        elif isinstance(value, list):
            todo.extend(('', v) for v in value)


def check_config(config: dict[str, Any], source: str) -> None:
    """Refuse a config that would fetch something, or that is too large to build.

    Nothing here is looked up: a config naming a backbone to fetch is refused, whether or not
    the machine is online. Layer counts and list lengths are bounded because building even
    an empty model takes time and memory for each layer.
    """
    model_type = config.get('model_type')
    if model_type not in MODEL_TYPES:
        raise ModelLoadError(f"'{source}': model_type {show(model_type)} is not served "
                             f"(served: {', '.join(MODEL_TYPES)})")
    backbone = config.get('backbone_config')
    if backbone is not None and not (isinstance(backbone, dict)
                                     and backbone.get('model_type') in BACKBONE_TYPES):
        kind = backbone.get('model_type') if isinstance(backbone, dict) else backbone
        raise ModelLoadError(f"'{source}': backbone_config model_type {show(kind)} is not "
                             f"served (served: {', '.join(BACKBONE_TYPES)})")
    for scope in (config, backbone or {}):
        key = next((k for k in FETCHING_KEYS if scope.get(k)), None)
        if key is not None:
            raise ModelLoadError(
                f"'{source}': `{key}` is {show(scope[key])}, which transformers would fetch "
                'from the network; this node never downloads: save the complete model with '
                'save_pretrained on a connected machine (its config.json then holds the '
                'backbone_config) and copy that folder')
    for key, value in _values(config):
        if isinstance(value, list) and len(value) > MAX_MODEL_LAYERS:
            raise ModelLoadError(f"'{source}': `{key or 'a nested list'}` has {len(value)} "
                                 f'items; at most {MAX_MODEL_LAYERS} are accepted')
        if key == 'num_hidden_layers' and type(value) is int and value > MAX_MODEL_LAYERS:
            raise ModelLoadError(f"'{source}': `num_hidden_layers` is {value}; at most "
                                 f'{MAX_MODEL_LAYERS} layers are accepted')


def check_pretrained_folder(folder: Path) -> dict[str, Any]:
    """Return the folder's parsed and checked ``config.json`` (see :func:`check_config`)."""
    if not folder.is_dir():
        hint = (' (a transformers model is the folder save_pretrained wrote, not a file)'
                if folder.is_file() else '')
        raise ModelLoadError(
            f"weights folder {show_path(folder)} not found{hint}: set the `model_dir` "
            'parameter or VISION_NODES_MODEL_DIR, or give an absolute `weights` path in the '
            'manifest')
    config_path = folder / CONFIG_FILE
    raw = read_regular(config_path, MAX_MODEL_METADATA_BYTES, CONFIG_FILE, _folder_error)
    try:
        config = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ModelLoadError(f"{show_path(config_path)} is not valid JSON: "
                             f'{clip(exc, 120)}') from None
    if not isinstance(config, dict):
        raise ModelLoadError(f"{show_path(config_path)} must hold a JSON object")
    check_config(config, clip_path(config_path))
    if not os.path.lexists(folder / WEIGHTS_FILE):
        raise ModelLoadError(
            f"{show_path(folder)} has no {WEIGHTS_FILE}: save the model with "
            'save_pretrained(..., safe_serialization=True) (pickled .bin weights are not read)')
    return config


def _built_config(cls: Any, config: dict[str, Any], source: str) -> Any:
    """Build the transformers configuration object of a checked ``config.json``."""
    try:
        return cls.config_class.from_dict(config)
    except Exception as exc:  # noqa: BLE001 - transformers validates with many types
        raise ModelLoadError(f"'{source}' is not a valid {cls.config_class.__name__} "
                             f'({summary(exc)})') from None


def configured_parameters(cls: Any, config: Any, source: str) -> int:
    """How many parameters (tensor elements) the model of ``config`` has, built on ``meta``.

    The meta device records shapes without allocating memory, so a config describing a huge
    model costs nothing here; it is refused beyond ``MAX_MODEL_PARAMETERS``.
    """
    import torch

    try:
        with torch.device('meta'):
            model = cls(config)
        total = sum(math.prod(t.shape) for t in model.state_dict().values())
    except Exception as exc:  # noqa: BLE001 - absurd sizes fail in many ways
        raise ModelLoadError(f"'{source}' describes a model that cannot be built "
                             f'({summary(exc)})') from None
    if total > MAX_MODEL_PARAMETERS:
        raise ModelLoadError(f"'{source}' describes a model of {total} parameters; at most "
                             f'{MAX_MODEL_PARAMETERS} are accepted')
    return total


def check_parameters(configured: int, shapes: dict[str, tuple[int, ...]], folder: str) -> None:
    """Refuse weights that do not hold as many parameters as the configured model.

    Counts, not names, are compared: transformers renames (and may split or join) tensors
    between the names a file was saved with and the model's own.
    """
    stored = sum(math.prod(shape) for shape in shapes.values())
    if stored != configured:
        raise ModelLoadError(
            f"'{folder}': {WEIGHTS_FILE} holds {stored} parameters but {CONFIG_FILE} "
            f'describes a model of {configured}: both files must come from the same '
            'save_pretrained')


def _from_checked_file(cls: Any, config: Any, fd: int, weights: Path) -> Any:
    """Load the weights from the open, checked file ``fd``, with ``config``.

    transformers is given a private folder holding only a link to that very file: it reads
    nothing else of the user's folder, and a file swapped in meanwhile is never read.
    """
    with tempfile.TemporaryDirectory(prefix='vision_nodes_hf_') as tmp:
        os.symlink(fd_path(fd, weights), Path(tmp) / WEIGHTS_FILE)
        return cls.from_pretrained(tmp, config=config, local_files_only=True,
                                   use_safetensors=True)


def check_depth_config(manifest: ModelManifest, config: dict[str, Any], source: str) -> None:
    """Raise ModelLoadError unless the model's config agrees with the manifest's ``depth``."""
    spec = manifest.block('depth')  # a DepthSpec (tasks/depth.py), parsed at load
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
    source = clip(str(weights))
    config = check_pretrained_folder(weights)
    force_offline()
    try:
        import transformers
    except ImportError as exc:
        raise ModelLoadError("architecture 'transformers' needs the `transformers` package "
                             "(pip install 'vision_nodes[torch]'), or export the model "
                             'to .onnx and give the manifest that file') from exc
    cls = getattr(transformers, MODEL_TYPES[config['model_type']])
    built = _built_config(cls, config, clip(str(weights / CONFIG_FILE)))
    check_depth_config(manifest, built.to_dict(), source)
    configured = configured_parameters(cls, built, clip(str(weights / CONFIG_FILE)))
    fd, size = open_regular(weights / WEIGHTS_FILE, MAX_WEIGHTS_BYTES, WEIGHTS_FILE,
                            _folder_error)
    bars = transformers.utils.logging.is_progress_bar_enabled()
    transformers.utils.logging.disable_progress_bar()  # one log line, not a progress bar
    try:
        check_parameters(configured, read_tensor_shapes(fd, size, weights / WEIGHTS_FILE),
                         source)
        model = _from_checked_file(cls, built, fd, weights)
    except ModelLoadError:
        raise
    except Exception as exc:  # noqa: BLE001 - transformers raises many types for bad folders
        raise ModelLoadError(f"cannot load '{source}' with transformers "
                             f'({summary(exc, 200)})') from None
    finally:
        os.close(fd)
        if bars:
            transformers.utils.logging.enable_progress_bar()
    # What transformers built is what runs: check its config, not the raw JSON.
    check_depth_config(manifest, model.config.to_dict(), source)
    model = model.float().eval()
    for param in model.parameters():
        param.requires_grad_(False)
    from .torch_wrappers import PredictedDepth

    return PredictedDepth(model).eval(), None
