"""Model manifests: YAML files describing one model, loaded into typed, validated objects.

A manifest names the model, its task, where its weights are, its input size and preprocessing,
its labels, the backends it supports and its default thresholds. Every problem found while
loading raises :class:`ManifestError` naming the file and the field.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

#: Every backend name a manifest may list (``auto`` is a node parameter value, not a backend).
KNOWN_BACKENDS = ('cpu', 'cuda', 'rocm', 'onnx', 'tensorrt', 'openvino')
KNOWN_TASKS = ('detect', 'depth')
#: How weights load: PyTorch checkpoints (ultralytics), an .onnx file, or an OpenVINO IR
#: (an .xml with its .bin, or a folder holding one, e.g. an Ultralytics ``*_openvino_model``).
KNOWN_ARCHITECTURES = ('ultralytics', 'onnx', 'openvino')
#: Precisions a manifest may restrict itself to (the ``precision`` setting adds ``auto``).
KNOWN_PRECISIONS = ('fp32', 'fp16', 'int8')
#: Backends that can run each artifact-only architecture (PyTorch needs PyTorch weights).
ARCHITECTURE_BACKENDS = {'onnx': ('onnx', 'tensorrt', 'openvino'), 'openvino': ('openvino',)}
COLOR_ORDERS = ('rgb', 'bgr')

#: Environment variable consulted when the ``model_dir`` parameter is empty.
MODEL_DIR_ENV = 'VISION_NODES_MODEL_DIR'


class ManifestError(ValueError):
    """A manifest that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class Preprocessing:
    """How an image becomes the network's input tensor."""

    letterbox: bool = True
    pad_value: int = 114
    color_order: str = 'rgb'
    scale: float = 1.0 / 255.0
    mean: tuple[float, float, float] = (0.0, 0.0, 0.0)
    std: tuple[float, float, float] = (1.0, 1.0, 1.0)


@dataclass(frozen=True)
class Thresholds:
    """Default post-processing thresholds; node parameters override them."""

    confidence: float = 0.25
    iou: float = 0.45
    max_detections: int = 300


@dataclass(frozen=True)
class ModelManifest:
    """One model, as described by its manifest file."""

    name: str
    task: str
    weights: str
    architecture: str
    input_size: tuple[int, int]  # (height, width)
    backends: tuple[str, ...]
    preprocessing: Preprocessing = field(default_factory=Preprocessing)
    labels: tuple[str, ...] | None = None  # None: read the names from the weights
    thresholds: Thresholds = field(default_factory=Thresholds)
    #: Rect inference: where the runtime allows it, a letterboxed model runs at the smallest
    #: stride multiple that holds the camera's aspect ratio instead of the full input_size.
    rect: bool = True
    #: Precisions this model may run at (None: whatever the backend can do). A pre-quantized
    #: INT8 IR, for example, only runs int8.
    precisions: tuple[str, ...] | None = None
    #: Folder of calibration images for int8 quantization ('' = none; the ``calibration_dir``
    #: setting of the node overrides it). Relative paths resolve like ``weights``.
    calibration_dir: str = ''
    source: Path | None = None

    def resolve_path(self, value: str, model_dir: str | os.PathLike | None = None) -> Path:
        """Resolve a path of this manifest (weights, calibration images).

        Absolute paths are used as they are. Relative ones resolve against ``model_dir``,
        else the ``VISION_NODES_MODEL_DIR`` environment variable, else the manifest's folder.
        """
        path = Path(os.path.expanduser(value))
        if path.is_absolute():
            return path
        base = model_dir or os.environ.get(MODEL_DIR_ENV) or (
            self.source.parent if self.source else Path.cwd())
        return Path(os.path.expanduser(str(base))) / path

    def weights_path(self, model_dir: str | os.PathLike | None = None) -> Path:
        """Resolve the weights path (see :meth:`resolve_path`)."""
        return self.resolve_path(self.weights, model_dir)


_TOP_KEYS = {'name', 'task', 'weights', 'architecture', 'input_size', 'backends',
             'preprocessing', 'labels', 'thresholds', 'rect', 'precisions', 'calibration_dir'}
_REQUIRED = ('name', 'task', 'weights', 'input_size', 'backends')


def _fail(source: str, field_name: str, problem: str) -> ManifestError:
    return ManifestError(f'{source}: field `{field_name}`: {problem}')


def _check_keys(source: str, prefix: str, data: dict, allowed: set[str]) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        where = f'{prefix}.{unknown[0]}' if prefix else unknown[0]
        raise _fail(source, where,
                    f"unknown key (allowed here: {', '.join(sorted(allowed))})")


def _expect(source: str, name: str, value: Any, types: type | tuple[type, ...],
            what: str) -> Any:
    # bool is an int subclass: refuse it where a number is wanted.
    if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        raise _fail(source, name, f'expected {what}, got {value!r}')
    if not isinstance(value, types):
        raise _fail(source, name, f'expected {what}, got {type(value).__name__} {value!r}')
    return value


def _number_triple(source: str, name: str, value: Any) -> tuple[float, float, float]:
    _expect(source, name, value, list, 'a list of 3 numbers')
    if len(value) != 3:
        raise _fail(source, name, f'expected 3 numbers, got {len(value)}')
    return tuple(float(_expect(source, f'{name}[{i}]', v, (int, float), 'a number'))
                 for i, v in enumerate(value))


def _parse_preprocessing(source: str, data: Any) -> Preprocessing:
    if data is None:
        return Preprocessing()
    _expect(source, 'preprocessing', data, dict, 'a mapping')
    allowed = {'letterbox', 'pad_value', 'color_order', 'scale', 'mean', 'std'}
    _check_keys(source, 'preprocessing', data, allowed)
    kwargs: dict[str, Any] = {}
    if 'letterbox' in data:
        kwargs['letterbox'] = _expect(source, 'preprocessing.letterbox', data['letterbox'],
                                      bool, 'true or false')
    if 'pad_value' in data:
        pad = _expect(source, 'preprocessing.pad_value', data['pad_value'], int,
                      'an integer 0..255')
        if not 0 <= pad <= 255:
            raise _fail(source, 'preprocessing.pad_value', f'{pad} is outside 0..255')
        kwargs['pad_value'] = pad
    if 'color_order' in data:
        order = data['color_order']
        if order not in COLOR_ORDERS:
            raise _fail(source, 'preprocessing.color_order',
                        f"{order!r} is not one of {', '.join(COLOR_ORDERS)}")
        kwargs['color_order'] = order
    if 'scale' in data:
        scale = float(_expect(source, 'preprocessing.scale', data['scale'], (int, float),
                              'a number'))
        if scale <= 0:
            raise _fail(source, 'preprocessing.scale', f'{scale} must be > 0')
        kwargs['scale'] = scale
    for key in ('mean', 'std'):
        if key in data:
            kwargs[key] = _number_triple(source, f'preprocessing.{key}', data[key])
    if 'std' in kwargs and any(v == 0 for v in kwargs['std']):
        raise _fail(source, 'preprocessing.std', 'values must be non-zero')
    return Preprocessing(**kwargs)


def _parse_thresholds(source: str, data: Any) -> Thresholds:
    if data is None:
        return Thresholds()
    _expect(source, 'thresholds', data, dict, 'a mapping')
    _check_keys(source, 'thresholds', data, {'confidence', 'iou', 'max_detections'})
    kwargs: dict[str, Any] = {}
    for key in ('confidence', 'iou'):
        if key in data:
            value = float(_expect(source, f'thresholds.{key}', data[key], (int, float),
                                  'a number in 0..1'))
            if not 0.0 <= value <= 1.0:
                raise _fail(source, f'thresholds.{key}', f'{value} is outside 0..1')
            kwargs[key] = value
    if 'max_detections' in data:
        value = _expect(source, 'thresholds.max_detections', data['max_detections'], int,
                        'a positive integer')
        if value < 1:
            raise _fail(source, 'thresholds.max_detections', f'{value} must be >= 1')
        kwargs['max_detections'] = value
    return Thresholds(**kwargs)


def parse_manifest(data: Any, source: str = '<manifest>', path: Path | None = None
                   ) -> ModelManifest:
    """Validate a manifest already parsed from YAML and build a :class:`ModelManifest`."""
    if not isinstance(data, dict):
        raise ManifestError(f'{source}: expected a mapping at the top level, '
                            f'got {type(data).__name__}')
    _check_keys(source, '', data, _TOP_KEYS)
    for key in _REQUIRED:
        if key not in data or data[key] is None:
            raise _fail(source, key, 'missing (required)')

    name = _expect(source, 'name', data['name'], str, 'a string')
    if not name.strip():
        raise _fail(source, 'name', 'must not be empty')
    task = data['task']
    if task not in KNOWN_TASKS:
        raise _fail(source, 'task', f"{task!r} is not one of {', '.join(KNOWN_TASKS)}")
    weights = _expect(source, 'weights', data['weights'], str, 'a path string')
    if not weights.strip():
        raise _fail(source, 'weights', 'must not be empty')

    architecture = data.get('architecture')
    if architecture is None:
        architecture = {'.onnx': 'onnx', '.xml': 'openvino'}.get(
            Path(weights).suffix.lower(), 'ultralytics')
    if architecture not in KNOWN_ARCHITECTURES:
        raise _fail(source, 'architecture',
                    f"{architecture!r} is not one of {', '.join(KNOWN_ARCHITECTURES)}")

    size = data['input_size']
    if isinstance(size, int) and not isinstance(size, bool):
        size = [size, size]
    _expect(source, 'input_size', size, list, 'an integer or [height, width]')
    if len(size) != 2:
        raise _fail(source, 'input_size', f'expected [height, width], got {size!r}')
    for i, v in enumerate(size):
        _expect(source, f'input_size[{i}]', v, int, 'a positive integer')
        if v < 32 or v % 32:
            raise _fail(source, f'input_size[{i}]', f'{v} must be a multiple of 32, >= 32')

    backends = _expect(source, 'backends', data['backends'], list, 'a list of backend names')
    if not backends:
        raise _fail(source, 'backends', 'must name at least one backend')
    for i, b in enumerate(backends):
        if b not in KNOWN_BACKENDS:
            raise _fail(source, f'backends[{i}]',
                        f"unknown backend {b!r} (known: {', '.join(KNOWN_BACKENDS)})")
    if architecture in ARCHITECTURE_BACKENDS:
        allowed = ARCHITECTURE_BACKENDS[architecture]
        wrong = [b for b in backends if b not in allowed]
        if wrong:
            raise _fail(source, 'backends',
                        f"{', '.join(wrong)} cannot run '{architecture}' weights (they "
                        f"support {', '.join(allowed)}; PyTorch backends need PyTorch weights)")

    precisions = data.get('precisions')
    if precisions is not None:
        _expect(source, 'precisions', precisions, list, 'a list of precisions')
        if not precisions:
            raise _fail(source, 'precisions', 'must name at least one precision (or leave '
                        'the field out)')
        for i, p in enumerate(precisions):
            if p not in KNOWN_PRECISIONS:
                raise _fail(source, f'precisions[{i}]',
                            f"unknown precision {p!r} (known: {', '.join(KNOWN_PRECISIONS)})")
        precisions = tuple(dict.fromkeys(precisions))
    calibration_dir = _expect(source, 'calibration_dir', data.get('calibration_dir', ''), str,
                              'a folder path string')

    labels = data.get('labels', 'from_weights')
    if labels == 'from_weights':
        labels_t = None
    else:
        _expect(source, 'labels', labels, list, "a list of names or 'from_weights'")
        for i, v in enumerate(labels):
            _expect(source, f'labels[{i}]', v, str, 'a string')
        labels_t = tuple(labels)

    return ModelManifest(
        name=name, task=task, weights=weights, architecture=architecture,
        input_size=(int(size[0]), int(size[1])), backends=tuple(dict.fromkeys(backends)),
        preprocessing=_parse_preprocessing(source, data.get('preprocessing')),
        labels=labels_t,
        thresholds=_parse_thresholds(source, data.get('thresholds')),
        rect=_expect(source, 'rect', data.get('rect', True), bool, 'true or false'),
        precisions=precisions, calibration_dir=calibration_dir, source=path)


def load_manifest(path: str | os.PathLike) -> ModelManifest:
    """Read and validate one manifest file."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ManifestError(f'{path}: cannot read manifest: {exc.strerror or exc}') from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ManifestError(f'{path}: not valid YAML: {exc}') from exc
    return parse_manifest(data, str(path), path.resolve())


def default_manifest_dirs() -> list[Path]:
    """Folders searched for manifest names.

    A source checkout's ``config/models`` first (editable and symlink installs edit in
    place), then the installed ``share/vision_nodes/config/models``.
    """
    dirs: list[Path] = []
    source = Path(__file__).resolve().parent.parent / 'config' / 'models'
    if source.is_dir():
        dirs.append(source)
    try:
        from ament_index_python.packages import get_package_share_directory

        dirs.append(Path(get_package_share_directory('vision_nodes')) / 'config' / 'models')
    except Exception:  # noqa: BLE001 - not installed in an ament prefix
        pass
    return dirs


def available_manifests(search_dirs: list[Path] | None = None) -> list[str]:
    """Names of the manifests found in ``search_dirs`` (default: :func:`default_manifest_dirs`)."""
    names: set[str] = set()
    for folder in search_dirs or default_manifest_dirs():
        if folder.is_dir():
            names.update(p.stem for p in folder.glob('*.yaml'))
    return sorted(names)


def resolve_manifest(model: str, search_dirs: list[Path] | None = None) -> ModelManifest:
    """Load a manifest given a path to a file or the name of one under ``config/models``."""
    if not model:
        raise ManifestError('parameter `model` is empty: give a manifest name or a path')
    candidate = Path(os.path.expanduser(model))
    if candidate.suffix in ('.yaml', '.yml') or os.sep in model:
        if not candidate.is_file():
            raise ManifestError(f'{candidate}: manifest file not found')
        return load_manifest(candidate)
    dirs = search_dirs or default_manifest_dirs()
    for folder in dirs:
        path = folder / f'{model}.yaml'
        if path.is_file():
            return load_manifest(path)
    names = available_manifests(dirs)
    raise ManifestError(
        f"no manifest named '{model}' (available: {', '.join(names) or 'none'}; "
        f"searched {', '.join(str(d) for d in dirs)})")
