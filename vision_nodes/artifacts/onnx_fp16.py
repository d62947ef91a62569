"""An ONNX graph converted to float16, as a cache entry keyed on its parent ONNX.

GPU execution providers (CUDA, ROCm, MIGraphX, DirectML, CoreML) run ``precision: fp16`` on
this converted graph, and TensorRT 11 (which dropped the builder's FP16 flag for strongly
typed networks) builds its fp16 engine from it. The graph's inputs and outputs stay float32
(casts are inserted inside it), so tasks feed and read it exactly like the fp32 graph.

The key covers the parent ONNX's SHA-256, the converter (ONNX Runtime's
``onnxruntime.transformers.float16``, else onnxconverter-common's) and its version, and this
step's own version; converting needs the ``onnx`` package.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable

from .cache import CacheEntry, CacheError, ArtifactCache

#: Bump whenever the converted graph would change for the same parent and converter.
FP16_STEP_VERSION = 1
FP16_ONNX_FILE = 'model_fp16.onnx'


def fp16_converter() -> tuple[Callable[..., Any], str]:
    """Return (``convert_float_to_float16``, 'package version') from the first converter found.

    Raises CacheError naming what to install when neither converter (or ``onnx``) is present.
    """
    try:
        import onnxruntime
        from onnxruntime.transformers import float16

        return (float16.convert_float_to_float16,
                f'onnxruntime.transformers.float16/{onnxruntime.__version__}')
    except ImportError:
        pass
    try:
        import onnxconverter_common
        from onnxconverter_common import float16

        return (float16.convert_float_to_float16,
                f'onnxconverter_common/{onnxconverter_common.__version__}')
    except ImportError:
        pass
    raise CacheError("precision 'fp16' on this runtime needs an fp16 copy of the ONNX model, "
                     "and converting it needs the 'onnx' package with ONNX Runtime's "
                     "transformers tools or onnxconverter-common (pip install onnx "
                     'onnxconverter-common)')


def convert_to_fp16(onnx_bytes: bytes) -> bytes:
    """Return the fp16 version of a serialised ONNX model, with float32 inputs and outputs."""
    import onnx

    convert, _ = fp16_converter()
    model = onnx.load_from_string(onnx_bytes)
    converted = convert(model, keep_io_types=True)
    return converted.SerializeToString()


def fp16_cache_fields(parent_sha256: str) -> dict[str, Any]:
    """Return the fields that make up the fp16 graph's cache key."""
    _, converter = fp16_converter()
    return {'parent_onnx_sha256': parent_sha256, 'converter': converter,
            'keep_io_types': True, 'step': f'vision_nodes-onnx-fp16/{FP16_STEP_VERSION}'}


def ensure_fp16_onnx(model: str, onnx_bytes: bytes, cache: ArtifactCache,
                     log: Callable[[str], None] = lambda _: None) -> CacheEntry:
    """Return the cached fp16 conversion of ``onnx_bytes`` (the parent), converting on a miss.

    ``model`` names the entry (the manifest's name). Load the result with
    ``entry.read_verified(FP16_ONNX_FILE)``.
    """
    parent_sha = hashlib.sha256(onnx_bytes).hexdigest()
    fields = fp16_cache_fields(parent_sha)

    def build(folder: Path) -> None:
        log(f"converting the ONNX model of '{model}' to fp16 (inputs and outputs stay fp32) "
            'into the engine cache')
        try:
            data = convert_to_fp16(onnx_bytes)
        except CacheError:
            raise
        except Exception as exc:  # noqa: BLE001 - converters raise many types
            raise CacheError(f"converting '{model}' to fp16 failed: {exc}") from exc
        (folder / FP16_ONNX_FILE).write_bytes(data)
        (folder / 'tools.json').write_text(json.dumps({'converter': fields['converter']}))

    return cache.get_or_build(model, 'onnx-fp16', fields, build, files=(FP16_ONNX_FILE,))
