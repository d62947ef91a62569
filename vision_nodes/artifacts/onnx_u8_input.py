"""ONNX model that takes the 8-bit camera image: the pre-processing embedded in the graph.

One step of the artifact chain, on top of the fp32 ONNX (and of its fp16 conversion). A few
nodes go in front of the network doing what the task would otherwise do on the host after the
letterbox: ``Cast`` u8 -> float32, a channel flip when the model's colour order is not
``U8_INPUT_ORDER``, ``Mul`` by the manifest's scale, ``Sub`` mean and ``Div`` std when they are
not 0 and 1, and ``Transpose`` NHWC -> NCHW. The host then hands the letterboxed u8 image as it
is (no float copy of the frame); a GPU provider or a TensorRT engine gets a quarter of the bytes
uploaded and converts them on the device. Resizing stays on the host (the letterbox geometry is
the task's).

The numerics are the host's (``tasks.preprocess.prepare``): the same float32 operations in the
same order. The new input keeps the float input's batch, height and width dimensions (fixed or
named), so rect inference and batches of cameras run as before.

A model this step cannot wrap (not one 4-D float image input of 3 channels, or weights kept in
external files) gets no twin and runs on the host's float tensor. The entry's key holds the
parent's SHA-256, the ``onnx`` package's version, this step's version and every number and order
it embeds, so a changed pre-processing gives a new entry.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable

from .cache import CacheEntry, CacheError, ArtifactCache
from ..images import U8_INPUT_ORDER
from ..manifest import Preprocessing
from ..text import clip
from .types import embedded_preprocessing

#: Bump whenever the embedded pre-processing would change for the same inputs.
ONNX_U8_STEP_VERSION = 1
U8_ONNX_FILE = 'model_u8.onnx'
TENSOR_ORDER = U8_INPUT_ORDER
#: Suffix of the u8 input's name (the float input's name stays, inside the graph).
U8_INPUT_SUFFIX = '_u8'

Log = Callable[[str], None]


def onnx_u8_fields(parent_sha256: str, prep: Preprocessing) -> dict[str, Any]:
    """Return the fields of the u8-input graph's cache key: the parent and what is embedded."""
    import onnx

    return {
        'parent_onnx_sha256': parent_sha256,
        'onnx': onnx.__version__,
        'step': f'vision_nodes-onnx-u8-input/{ONNX_U8_STEP_VERSION}',
        **embedded_preprocessing(prep),
    }


def why_not_wrappable(model: Any) -> str | None:
    """Say why ``model`` (an ``onnx.ModelProto``) cannot take the u8 image; None if it can."""
    import onnx

    graph = model.graph
    initializers = {t.name for t in graph.initializer}
    inputs = [i for i in graph.input if i.name not in initializers]
    if len(inputs) != 1:
        return f'it has {len(inputs)} inputs'
    tensor = inputs[0].type.tensor_type
    dims = tensor.shape.dim
    if tensor.elem_type != onnx.TensorProto.FLOAT or len(dims) != 4:
        return 'its input is not a 4-D float32 tensor'
    if dims[1].HasField('dim_value') and dims[1].dim_value != 3:
        return f'its input has {dims[1].dim_value} channels'
    if any(t.data_location == onnx.TensorProto.EXTERNAL for t in graph.initializer):
        return 'it keeps its weights in external files'
    return None


def _constant(name: str, values: list[float] | list[int], dtype: int) -> Any:
    from onnx import helper

    return helper.make_node('Constant', [], [name], name=name, value=helper.make_tensor(
        name, dtype, [len(values)], values))


def _preprocess_nodes(u8_name: str, float_name: str, prep: Preprocessing) -> list[Any]:
    """Nodes from the u8 NHWC input to the float NCHW tensor named ``float_name``."""
    import numpy as np
    import onnx
    from onnx import helper

    f32 = onnx.TensorProto.FLOAT
    prefix = f'{float_name}/u8_input'
    nodes = [helper.make_node('Cast', [u8_name], [f'{prefix}/cast'], to=f32,
                              name=f'{prefix}/cast')]
    last = f'{prefix}/cast'
    if prep.color_order != TENSOR_ORDER:  # both are 3-channel orders: reversing maps one
        nodes += [_constant(f'{prefix}/order', [2, 1, 0], onnx.TensorProto.INT64),
                  helper.make_node('Gather', [last, f'{prefix}/order'], [f'{prefix}/flip'],
                                   axis=3, name=f'{prefix}/flip')]
        last = f'{prefix}/flip'
    # float(np.float32(...)): the float32 value the host multiplies by, stored as float32.
    steps = [('Mul', 'scale', [float(np.float32(prep.scale))])]
    if tuple(prep.mean) != (0.0, 0.0, 0.0) or tuple(prep.std) != (1.0, 1.0, 1.0):
        steps += [('Sub', 'mean', [float(np.float32(v)) for v in prep.mean]),
                  ('Div', 'std', [float(np.float32(v)) for v in prep.std])]
    for op, what, values in steps:
        nodes += [_constant(f'{prefix}/{what}_value', values, f32),
                  helper.make_node(op, [last, f'{prefix}/{what}_value'], [f'{prefix}/{what}'],
                                   name=f'{prefix}/{what}')]
        last = f'{prefix}/{what}'
    nodes.append(helper.make_node('Transpose', [last], [float_name], perm=[0, 3, 1, 2],
                                  name=f'{prefix}/nchw'))
    return nodes


def embed_u8_input(model: Any, prep: Preprocessing) -> Any:
    """Return ``model`` (one NCHW float input) taking a u8 NHWC ``TENSOR_ORDER`` image instead.

    The float input becomes an inner tensor of the same name, computed from the new input
    ``<name>_u8`` whose batch, height and width dimensions are the float input's.
    """
    import onnx
    from onnx import helper

    reason = why_not_wrappable(model)
    if reason:
        raise CacheError(f'the model cannot take the u8 image: {reason}')
    wrapped = onnx.ModelProto()
    wrapped.CopyFrom(model)
    graph = wrapped.graph
    initializers = {t.name for t in graph.initializer}
    index, given = next((i, v) for i, v in enumerate(graph.input) if v.name not in initializers)
    n, _, h, w = given.type.tensor_type.shape.dim
    u8_input = helper.make_tensor_value_info(given.name + U8_INPUT_SUFFIX,
                                             onnx.TensorProto.UINT8, [None] * 4)
    for dst, src in zip(u8_input.type.tensor_type.shape.dim, (n, h, w)):
        dst.CopyFrom(src)
    u8_input.type.tensor_type.shape.dim[3].dim_value = 3
    nodes = _preprocess_nodes(u8_input.name, given.name, prep) + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.input[index]
    graph.input.insert(0, u8_input)
    return wrapped


def _valid(model: Any) -> bool:
    """Return whether the ONNX checker accepts ``model``."""
    import onnx

    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError:
        return False
    return True


def ensure_u8_onnx(model: str, onnx_bytes: bytes, prep: Preprocessing, cache: ArtifactCache,
                   log: Log) -> CacheEntry:
    """Return the cached u8-input graph of ``onnx_bytes`` (the parent), building it on a miss.

    ``model`` names the entry (the manifest's name). Load the result with
    ``entry.read_verified(U8_ONNX_FILE)``. Raises CacheError when the model cannot be wrapped.
    """
    fields = onnx_u8_fields(hashlib.sha256(onnx_bytes).hexdigest(), prep)

    def build(folder: Path) -> None:
        import onnx

        try:
            parent = onnx.load_from_string(onnx_bytes)
            wrapped = embed_u8_input(parent, prep)
            if _valid(parent):  # some converters leave graphs the checker refuses (unsorted)
                onnx.checker.check_model(wrapped)
        except CacheError:
            raise
        except Exception as exc:  # noqa: BLE001 - protobuf and the checker raise many types
            raise CacheError(f"embedding the u8 input in '{clip(model)}' failed: "
                             f'{clip(exc, 600)}') from exc
        (folder / U8_ONNX_FILE).write_bytes(wrapped.SerializeToString())
        (folder / 'tools.json').write_text(json.dumps(fields, indent=2))
        log(f"artifacts: u8 input embedded in the ONNX model of '{clip(model)}'")

    return cache.get_or_build(model, 'onnx-u8', fields, build, files=(U8_ONNX_FILE,))
