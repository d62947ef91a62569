"""The tensor table of a ``.safetensors`` file, read from its header without loading anything.

A safetensors file starts with the length of a JSON header (8 bytes, little-endian), then the
header: for each tensor its dtype, shape and byte range in the data that follows. Reading it
costs one bounded read and tells exactly which tensors the file holds, so a model can be
checked against its weights before either is allocated.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from ..limits import MAX_MODEL_METADATA_BYTES
from ..text import clip, show, show_path
from .common import ModelLoadError

#: Bytes per element of each safetensors dtype.
DTYPE_BYTES = {'BOOL': 1, 'U8': 1, 'I8': 1, 'F8_E5M2': 1, 'F8_E4M3': 1, 'I16': 2, 'U16': 2,
               'F16': 2, 'BF16': 2, 'I32': 4, 'U32': 4, 'F32': 4, 'I64': 8, 'U64': 8,
               'F64': 8}
#: Most dimensions of one tensor.
_MAX_RANK = 8


def _shape(path: Path, name: str, entry: object, data_bytes: int) -> tuple[int, ...]:
    """Check one header entry against its dtype and the file; return its shape."""
    def bad(problem: str) -> ModelLoadError:
        return ModelLoadError(f"{show_path(path)}: tensor {show(name)} in the header {problem}: "
                              'the file is not a valid safetensors file')

    if not isinstance(entry, dict):
        raise bad('is not a mapping')
    dtype, shape, offsets = entry.get('dtype'), entry.get('shape'), entry.get('data_offsets')
    if not isinstance(dtype, str) or dtype not in DTYPE_BYTES:
        raise bad(f'has an unknown dtype {show(dtype)}')
    if not (isinstance(shape, list) and len(shape) <= _MAX_RANK and all(
            type(d) is int and d >= 0 for d in shape)):
        raise bad(f'has no valid shape ({show(shape)})')
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(
            type(o) is int for o in offsets) and 0 <= offsets[0] <= offsets[1] <= data_bytes):
        raise bad(f'has data offsets {show(offsets)} outside the file')
    if offsets[1] - offsets[0] != math.prod(shape) * DTYPE_BYTES[dtype]:
        raise bad(f'is {offsets[1] - offsets[0]} bytes, not what {dtype} {shape} needs')
    return tuple(shape)


def read_tensor_shapes(fd: int, size: int, path: Path) -> dict[str, tuple[int, ...]]:
    """Return ``{name: shape}`` of every tensor in the open safetensors file ``fd``.

    ``size`` is the file's size. The header is bounded by ``MAX_MODEL_METADATA_BYTES``; every
    entry must have a known dtype and a byte range inside the file that fits its shape.
    Raises :class:`ModelLoadError` (one line) otherwise.
    """
    length = int.from_bytes(os.pread(fd, 8, 0), 'little') if size >= 8 else -1
    if not 2 <= length <= size - 8:
        raise ModelLoadError(f"{show_path(path)} is not a safetensors file (no header): save the "
                             'model with save_pretrained(..., safe_serialization=True)')
    if length > MAX_MODEL_METADATA_BYTES:
        raise ModelLoadError(f"{show_path(path)}: its safetensors header is {length} bytes; at "
                             f'most {MAX_MODEL_METADATA_BYTES} are accepted')
    raw = os.pread(fd, length, 8)
    try:
        header = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ModelLoadError(f"{show_path(path)}: its safetensors header is not valid JSON "
                             f'({clip(exc, 80)})') from None
    if not isinstance(header, dict):
        raise ModelLoadError(f"{show_path(path)}: its safetensors header is not a JSON object")
    data_bytes = size - 8 - length
    return {name: _shape(path, name, entry, data_bytes)
            for name, entry in header.items() if name != '__metadata__'}
