"""Export PyTorch weights to ONNX, through the engine cache.

The cache key covers the weights' content hash, the architecture, input size, precision, opset
and this exporter's version. Tool versions (torch, onnxslim) are recorded in the entry but kept
out of the key, so a deployment without torch can still find an artifact exported earlier.
"""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path
from typing import Any

from .cache import CacheEntry, CacheError, EngineCache, file_sha256
from ..manifest import ModelManifest
from ..loaders import ModelLoadError, check_weights, load_torch_module
from ..text import clip

#: Bump whenever the exported graph would change for the same inputs.
EXPORTER_VERSION = 1
DEFAULT_OPSET = 17
ONNX_FILE = 'model.onnx'
LABELS_METADATA_KEY = 'vision_nodes.labels'

_log = logging.getLogger(__name__)

#: Output tensor names per task (the runners read outputs by position; names help people).
OUTPUT_NAMES = {'detect': ['output0'], 'depth': ['depth']}


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


def onnx_cache_fields(manifest: ModelManifest, weights: Path, precision: str,
                      opset: int = DEFAULT_OPSET) -> dict[str, Any]:
    """Return the fields that make up the ONNX artifact's cache key."""
    return {
        'weights_sha256': weights_sha256(weights),
        'architecture': manifest.architecture,
        'input_size': list(manifest.input_size),
        'precision': precision,
        'opset': opset,
        'exporter': f'vision_nodes-onnx/{EXPORTER_VERSION}',
    }


def export_onnx(manifest: ModelManifest, weights: Path, out_path: Path,
                precision: str = 'fp32', opset: int = DEFAULT_OPSET,
                cache_dir: Path | None = None) -> dict[str, Any]:
    """Export the manifest's weights to ``out_path``; return the tool versions used."""
    import torch

    if precision != 'fp32':
        raise ValueError(f"ONNX export supports precision 'fp32' here, not '{precision}'")
    module, labels = load_torch_module(manifest, weights, cache_dir)
    height, width = manifest.input_size
    example = torch.zeros(1, 3, height, width)
    with torch.inference_mode(), warnings.catch_warnings():
        # Shape-dependent Python in the models (fixed here: the export has one input size)
        # makes the tracer warn once per site; the graph is right for that size.
        warnings.simplefilter('ignore', torch.jit.TracerWarning)
        torch.onnx.export(module, (example,), str(out_path), opset_version=opset,
                          input_names=['images'], do_constant_folding=True, dynamo=False,
                          **export_options(manifest))
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


def ensure_onnx(manifest: ModelManifest, weights: Path, cache: EngineCache,
                precision: str = 'fp32', opset: int = DEFAULT_OPSET) -> CacheEntry:
    """Return the cached ONNX export of the weights, exporting it on a miss."""
    fields = onnx_cache_fields(manifest, weights, precision, opset)

    def build(folder: Path) -> None:
        _log.info('exporting %s to ONNX (opset %d) into the engine cache', weights, opset)
        versions = export_onnx(manifest, weights, folder / ONNX_FILE, precision, opset,
                               cache.root)
        if weights_sha256(weights) != fields['weights_sha256']:  # never B's export under A
            raise CacheError(f"weights '{clip(weights)}' changed while being exported; "
                             'configure again')
        (folder / 'tools.json').write_text(json.dumps(versions, indent=2))

    return cache.get_or_build(manifest.name, 'onnx', fields, build, files=(ONNX_FILE,))
