"""ONNX → OpenVINO IR, through the engine cache: one step of the artifact chain.

The parent is the cached ONNX export of PyTorch weights (``onnx_export``) or, for a manifest
whose weights are an ``.onnx``, that file. The IR entry's key holds the parent's SHA-256 (of the
exact bytes converted), the OpenVINO version and this converter's version, so a new export, a
new OpenVINO or a changed conversion each give a new entry. The IR keeps fp32 weights: fp32
must be exact, and the reduced precisions are chosen when the model is compiled.

An IR given as the manifest's weights (an ``.xml``, or a folder holding one) is not converted:
:func:`read_ir_source` finds its files and class names.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from .cache import CacheEntry, ArtifactCache
from .labels import LABELS_RT_PATH, labels_from_rt_info
from .onnx_export import ONNX_FILE, ensure_onnx
from ..loaders import ModelLoadError, check_weights, read_weights
from ..files import read_regular
from ..limits import MAX_MODEL_METADATA_BYTES
from ..manifest import ModelManifest
from ..text import clip, show_path
from ..yaml_safety import safe_yaml

#: Bump whenever the IR would change for the same parent and OpenVINO version.
CONVERTER_VERSION = 1
IR_XML = 'model.xml'
IR_BIN = 'model.bin'

Log = Callable[[str], None]


def openvino_version() -> str:
    """Return the installed OpenVINO's full version (part of every OpenVINO artifact's key)."""
    import openvino

    return openvino.get_version()


def ir_cache_fields(parent_sha256: str, parent_kind: str) -> dict[str, Any]:
    """Return the fields that make up the IR artifact's cache key."""
    return {
        'parent_sha256': parent_sha256,
        'parent_kind': parent_kind,
        'openvino': openvino_version(),
        'converter': f'vision_nodes-openvino/{CONVERTER_VERSION}',
        'weights': 'f32',
    }


def convert_onnx(onnx_bytes: bytes, folder: Path) -> dict[str, Any]:
    """Convert an ONNX model (its bytes) into ``folder/model.xml`` + ``.bin``; return versions."""
    import openvino as ov

    with tempfile.TemporaryDirectory(prefix='vision_nodes_ov_') as tmp:
        # convert_model reads files; this one is written from the bytes that were verified.
        source = Path(tmp) / ONNX_FILE
        source.write_bytes(onnx_bytes)
        try:
            model = ov.convert_model(str(source))
        except Exception as exc:  # noqa: BLE001 - OpenVINO raises plain errors of many lines
            raise ModelLoadError(conversion_refusal(exc)) from None
    labels = labels_from_rt_info(model)
    if labels:
        model.set_rt_info(json.dumps(labels), LABELS_RT_PATH)
    ov.save_model(model, str(folder / IR_XML), compress_to_fp16=False)
    return {'openvino': openvino_version()}


def conversion_refusal(exc: BaseException) -> str:
    """One line saying why OpenVINO could not convert an ONNX model, and what to do instead.

    OpenVINO's messages span many lines (a check, the node, the shapes): the line naming the
    problem is kept. NMS-free (end-to-end) -seg and -pose exports of Ultralytics gather their
    rows from slices of one tensor, a pattern OpenVINO's conversion refuses; the same weights
    as a ``.pt`` are exported here in a form it converts.
    """
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    reason = next((line for line in lines if line.startswith('Shapes ')), lines[0] if lines
                  else type(exc).__name__)
    text = f'OpenVINO {openvino_version()} cannot convert this ONNX model ({clip(reason, 160)})'
    if 'GatherElements' in str(exc):
        return (text + ': an NMS-free (end-to-end) -seg or -pose export gathers its top-k rows '
                'from slices, which OpenVINO refuses; give the manifest the .pt weights (they '
                'are exported in a form OpenVINO converts) or use backend onnx')
    return text + ': check the file loads in ONNX Runtime, or use backend onnx'


def ensure_openvino_ir(manifest: ModelManifest, weights: Path, cache: ArtifactCache,
                       log: Log) -> CacheEntry:
    """Return the cached IR of the manifest's model (exporting to ONNX first if needed)."""
    if manifest.architecture == 'onnx':
        onnx_bytes = read_weights(weights)
        parent_kind = 'onnx-file'
    else:
        onnx_bytes = ensure_onnx(manifest, weights, cache, log=log).read_verified(ONNX_FILE)
        parent_kind = 'onnx-export'
    fields = ir_cache_fields(hashlib.sha256(onnx_bytes).hexdigest(), parent_kind)

    def build(folder: Path) -> None:
        log('artifacts: converting the ONNX model to OpenVINO IR')
        started = time.monotonic()
        versions = convert_onnx(onnx_bytes, folder)
        (folder / 'tools.json').write_text(json.dumps(versions, indent=2))
        log(f'artifacts: OpenVINO IR ready in {time.monotonic() - started:.1f} s')

    return cache.get_or_build(manifest.name, 'openvino', fields, build, files=(IR_XML, IR_BIN))


@dataclass(frozen=True)
class IrSource:
    """An OpenVINO IR given as the manifest's weights: its two files and its class names."""

    xml: Path
    bin: Path
    labels: list[str] | None


def read_ir_source(weights: Path) -> IrSource:
    """Find the ``.xml``/``.bin`` pair of an IR given as a file or a folder, and its labels.

    Class names come from a ``metadata.yaml`` beside the IR (what Ultralytics writes), if any.
    """
    if weights.is_dir():
        xmls = sorted(weights.glob('*.xml'))
        if len(xmls) != 1:
            raise ModelLoadError(
                f"weights folder '{clip(str(weights))}' must hold exactly one OpenVINO .xml "
                f'(found {len(xmls)}); or name the .xml itself in the manifest')
        xml = xmls[0]
    else:
        xml = check_weights(weights)
        if xml.suffix.lower() != '.xml':
            raise ModelLoadError(f"weights '{clip(str(weights))}' is not an OpenVINO IR "
                                 "(.xml with its .bin, or a folder holding them)")
    bin_path = xml.with_suffix('.bin')
    if not bin_path.is_file():
        raise ModelLoadError(f"OpenVINO IR '{clip(str(xml))}' has no weights file "
                             f"'{bin_path.name}' beside it")
    return IrSource(xml, bin_path, _metadata_labels(xml.parent / 'metadata.yaml'))


def _metadata_labels(path: Path) -> list[str] | None:
    """Class names from an Ultralytics ``metadata.yaml`` (bounded, like a manifest), if any."""
    if not os.path.lexists(path):
        return None
    raw = read_regular(path, MAX_MODEL_METADATA_BYTES, 'metadata.yaml', ModelLoadError)
    try:
        names = (safe_yaml(raw.decode('utf-8-sig')) or {}).get('names')
    except (ValueError, yaml.YAMLError, AttributeError, RecursionError) as exc:
        raise ModelLoadError(f"cannot read class names from {show_path(path)}: "
                             f'{clip(str(exc))}') from None
    if isinstance(names, dict):
        return [str(names[k]) for k in sorted(names)]
    if isinstance(names, list):
        return [str(n) for n in names]
    return None
