"""OpenVINO IR that takes the 8-bit camera image: the pre-processing embedded in the model.

One step of the artifact chain, on top of the fp32 or the INT8 IR. OpenVINO's
``PrePostProcessor`` puts in front of the network what the task would otherwise do on the
host after the letterbox: u8 -> f32, NHWC -> NCHW, BGR -> the model's channel order, and the
manifest's scale, mean and std. The host then hands the letterboxed u8 image as it is (no
float copy of the frame, no channel split), and the runtime converts it inside the compiled
graph. Resizing stays on the host: the letterbox geometry (YOLO rounding) is the task's, and
the network input is already the resized image.

The numerics are the host's: the same operations in the same order on the same float32
values (``x * scale``, then ``- mean`` and ``/ std`` when they are not 0 and 1).

The entry's key holds the parent IR's SHA-256, the OpenVINO version, this step's version and
every number and order it embeds, so a changed preprocessing gives a new entry.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .cache import CacheEntry, ArtifactCache
from .openvino_convert import IR_BIN, IR_XML, openvino_version
from ..images import U8_INPUT_ORDER
from ..manifest import ModelManifest, Preprocessing
from .types import embedded_preprocessing

#: Bump whenever the embedded pre-processing would change for the same inputs.
U8_INPUT_VERSION = 1
TENSOR_ORDER = U8_INPUT_ORDER

Log = Callable[[str], None]


def u8_input_fields(parent_sha256: str, prep: Preprocessing) -> dict[str, Any]:
    """Return the fields of the u8-input IR's cache key: the parent and what is embedded."""
    return {
        'parent_sha256': parent_sha256,
        'openvino': openvino_version(),
        'step': f'vision_nodes-u8-input/{U8_INPUT_VERSION}',
        **embedded_preprocessing(prep),
    }


def embed_u8_input(model: Any, prep: Preprocessing) -> Any:
    """Return ``model`` (NCHW float input) taking a u8 NHWC ``TENSOR_ORDER`` image instead."""
    import openvino as ov
    from openvino import opset13 as ops
    from openvino.preprocess import ColorFormat, PrePostProcessor

    ppp = PrePostProcessor(model)
    given = ppp.input(0)
    given.tensor().set_element_type(ov.Type.u8).set_layout(ov.Layout('NHWC')) \
        .set_color_format(ColorFormat.BGR)
    given.model().set_layout(ov.Layout('NCHW'))
    steps = given.preprocess().convert_element_type(ov.Type.f32)
    if prep.color_order == 'rgb':
        steps.convert_color(ColorFormat.RGB)
    scale = np.float32(prep.scale)
    steps.custom(lambda node: ops.multiply(node, ops.constant(scale)).output(0))
    if tuple(prep.mean) != (0.0, 0.0, 0.0) or tuple(prep.std) != (1.0, 1.0, 1.0):
        steps.mean([float(v) for v in prep.mean]).scale([float(v) for v in prep.std])
    return ppp.build()


def ensure_u8_input_ir(manifest: ModelManifest, parent_sha256: str,
                       read_parent: Callable[[], Any], cache: ArtifactCache, log: Log
                       ) -> CacheEntry:
    """Return the cached u8-input IR of a parent IR, embedding the pre-processing on a miss.

    ``read_parent()`` returns the parent as an ``openvino.Model`` (only called on a miss).
    """
    prep = manifest.preprocessing
    fields = u8_input_fields(parent_sha256, prep)

    def build(folder: Path) -> None:
        import openvino as ov

        started = time.monotonic()
        model = embed_u8_input(read_parent().clone(), prep)
        ov.save_model(model, str(folder / IR_XML), compress_to_fp16=False)
        (folder / 'tools.json').write_text(json.dumps(fields, indent=2))
        log(f'artifacts: u8 input embedded in the OpenVINO IR in '
            f'{time.monotonic() - started:.1f} s')

    return cache.get_or_build(manifest.name, 'openvino-u8', fields, build,
                              files=(IR_XML, IR_BIN))
