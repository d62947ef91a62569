"""Where models keep their class names: ONNX metadata and OpenVINO runtime info.

Read by the runners when they load an artifact and written by the conversion steps.
"""

from __future__ import annotations

import ast
import json
from typing import Any

from ..limits import MAX_MANIFEST_BYTES

#: ONNX metadata key of the class names (a JSON list) the export writes.
LABELS_METADATA_KEY = 'vision_nodes.labels'
#: Where an IR keeps the class names (JSON list) in its runtime info.
LABELS_RT_PATH = ['vision_nodes', 'labels']


def labels_from_metadata(meta: dict[str, str]) -> list[str] | None:
    """Class names stored in an ONNX model's metadata (ours, or an Ultralytics export's).

    Raises ValueError for metadata that is too large, malformed, or not a list of names.
    """
    for key in (LABELS_METADATA_KEY, 'names'):
        if len(meta.get(key, '')) > MAX_MANIFEST_BYTES:
            raise ValueError(f'metadata {key} is larger than {MAX_MANIFEST_BYTES} bytes')
    if LABELS_METADATA_KEY in meta:
        names = json.loads(meta[LABELS_METADATA_KEY])
        if not isinstance(names, list):
            raise ValueError(f'{LABELS_METADATA_KEY} is not a list')
        return [str(v) for v in names]
    if 'names' in meta:  # Ultralytics writes str(dict)
        names = ast.literal_eval(meta['names'])
        if isinstance(names, dict):
            return [str(names[k]) for k in sorted(names)]
    return None


def labels_from_rt_info(model: Any) -> list[str] | None:
    """Class names stored in an OpenVINO model's runtime info (ours, or an ONNX's metadata)."""
    try:
        if model.has_rt_info(LABELS_RT_PATH):
            return [str(v) for v in json.loads(model.get_rt_info(LABELS_RT_PATH).astype(str))]
        framework = ['framework', LABELS_METADATA_KEY]
        if model.has_rt_info(framework):
            return [str(v) for v in json.loads(model.get_rt_info(framework).astype(str))]
        if model.has_rt_info(['framework', 'names']):  # an Ultralytics ONNX export
            names = ast.literal_eval(model.get_rt_info(['framework', 'names']).astype(str))
            if isinstance(names, dict):
                return [str(names[k]) for k in sorted(names)]
    except (ValueError, SyntaxError, TypeError, RuntimeError):
        return None
    return None
