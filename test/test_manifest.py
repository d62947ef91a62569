"""Tests for vision_nodes.manifest: loading, validation errors and weights resolution."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from vision_nodes.manifest import (
    MODEL_DIR_ENV,
    ManifestError,
    load_manifest,
    resolve_manifest,
)

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / 'config' / 'models' / 'yolov8n.yaml'

VALID: dict[str, Any] = {
    'name': 'tiny',
    'task': 'detect',
    'weights': 'tiny.pt',
    'architecture': 'ultralytics',
    'input_size': [320, 640],
    'preprocessing': {
        'letterbox': False,
        'pad_value': 0,
        'color_order': 'bgr',
        'scale': 1.0,
        'mean': [1, 2, 3],
        'std': [0.5, 0.25, 2],
    },
    'labels': ['cat', 'dog'],
    'backends': ['cpu', 'onnx'],
    'thresholds': {'confidence': 0.5, 'iou': 0.6, 'max_detections': 10},
}


def _write(folder: Path, data: Any, name: str = 'model.yaml') -> Path:
    path = folder / name
    path.write_text(yaml.safe_dump(data))
    return path


def test_shipped_manifest() -> None:
    m = load_manifest(SHIPPED)
    assert m.name == 'yolov8n'
    assert m.task == 'detect'
    assert m.weights == 'yolov8n.pt'
    assert m.architecture == 'ultralytics'
    assert m.input_size == (640, 640)
    assert m.backends == ('cpu', 'cuda', 'rocm', 'onnx', 'openvino')
    assert m.precisions is None and m.calibration_dir == '' and m.rect is True
    assert m.labels is None
    assert m.preprocessing.letterbox is True
    assert m.preprocessing.pad_value == 114
    assert m.preprocessing.color_order == 'rgb'
    assert m.preprocessing.scale == pytest.approx(1 / 255)
    assert m.preprocessing.mean == (0.0, 0.0, 0.0)
    assert m.preprocessing.std == (1.0, 1.0, 1.0)
    assert (m.thresholds.confidence, m.thresholds.iou, m.thresholds.max_detections) == (
        0.25, 0.45, 300)
    assert m.source == SHIPPED.resolve()


def test_full_manifest_fields(tmp_path: Path) -> None:
    m = load_manifest(_write(tmp_path, VALID))
    assert m.input_size == (320, 640)
    assert m.backends == ('cpu', 'onnx')
    assert m.labels == ('cat', 'dog')
    p = m.preprocessing
    assert (p.letterbox, p.pad_value, p.color_order, p.scale) == (False, 0, 'bgr', 1.0)
    assert p.mean == (1.0, 2.0, 3.0)
    assert p.std == (0.5, 0.25, 2.0)
    assert (m.thresholds.confidence, m.thresholds.iou, m.thresholds.max_detections) == (
        0.5, 0.6, 10)


def test_defaults_and_shorthands(tmp_path: Path) -> None:
    data = {'name': 'x', 'task': 'detect', 'weights': 'x.onnx', 'input_size': 416,
            'backends': ['onnx', 'onnx', 'tensorrt']}
    m = load_manifest(_write(tmp_path, data))
    assert m.input_size == (416, 416)
    assert m.architecture == 'onnx'  # inferred from the .onnx suffix
    assert m.backends == ('onnx', 'tensorrt')  # duplicates dropped, order kept
    assert m.labels is None
    assert m.preprocessing.letterbox is True
    assert m.preprocessing.pad_value == 114
    assert m.thresholds.confidence == 0.25


def _set(path: str, value: Any) -> Callable[[dict], None]:
    def apply(data: dict) -> None:
        *parents, last = path.split('.')
        node = data
        for p in parents:
            node = node[p]
        node[last] = value
    return apply


def _delete(key: str) -> Callable[[dict], None]:
    def apply(data: dict) -> None:
        del data[key]
    return apply


BAD_CASES: list[tuple[str, Callable[[dict], None], str]] = [
    ('missing name', _delete('name'), '`name`'),
    ('missing task', _delete('task'), '`task`'),
    ('missing weights', _delete('weights'), '`weights`'),
    ('missing input_size', _delete('input_size'), '`input_size`'),
    ('missing backends', _delete('backends'), '`backends`'),
    ('null weights', _set('weights', None), '`weights`'),
    ('input_size string', _set('input_size', '640'), '`input_size`'),
    ('input_size bool', _set('input_size', True), '`input_size`'),
    ('input_size 3 values', _set('input_size', [64, 64, 64]), '`input_size`'),
    ('input_size float item', _set('input_size', [64, 64.0]), '`input_size[1]`'),
    ('name int', _set('name', 3), '`name`'),
    ('name blank', _set('name', '  '), '`name`'),
    ('weights empty', _set('weights', ''), '`weights`'),
    ('confidence string', _set('thresholds.confidence', 'high'), '`thresholds.confidence`'),
    ('backends not a list', _set('backends', 'onnx'), '`backends`'),
    ('backends empty', _set('backends', []), '`backends`'),
    ('unknown backend', _set('backends', ['cpu', 'tpu']), '`backends[1]`'),
    ('unknown top-level key', _set('extra', 1), '`extra`'),
    ('unknown nested key', _set('preprocessing.foo', 1), '`preprocessing.foo`'),
    ('unknown thresholds key', _set('thresholds.nms', 1), '`thresholds.nms`'),
    ('confidence > 1', _set('thresholds.confidence', 1.5), '`thresholds.confidence`'),
    ('iou < 0', _set('thresholds.iou', -0.1), '`thresholds.iou`'),
    ('max_detections 0', _set('thresholds.max_detections', 0), '`thresholds.max_detections`'),
    ('max_detections float', _set('thresholds.max_detections', 2.5),
     '`thresholds.max_detections`'),
    ('input_size 100', _set('input_size', 100), '`input_size[0]`'),
    ('input_size width 100', _set('input_size', [320, 100]), '`input_size[1]`'),
    ('input_size 0', _set('input_size', [0, 320]), '`input_size[0]`'),
    ('task unknown', _set('task', 'segment'), '`task`'),
    ('architecture unknown', _set('architecture', 'tflite'), '`architecture`'),
    ('onnx with torch backend', _set('architecture', 'onnx'), '`backends`'),
    ('pad_value 256', _set('preprocessing.pad_value', 256), '`preprocessing.pad_value`'),
    ('letterbox string', _set('preprocessing.letterbox', 'yes'), '`preprocessing.letterbox`'),
    ('color_order', _set('preprocessing.color_order', 'gbr'), '`preprocessing.color_order`'),
    ('scale 0', _set('preprocessing.scale', 0), '`preprocessing.scale`'),
    ('mean 2 values', _set('preprocessing.mean', [0, 0]), '`preprocessing.mean`'),
    ('mean string item', _set('preprocessing.mean', [0, 'a', 0]), '`preprocessing.mean[1]`'),
    ('std zero', _set('preprocessing.std', [1, 0, 1]), '`preprocessing.std`'),
    ('preprocessing list', _set('preprocessing', [1]), '`preprocessing`'),
    ('thresholds list', _set('thresholds', [1]), '`thresholds`'),
    ('labels string', _set('labels', 'coco'), '`labels`'),
    ('labels int item', _set('labels', ['a', 2]), '`labels[1]`'),
]


@pytest.mark.parametrize('mutate,field', [(m, f) for _, m, f in BAD_CASES],
                         ids=[c[0] for c in BAD_CASES])
def test_invalid_field(tmp_path: Path, mutate: Callable[[dict], None], field: str) -> None:
    data = copy.deepcopy(VALID)
    mutate(data)
    path = _write(tmp_path, data)
    with pytest.raises(ManifestError) as info:
        load_manifest(path)
    message = str(info.value)
    assert str(path) in message
    assert field in message


def test_invalid_yaml(tmp_path: Path) -> None:
    path = tmp_path / 'broken.yaml'
    path.write_text('name: [unclosed\ntask: detect\n')
    with pytest.raises(ManifestError, match='not valid YAML') as info:
        load_manifest(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize('text', ['', '# only a comment\n', '- a\n- b\n'])
def test_empty_or_non_mapping_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / 'empty.yaml'
    path.write_text(text)
    with pytest.raises(ManifestError, match='expected a mapping at the top level') as info:
        load_manifest(path)
    assert str(path) in str(info.value)


def test_file_not_found(tmp_path: Path) -> None:
    path = tmp_path / 'absent.yaml'
    with pytest.raises(ManifestError, match='cannot read manifest') as info:
        load_manifest(path)
    assert str(path) in str(info.value)


def test_resolve_by_name_shipped() -> None:
    m = resolve_manifest('yolov8n')
    assert m.name == 'yolov8n'
    assert m.source is not None and m.source.name == 'yolov8n.yaml'


def test_resolve_by_name_in_search_dirs(tmp_path: Path) -> None:
    first, second = tmp_path / 'a', tmp_path / 'b'
    first.mkdir()
    second.mkdir()
    _write(second, VALID, 'tiny.yaml')
    _write(first, {**VALID, 'name': 'shadow'}, 'tiny.yaml')
    assert resolve_manifest('tiny', [first, second]).name == 'shadow'  # first folder wins
    assert resolve_manifest('tiny', [second]).name == 'tiny'


def test_resolve_by_path(tmp_path: Path) -> None:
    path = _write(tmp_path, VALID, 'custom.yaml')
    m = resolve_manifest(str(path))
    assert m.name == 'tiny'
    assert m.source == path.resolve()
    # A path with a separator but no YAML suffix is still a path.
    other = _write(tmp_path, VALID, 'custom.txt')
    assert resolve_manifest(str(other)).name == 'tiny'


def test_resolve_missing_path(tmp_path: Path) -> None:
    path = tmp_path / 'nope.yaml'
    with pytest.raises(ManifestError, match='manifest file not found') as info:
        resolve_manifest(str(path))
    assert str(path) in str(info.value)


def test_resolve_unknown_name_lists_available(tmp_path: Path) -> None:
    _write(tmp_path, VALID, 'alpha.yaml')
    _write(tmp_path, VALID, 'beta.yaml')
    (tmp_path / 'notes.txt').write_text('ignored')
    with pytest.raises(ManifestError) as info:
        resolve_manifest('gamma', [tmp_path])
    message = str(info.value)
    assert "no manifest named 'gamma'" in message
    assert 'available: alpha, beta;' in message
    assert str(tmp_path) in message


def test_resolve_unknown_name_default_dirs_lists_shipped() -> None:
    with pytest.raises(ManifestError, match=r'available: [^;]*yolov8n'):
        resolve_manifest('no_such_model_xyz')


def test_resolve_empty_name() -> None:
    with pytest.raises(ManifestError, match='`model` is empty'):
        resolve_manifest('')


@pytest.fixture
def manifest_in_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    folder = tmp_path / 'manifests'
    folder.mkdir()
    monkeypatch.delenv(MODEL_DIR_ENV, raising=False)
    return load_manifest(_write(folder, {**VALID, 'weights': 'sub/w.pt'})), folder


def test_weights_path_manifest_folder(manifest_in_folder) -> None:
    m, folder = manifest_in_folder
    assert m.weights_path() == folder.resolve() / 'sub' / 'w.pt'


def test_weights_path_env(manifest_in_folder, tmp_path: Path,
                          monkeypatch: pytest.MonkeyPatch) -> None:
    m, _ = manifest_in_folder
    monkeypatch.setenv(MODEL_DIR_ENV, str(tmp_path / 'env'))
    assert m.weights_path() == tmp_path / 'env' / 'sub' / 'w.pt'
    assert m.weights_path('') == tmp_path / 'env' / 'sub' / 'w.pt'  # empty parameter


def test_weights_path_model_dir_beats_env(manifest_in_folder, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    m, _ = manifest_in_folder
    monkeypatch.setenv(MODEL_DIR_ENV, str(tmp_path / 'env'))
    assert m.weights_path(tmp_path / 'arg') == tmp_path / 'arg' / 'sub' / 'w.pt'
    assert m.weights_path(str(tmp_path / 'arg')) == tmp_path / 'arg' / 'sub' / 'w.pt'


def test_weights_path_model_dir_expands_user(manifest_in_folder, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    m, _ = manifest_in_folder
    monkeypatch.setenv('HOME', str(tmp_path / 'home'))
    assert m.weights_path('~/models') == tmp_path / 'home' / 'models' / 'sub' / 'w.pt'


def test_weights_path_absolute_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    absolute = tmp_path / 'elsewhere' / 'w.pt'
    m = load_manifest(_write(tmp_path, {**VALID, 'weights': str(absolute)}))
    monkeypatch.setenv(MODEL_DIR_ENV, str(tmp_path / 'env'))
    assert m.weights_path() == absolute
    assert m.weights_path(tmp_path / 'arg') == absolute
