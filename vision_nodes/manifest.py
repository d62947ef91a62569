"""Model manifests: YAML files describing one model, loaded into typed, validated objects.

A manifest names the model, its task, where its weights are, its input size and preprocessing,
its labels, the backends it supports and its default thresholds (detection). A task's own
blocks (``depth:`` for depth models) are left to :mod:`vision_nodes.tasks.registry`, which
loads manifests (``load_manifest``, ``resolve_manifest``): it hands this module the task
names and their blocks, and has each task file parse its own. Backend, precision and
architecture names come from the backend table (:mod:`vision_nodes.backends`). Every problem
found while loading raises :class:`ManifestError` naming the file and the field, in one
bounded line.

Manifests are untrusted input: the file is size-checked before it is read, its YAML parsed
by :mod:`.yaml_safety` (no anchors or aliases, nesting and node count bounded), every
number must be finite and within :mod:`vision_nodes.limits`, and every value quoted back in an
error is clipped.
"""

from __future__ import annotations

import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import yaml

from .backends import ARCHITECTURE_BACKENDS, ARCHITECTURES, BACKEND_NAMES, KNOWN_PRECISIONS
from .files import read_regular
from .limits import (MAX_DETECTIONS, MAX_INPUT_PIXELS, MAX_INPUT_SIDE, MAX_LABEL_CHARS,
                     MAX_LABELS, MAX_MANIFEST_BYTES, MAX_NAME_CHARS, MAX_PATH_CHARS,
                     MAX_PREPROCESSING_MAGNITUDE)
from .text import clip, show
from .yaml_safety import safe_yaml, yaml_problem

#: Every backend name a manifest may list (the backend table's; ``auto`` is a setting's value).
KNOWN_BACKENDS = BACKEND_NAMES
COLOR_ORDERS = ('rgb', 'bgr')
INTERPOLATIONS = ('linear', 'cubic')
#: Multiple the input size must be of, per architecture, when the manifest gives no ``stride``:
#: the YOLO networks' largest stride; a ViT's patch size (Depth Anything: 14).
DEFAULT_STRIDES = {'ultralytics': 32, 'onnx': 32, 'transformers': 14, 'openvino': 32}

#: Environment variable consulted when the ``model_dir`` parameter is empty.
MODEL_DIR_ENV = 'VISION_NODES_MODEL_DIR'
#: The development layout: weights in ``shared/models`` beside a source checkout.
CHECKOUT_MODEL_DIR = Path(__file__).resolve().parent.parent.parent / 'shared' / 'models'


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
    #: Resampling of the image to the input size: 'linear' (YOLO) or 'cubic' (Depth Anything).
    interpolation: str = 'linear'


@dataclass(frozen=True)
class Thresholds:
    """Detection's post-processing thresholds; node parameters override them.

    The one place of their defaults (and, in :data:`THRESHOLD_RANGES`, their ranges): the
    detection task's parameters (``tasks.detect``) read them too.
    """

    confidence: float = 0.25
    iou: float = 0.45
    max_detections: int = 300


#: Each threshold's accepted values, in a manifest and as a live parameter.
THRESHOLD_RANGES = {'confidence': (0.0, 1.0), 'iou': (0.0, 1.0),
                    'max_detections': (1, MAX_DETECTIONS)}


@dataclass(frozen=True)
class AccuracyBudget:
    """How much agreement with fp32 a reduced precision may lose (manifest block ``accuracy``).

    A reduced precision is measured against the same model at fp32 when first loaded
    (:mod:`.precision_check`: box mAP50-95 for detection, mask mAP for segmentation, OKS AP
    for pose, δ<1.25 for depth). ``precision: auto`` takes it only when its agreement is at
    least ``1 - max_drop``, else fp32; an explicit precision below the budget configures
    with a warning, or is refused with ``strict``.
    """

    #: Most agreement lost against fp32 (0..1). 0.05: bf16 YOLOv8n keeps 0.95 box mAP50-95.
    #: 0 asks for fp32's answers: no reduced precision meets it.
    max_drop: float = 0.05
    strict: bool = False
    #: Whether the manifest gave ``max_drop``: int8 is then quantized within it (NNCF's
    #: accuracy control); the default budget only judges what was built.
    declared: bool = False


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
    #: Folder of images reduced precisions are measured on against fp32 ('' = the
    #: calibration folder when it has enough images, else the default set). Resolves like
    #: ``weights``.
    validation_dir: str = ''
    accuracy: AccuracyBudget = field(default_factory=AccuracyBudget)
    source: Path | None = None
    #: The task's own blocks, parsed by the task file (:mod:`vision_nodes.tasks.registry`):
    #: (block name, value) pairs.
    task_blocks: tuple[tuple[str, Any], ...] = ()
    #: Input sides are multiples of this (32 for YOLO, the patch size 14 for Depth Anything).
    stride: int = 32
    #: Most frames one run of the model takes (several cameras batched into one inference).
    #: Not a manifest key: the pipeline sets it from the node's ``max_batch`` so that every
    #: artifact step (export axes, engine profile, cache keys) sees the batch range.
    max_batch: int = 1

    def block(self, name: str) -> Any:
        """Return the task's parsed block ``name`` (e.g. 'depth'); None when there is none."""
        return dict(self.task_blocks).get(name)

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


#: Top-level keys every manifest may have; the tasks' own blocks come with the task names.
_GENERIC_KEYS = ('name', 'task', 'weights', 'architecture', 'input_size', 'backends',
                 'preprocessing', 'labels', 'thresholds', 'rect', 'stride', 'precisions',
                 'calibration_dir', 'validation_dir', 'accuracy')
_REQUIRED = ('name', 'task', 'weights', 'input_size', 'backends')
#: A model name: a ROS 2 name token (it becomes a namespace and part of cache folder names).
_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')


def _fail(source: str, field_name: str, problem: str) -> ManifestError:
    return ManifestError(f'{clip(source)}: field `{clip(field_name, 80)}`: {problem}')


def _check_keys(source: str, prefix: str, data: dict, allowed: tuple[str, ...]) -> None:
    for key in data:  # the first unknown key in file order (keys may be of any YAML type)
        if key not in allowed:
            where = f'{prefix}.{clip(key, 60)}' if prefix else clip(key, 60)
            raise _fail(source, where,
                        f"unknown key (allowed here: {', '.join(sorted(allowed))})")


def _expect(source: str, name: str, value: Any, types: type | tuple[type, ...],
            what: str) -> Any:
    # bool is an int subclass: refuse it where a number is wanted.
    if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        raise _fail(source, name, f'expected {what}, got {show(value)}')
    if not isinstance(value, types):
        raise _fail(source, name, f'expected {what}, got {type(value).__name__} {show(value)}')
    return value


def choice(source: str, name: str, value: Any, choices: Sequence[str]) -> str:
    """Return ``value`` when it is one of ``choices`` (strings), else raise naming them."""
    if not isinstance(value, str) or value not in choices:
        raise _fail(source, name, f"{show(value)} is not one of {', '.join(choices)}")
    return value


def _number(source: str, name: str, value: Any, low: float, high: float,
            what: str = 'a number') -> float:
    """Return a finite int or float within [low, high] as float (inf, nan, 1e999 refused)."""
    _expect(source, name, value, (int, float), what)
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise _fail(source, name, f'{show(value)} is not a finite number')
    if not low <= number <= high:
        raise _fail(source, name, f'{show(value)} is outside {low:g}..{high:g}')
    return number


#: The helpers a task file parses its block with: one error format for every block.
field_error: Callable[[str, str, str], ManifestError] = _fail
check_keys = _check_keys
expect = _expect


def _number_triple(source: str, name: str, value: Any, low: float, high: float
                   ) -> tuple[float, float, float]:
    _expect(source, name, value, list, 'a list of 3 numbers')
    if len(value) != 3:
        raise _fail(source, name, f'expected 3 numbers, got {len(value)}')
    return tuple(_number(source, f'{name}[{i}]', v, low, high)  # type: ignore[return-value]
                 for i, v in enumerate(value))


def _parse_preprocessing(source: str, data: Any) -> Preprocessing:
    if data is None:
        return Preprocessing()
    _expect(source, 'preprocessing', data, dict, 'a mapping')
    allowed = ('letterbox', 'pad_value', 'color_order', 'scale', 'mean', 'std',
               'interpolation')
    _check_keys(source, 'preprocessing', data, allowed)
    kwargs: dict[str, Any] = {}
    if 'letterbox' in data:
        kwargs['letterbox'] = _expect(source, 'preprocessing.letterbox', data['letterbox'],
                                      bool, 'true or false')
    if 'pad_value' in data:
        pad = _expect(source, 'preprocessing.pad_value', data['pad_value'], int,
                      'an integer 0..255')
        if not 0 <= pad <= 255:
            raise _fail(source, 'preprocessing.pad_value', f'{show(pad)} is outside 0..255')
        kwargs['pad_value'] = pad
    for key, choices in (('color_order', COLOR_ORDERS), ('interpolation', INTERPOLATIONS)):
        if key in data:
            kwargs[key] = choice(source, f'preprocessing.{key}', data[key], choices)
    bound = MAX_PREPROCESSING_MAGNITUDE
    if 'scale' in data:
        scale = _number(source, 'preprocessing.scale', data['scale'], 0.0, bound)
        if scale <= 0:
            raise _fail(source, 'preprocessing.scale', f'{scale:g} must be > 0')
        kwargs['scale'] = scale
    if 'mean' in data:
        kwargs['mean'] = _number_triple(source, 'preprocessing.mean', data['mean'],
                                        -bound, bound)
    if 'std' in data:
        std = _number_triple(source, 'preprocessing.std', data['std'], 0.0, bound)
        if any(v < 1e-6 for v in std):
            raise _fail(source, 'preprocessing.std', 'values must be >= 1e-6 (they divide)')
        kwargs['std'] = std
    return Preprocessing(**kwargs)


def _parse_accuracy(source: str, data: Any) -> AccuracyBudget:
    if data is None:
        return AccuracyBudget()
    _expect(source, 'accuracy', data, dict, 'a mapping (max_drop, strict)')
    _check_keys(source, 'accuracy', data, ('max_drop', 'strict'))
    kwargs: dict[str, Any] = {}
    if 'max_drop' in data:
        kwargs['max_drop'] = _number(source, 'accuracy.max_drop', data['max_drop'], 0.0, 1.0,
                                     'a number in 0..1')
        kwargs['declared'] = True
    if 'strict' in data:
        kwargs['strict'] = _expect(source, 'accuracy.strict', data['strict'], bool,
                                   'true or false')
    return AccuracyBudget(**kwargs)


def _path_field(source: str, name: str, data: dict) -> str:
    value = _expect(source, name, data.get(name, ''), str, 'a folder path string')
    if len(value) > MAX_PATH_CHARS or '\0' in value:
        raise _fail(source, name, f'{show(value, 40)} is not a usable path (at most '
                    f'{MAX_PATH_CHARS} characters, no NUL)')
    return value


def _parse_thresholds(source: str, data: Any) -> Thresholds:
    if data is None:
        return Thresholds()
    _expect(source, 'thresholds', data, dict, 'a mapping')
    _check_keys(source, 'thresholds', data, ('confidence', 'iou', 'max_detections'))
    kwargs: dict[str, Any] = {}
    for key in ('confidence', 'iou'):
        if key in data:
            low, high = THRESHOLD_RANGES[key]
            kwargs[key] = _number(source, f'thresholds.{key}', data[key], low, high,
                                  f'a number in {low:g}..{high:g}')
    if 'max_detections' in data:
        value = _expect(source, 'thresholds.max_detections', data['max_detections'], int,
                        'a positive integer')
        low, high = THRESHOLD_RANGES['max_detections']
        if not low <= value <= high:
            raise _fail(source, 'thresholds.max_detections', f'{show(value)} is outside '
                        f'{low}..{high}')
        kwargs['max_detections'] = value
    return Thresholds(**kwargs)


def _check_task_blocks(source: str, task: str, data: dict,
                       blocks: Mapping[str, tuple[str, ...]]) -> None:
    """Refuse a block of another task (``blocks``: each task's own top-level blocks)."""
    for key in data:
        if key not in _GENERIC_KEYS and key not in blocks[task]:
            owners = [name for name, own in blocks.items() if key in own]
            raise _fail(source, key, f"only {' or '.join(owners)} models have this block "
                        f"(task is '{task}')")


def _parse_name(source: str, value: Any) -> str:
    name = _expect(source, 'name', value, str, 'a string')
    if not name.strip():
        raise _fail(source, 'name', 'must not be empty')
    if len(name) > MAX_NAME_CHARS:
        raise _fail(source, 'name', f'{show(name, 40)} is {len(name)} characters long; '
                    f'use at most {MAX_NAME_CHARS}')
    if not _NAME.fullmatch(name):
        raise _fail(source, 'name', f'{show(name)} is not a ROS name token: use letters, '
                    'digits and underscores, not starting with a digit (e.g. yolov8n_int8)')
    return name


def _parse_input_size(source: str, value: Any, stride: int = 32,
                      default_note: str = '') -> tuple[int, int]:
    size = [value, value] if isinstance(value, int) and not isinstance(value, bool) else value
    _expect(source, 'input_size', size, list, 'an integer or [height, width]')
    if len(size) != 2:
        raise _fail(source, 'input_size', f'expected [height, width], got {show(size)}')
    for i, v in enumerate(size):
        _expect(source, f'input_size[{i}]', v, int, 'a positive integer')
        if v < stride or v % stride:
            raise _fail(source, f'input_size[{i}]',
                        f'{show(v)} must be a multiple of {stride}, >= {stride}{default_note}')
        if v > MAX_INPUT_SIDE:
            raise _fail(source, f'input_size[{i}]',
                        f'{show(v)} is larger than {MAX_INPUT_SIDE}, the largest side accepted')
    if size[0] * size[1] > MAX_INPUT_PIXELS:
        raise _fail(source, 'input_size', f'{size[0]} x {size[1]} is more than the '
                    f'{MAX_INPUT_PIXELS} pixels accepted (e.g. 2048 x 2048)')
    return int(size[0]), int(size[1])


def _parse_labels(source: str, value: Any) -> tuple[str, ...] | None:
    if isinstance(value, str) and value == 'from_weights':
        return None
    _expect(source, 'labels', value, list, "a list of names or 'from_weights'")
    if not value:
        raise _fail(source, 'labels', 'an empty list names no class: list one name per class '
                    'the model scores, or write `labels: from_weights` to read them from the '
                    'weights')
    if len(value) > MAX_LABELS:
        raise _fail(source, 'labels', f'{len(value)} names; at most {MAX_LABELS} are accepted')
    for i, v in enumerate(value):
        _expect(source, f'labels[{i}]', v, str, 'a string')
        if len(v) > MAX_LABEL_CHARS:
            raise _fail(source, f'labels[{i}]', f'{show(v, 40)} is {len(v)} characters long; '
                        f'use at most {MAX_LABEL_CHARS}')
    return tuple(value)


def parse_generic(data: Any, source: str, path: Path | None,
                  blocks: Mapping[str, tuple[str, ...]]) -> ModelManifest:
    """Validate a manifest already parsed from YAML; its task's blocks are left out.

    ``blocks`` names each task and the top-level blocks its manifests may have (the task
    registry's); :func:`vision_nodes.tasks.registry.parse_manifest` parses them.
    """
    if not isinstance(data, dict):
        raise ManifestError(f'{clip(source)}: expected a mapping at the top level, '
                            f'got {type(data).__name__}')
    _check_keys(source, '', data, _GENERIC_KEYS + tuple(dict.fromkeys(
        block for own in blocks.values() for block in own)))
    for key in _REQUIRED:
        if key not in data or data[key] is None:
            raise _fail(source, key, 'missing (required)')

    name = _parse_name(source, data['name'])
    task = choice(source, 'task', data['task'], tuple(blocks))
    weights = _expect(source, 'weights', data['weights'], str, 'a path string')
    if not weights.strip():
        raise _fail(source, 'weights', 'must not be empty')
    if len(weights) > MAX_PATH_CHARS or '\0' in weights:
        raise _fail(source, 'weights', f'{show(weights, 40)} is not a usable path (at most '
                    f'{MAX_PATH_CHARS} characters, no NUL)')

    architecture = data.get('architecture')
    if architecture is None:
        architecture = {'.onnx': 'onnx', '.xml': 'openvino'}.get(
            Path(weights).suffix.lower(), 'ultralytics')
    architecture = choice(source, 'architecture', architecture, ARCHITECTURES)

    stride = data.get('stride', DEFAULT_STRIDES[architecture])
    _expect(source, 'stride', stride, int, 'a positive integer')
    if not 1 <= stride <= 1024:
        raise _fail(source, 'stride', f'{show(stride)} is outside 1..1024')
    note = '' if 'stride' in data else (f" (the default stride of architecture "
                                        f"'{architecture}'; set `stride` for another)")
    size = _parse_input_size(source, data['input_size'], stride, note)

    backends = _expect(source, 'backends', data['backends'], list, 'a list of backend names')
    if not backends:
        raise _fail(source, 'backends', 'must name at least one backend')
    for i, b in enumerate(backends):
        if not isinstance(b, str) or b not in KNOWN_BACKENDS:
            raise _fail(source, f'backends[{i}]',
                        f"unknown backend {show(b)} (known: {', '.join(KNOWN_BACKENDS)})")
    if architecture in ARCHITECTURE_BACKENDS:
        allowed = ARCHITECTURE_BACKENDS[architecture]
        wrong = [b for b in dict.fromkeys(backends) if b not in allowed]
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
        for i, value in enumerate(precisions):
            if not isinstance(value, str) or value not in KNOWN_PRECISIONS:
                raise _fail(source, f'precisions[{i}]', f'unknown precision {show(value)} '
                            f"(known: {', '.join(KNOWN_PRECISIONS)})")
        precisions = tuple(dict.fromkeys(precisions))
    calibration_dir = _path_field(source, 'calibration_dir', data)

    manifest = ModelManifest(
        name=name, task=task, weights=weights, architecture=architecture,
        input_size=size, backends=tuple(dict.fromkeys(backends)),
        preprocessing=_parse_preprocessing(source, data.get('preprocessing')),
        labels=_parse_labels(source, data.get('labels', 'from_weights')),
        thresholds=_parse_thresholds(source, data.get('thresholds')),
        rect=_expect(source, 'rect', data.get('rect', True), bool, 'true or false'),
        precisions=precisions, calibration_dir=calibration_dir,
        validation_dir=_path_field(source, 'validation_dir', data),
        accuracy=_parse_accuracy(source, data.get('accuracy')), source=path, stride=stride)
    _check_task_blocks(source, task, data, blocks)
    return manifest


def read_manifest(path: Path) -> Any:
    """Return a manifest file's YAML: a regular file of bounded size, UTF-8, safe YAML."""
    raw = read_regular(path, MAX_MANIFEST_BYTES, 'manifest', ManifestError)
    try:
        text = raw.decode('utf-8-sig')
    except UnicodeDecodeError as exc:
        raise ManifestError(f'{clip(path)}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at '
                            f'offset {exc.start}): save the manifest as UTF-8') from None
    try:
        data = safe_yaml(text)
    except ValueError as exc:  # our shape checks, and ints past Python's digit limit
        raise ManifestError(f'{clip(path)}: not accepted as a manifest: {clip(exc)}') from None
    except (yaml.YAMLError, RecursionError, TypeError) as exc:
        raise ManifestError(f'{clip(path)}: not valid YAML: {yaml_problem(exc)}') from None
    return data


def use_default_model_dir() -> Path | None:
    """Give this process (and the nodes it starts) the default model folder; return it.

    ``$VISION_NODES_MODEL_DIR`` when set; else ``shared/models`` beside a source checkout (the
    development layout: the one ``vision_nodes`` is imported from, else the one holding the
    running script, as with a colcon workspace sourced), which is then exported so that node
    processes started from here resolve weights the same way. The demo, the benchmarks, the
    soak script and the tests call this first, so they all find the same weights without any
    setting.
    """
    value = os.environ.get(MODEL_DIR_ENV)
    if value:
        return Path(os.path.expanduser(value))
    for folder in (CHECKOUT_MODEL_DIR, _script_checkout_models()):
        if folder is not None and folder.is_dir():
            os.environ[MODEL_DIR_ENV] = str(folder)
            return folder
    return None


def _script_checkout_models() -> Path | None:
    """``shared/models`` beside the checkout that holds the running script, if any.

    With a colcon workspace sourced, ``vision_nodes`` is imported from ``install/`` (no
    ``shared/`` beside it), yet a benchmark or a tool run from a checkout still has the
    development layout around it.
    """
    script = sys.argv[0] if sys.argv else ''
    if not script or script.startswith('-'):
        return None
    try:
        folders = Path(script).resolve().parents
    except (OSError, RuntimeError, ValueError):
        return None
    for folder in folders:
        if (folder / 'package.xml').is_file() and (folder / 'vision_nodes').is_dir():
            return folder.parent / 'shared' / 'models'
    return None


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


def _exists(path: Path) -> bool:
    """Whether anything is at ``path`` (a name too long for the file system is nothing)."""
    try:
        os.stat(path)
    except (OSError, ValueError):
        return False
    return True


def find_manifest(model: str, search_dirs: list[Path] | None = None) -> Path:
    """Return the manifest file ``model`` names: a path, or a name under ``config/models``."""
    if not model:
        raise ManifestError('parameter `model` is empty: give a manifest name or a path')
    if '\0' in model:
        raise ManifestError(f'parameter `model` {show(model)} holds a NUL character')
    candidate = Path(os.path.expanduser(model))
    if candidate.suffix in ('.yaml', '.yml') or os.sep in model:
        if not _exists(candidate):
            raise ManifestError(f'{clip(candidate)}: manifest file not found')
        return candidate
    dirs = search_dirs or default_manifest_dirs()
    for folder in dirs:
        path = folder / f'{model}.yaml'
        if _exists(path):
            return path
    names = available_manifests(dirs)
    raise ManifestError(
        f"no manifest named {show(model)} (available: {clip(', '.join(names) or 'none')}; "
        f"searched {clip(', '.join(str(d) for d in dirs))})")
