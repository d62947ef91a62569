"""Export PyTorch weights to ONNX, through the engine cache: the first step of the chain.

weights → ONNX (this file) → OpenVINO IR (``openvino_convert``) → INT8 IR (``quantize``), and
ONNX → TensorRT engine / fp16 ONNX: each step is one cache entry keyed on its parent's hash.

The cache key covers the weights' content hash, the manifest's task, the architecture, input
size, precision, opset and this exporter's version. The task is in the key because the export
is where the weights' own task is checked against the manifest's (``loaders.ultralytics``): a
hit then means this weights-and-task pair passed that check, so a ``task: pose`` manifest
pointed at -seg weights is refused whether or not the cache holds their segment export. Tool
versions (torch, onnxslim) are recorded in the entry but kept out of the key, so a deployment
without torch can still find an artifact exported earlier.

For letterboxed models with rect inference on (the manifest's default), the graph has dynamic
height and width (and the output dimensions that follow them), so runtimes that allow it run
other shapes than ``input_size``; ``input_size`` is the shape it was traced at and the largest
the node asks for. Other models (stretched to their input size) are exported static.
A model loaded for batches (``max_batch`` > 1: several cameras in one run) also has a dynamic
batch axis, and its cache key says so (one export serves every batch size).
"""

from __future__ import annotations

import json
import logging
import time
import warnings
from pathlib import Path
from typing import Any, Callable

from .labels import LABELS_METADATA_KEY, labels_from_metadata  # noqa: F401
from .cache import CacheEntry, CacheError, ArtifactCache, file_sha256
from ..manifest import ModelManifest
from ..loaders import ModelLoadError, check_weights, load_torch_module
from ..text import clip

#: Bump whenever the exported graph would change for the same inputs.
EXPORTER_VERSION = 3  # 2: dynamic height/width; 3: end-to-end heads' NMS-free branch
DEFAULT_OPSET = 17
ONNX_FILE = 'model.onnx'

_log = logging.getLogger(__name__)

#: Output tensor names per task (the runners read outputs by position; names help people).
OUTPUT_NAMES = {'detect': ['output0'], 'depth': ['depth'], 'segment': ['output0', 'output1'],
                'pose': ['output0']}


def weights_sha256(weights: Path) -> str:
    """SHA-256 of a weights file, or of a weights folder (a transformers save_pretrained).

    A folder's hash covers each file's name and content hash (save_pretrained writes a flat
    folder; subfolders are not read), so renaming, adding or changing a file gives a new key.
    """
    if not weights.is_dir():
        return file_sha256(check_weights(weights))
    import hashlib

    files = sorted(p for p in weights.iterdir() if p.is_file())
    if not files:
        raise ModelLoadError(f"weights folder '{weights}' is empty")
    digest = hashlib.sha256()
    for path in files:
        digest.update(f'{path.name}\0{file_sha256(path)}\n'.encode())
    return digest.hexdigest()


def export_options(manifest: ModelManifest) -> dict[str, Any]:
    """Task- and architecture-specific ``torch.onnx.export`` arguments."""
    return {'output_names': OUTPUT_NAMES.get(manifest.task, ['output0'])}


def dynamic_export(manifest: ModelManifest) -> bool:
    """Whether the export asks for dynamic height and width (rect inference)."""
    return manifest.rect and manifest.preprocessing.letterbox


def batch_export(manifest: ModelManifest) -> bool:
    """Whether the export asks for a dynamic batch axis (the model runs batches of frames)."""
    return manifest.max_batch > 1


Log = Callable[[str], None]


def onnx_cache_fields(manifest: ModelManifest, weights: Path, precision: str,
                      opset: int = DEFAULT_OPSET) -> dict[str, Any]:
    """Return the fields that make up the ONNX artifact's cache key."""
    fields = {
        'weights_sha256': weights_sha256(weights),
        'task': manifest.task,
        'architecture': manifest.architecture,
        'input_size': list(manifest.input_size),
        'precision': precision,
        'opset': opset,
        'dynamic': dynamic_export(manifest),
        'exporter': f'vision_nodes-onnx/{EXPORTER_VERSION}',
    }
    if batch_export(manifest):  # absent for batch 1: single-frame exports keep their key
        fields['batch'] = 'dynamic'
    return fields


def export_onnx(manifest: ModelManifest, weights: Path, out_path: Path,
                precision: str = 'fp32', opset: int = DEFAULT_OPSET,
                cache_dir: Path | None = None) -> dict[str, Any]:
    """Export the manifest's weights to ``out_path``; return the tool versions used."""
    import torch

    if precision != 'fp32':
        raise ValueError(f"ONNX export supports precision 'fp32' here, not '{precision}'")
    module, labels = load_torch_module(manifest, weights, cache_dir)
    _trace_every_shape(module)
    height, width = manifest.input_size
    example = torch.zeros(1, 3, height, width)
    output_names = export_options(manifest)['output_names']
    with torch.inference_mode(), warnings.catch_warnings():
        # Shape-dependent Python in the models makes the tracer warn once per site; the
        # dynamic axes below are checked by running a second shape.
        warnings.simplefilter('ignore', torch.jit.TracerWarning)
        dynamic_axes = _dynamic_axes(module, example, output_names) \
            if dynamic_export(manifest) else {}
        if batch_export(manifest):
            _add_batch_axes(dynamic_axes, module, example, output_names)
        torch.onnx.export(module, (example,), str(out_path), opset_version=opset,
                          input_names=['images'], output_names=output_names,
                          dynamic_axes=dynamic_axes or None, do_constant_folding=True,
                          dynamo=False)
    versions: dict[str, Any] = {'torch': torch.__version__}
    import onnx

    model = onnx.load(str(out_path))
    try:
        import onnxslim

        model = onnxslim.slim(model)
        versions['onnxslim'] = getattr(onnxslim, '__version__', 'unknown')
    except ImportError:
        versions['onnxslim'] = None
    if labels:
        entry = model.metadata_props.add()
        entry.key, entry.value = LABELS_METADATA_KEY, json.dumps(labels)
    entry = model.metadata_props.add()
    entry.key, entry.value = 'vision_nodes.manifest', manifest.name
    onnx.save(model, str(out_path))
    versions['onnx'] = onnx.__version__
    return versions


def _trace_every_shape(module: Any) -> None:
    """Make heads that cache shape-dependent tensors recompute them in every forward.

    Ultralytics' detection heads keep their anchor grid from the last input shape and reuse
    it while the shape stays the same; an export traced after a forward at the same shape
    would hold that grid as a constant and fail (or be wrong) at any other shape. With
    ``dynamic`` set they rebuild it in each forward, so the trace records the computation.
    """
    for sub in module.modules():
        if isinstance(getattr(sub, 'dynamic', None), bool) and hasattr(sub, 'anchors'):
            sub.dynamic = True


def _dynamic_axes(module: Any, example: Any, output_names: list[str]
                  ) -> dict[str, dict[int, str]]:
    """Input height/width and every output dimension that follows them, named for ONNX.

    Found by running the module at the export shape and at a larger one (height + 32,
    width + 64, different so that the two are told apart): the output dimensions that
    change are the dynamic ones. A module that cannot run the larger shape is exported with
    static shapes (runners then use ``input_size`` only). Only letterboxed models with rect
    inference on ask for this: a model stretched to its input size always runs at it.
    """
    import torch

    def shapes(x: Any) -> list[tuple[int, ...]]:
        out = module(x)
        return [tuple(t.shape) for t in (out if isinstance(out, (tuple, list)) else [out])]

    _, _, height, width = example.shape
    base = shapes(example)
    try:
        grown = shapes(torch.zeros(1, 3, height + 32, width + 64))
    except Exception:  # noqa: BLE001 - any failure means: this model takes one shape
        return {}
    names = list(output_names) + [f'output{i}' for i in range(len(output_names), len(base))]
    axes = {'images': {2: 'height', 3: 'width'}}
    for name, a, b in zip(names, base, grown):
        axes[name] = {d: f'{name}_dim{d}' for d in range(1, len(a)) if a[d] != b[d]}
    return axes


def _add_batch_axes(axes: dict[str, dict[int, str]], module: Any, example: Any,
                    output_names: list[str]) -> None:
    """Add the batch axis (dimension 0) of the input and of every output to ``axes``."""
    out = module(example)
    count = len(out) if isinstance(out, (tuple, list)) else 1
    names = list(output_names) + [f'output{i}' for i in range(len(output_names), count)]
    for name in ['images'] + names[:count]:
        axes.setdefault(name, {})[0] = 'batch'


def ensure_onnx(manifest: ModelManifest, weights: Path, cache: ArtifactCache,
                precision: str = 'fp32', opset: int = DEFAULT_OPSET,
                log: Log | None = None) -> CacheEntry:
    """Return the cached ONNX export of the weights, exporting it on a miss."""
    fields = onnx_cache_fields(manifest, weights, precision, opset)
    say = log or _log.info

    def build(folder: Path) -> None:
        shape = 'dynamic height and width' if dynamic_export(manifest) else 'static shape'
        shape += ', dynamic batch' if batch_export(manifest) else ''
        say(f'artifacts: exporting {clip(weights.name)} to ONNX (opset {opset}, {shape}) into '
            'the engine cache')
        started = time.monotonic()
        versions = export_onnx(manifest, weights, folder / ONNX_FILE, precision, opset,
                               cache.root)
        if weights_sha256(weights) != fields['weights_sha256']:  # never B's export under A
            raise CacheError(f"weights '{clip(weights)}' changed while being exported; "
                             'configure again')
        (folder / 'tools.json').write_text(json.dumps(versions, indent=2))
        say(f'artifacts: ONNX export done in {time.monotonic() - started:.1f} s')

    return cache.get_or_build(manifest.name, 'onnx', fields, build, files=(ONNX_FILE,))
