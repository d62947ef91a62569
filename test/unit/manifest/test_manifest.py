"""Tests for vision_nodes.manifest: loading, validation errors and weights resolution."""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
import yaml

from time_limit import time_limit
from vision_nodes.limits import (MAX_INPUT_SIDE, MAX_LABEL_CHARS, MAX_LABELS, MAX_MANIFEST_BYTES,
                                 MAX_MANIFEST_DEPTH, MAX_NAME_CHARS)
from vision_nodes.manifest import MODEL_DIR_ENV, ManifestError
from vision_nodes.tasks import load_manifest, parse_manifest, resolve_manifest

REPO = Path(__file__).resolve().parents[3]
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
    assert m.backends == ('cpu', 'cuda', 'rocm', 'onnx', 'openvino', 'tensorrt')
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
    ('task unknown', _set('task', 'caption'), '`task`'),
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


@pytest.mark.parametrize('block, field', [
    ({'task': 'pose', 'keypoints': 'nose'}, 'keypoints'),
    ({'task': 'detect', 'depth': {'kind': 'metric'}}, 'depth'),
    ({'task': 'depth', 'architecture': 'transformers', 'input_size': 518,
      'depth': {'kind': 'metric', 'max_depth': -1}}, 'depth.max_depth'),
])
def test_a_bad_task_block_is_refused_where_manifests_load(tmp_path: Path, block, field) -> None:
    """The generic manifest leaves task blocks to the registry; every loader still refuses.

    The registry's loaders refuse a bad block at load time with the same one-line error.
    """
    path = _write(tmp_path, {**VALID, **block}, 'bad.yaml')
    errors = []
    for load in (resolve_manifest, load_manifest):
        with pytest.raises(ManifestError, match=f'field `{re.escape(field)}`') as caught:
            load(str(path))
        errors.append(str(caught.value))
    assert len(set(errors)) == 1 and '\n' not in errors[0], errors


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


# ----------------------------------------------------------------- untrusted manifests
def _one_bounded_line(error: BaseException, limit: int = 600) -> str:
    message = str(error)
    assert '\n' not in message and len(message) <= limit, message[:2000]
    return message


ALIAS_BOMB = '\n'.join(
    ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    + [f'{chr(98 + i)}: &{chr(98 + i)} [' + ','.join([f'*{chr(97 + i)}'] * 9) + ']'
       for i in range(8)]
    + ['name: *i', 'task: detect', 'weights: w.pt', 'input_size: 640', 'backends: [onnx]'])


def test_alias_bomb_is_refused_without_expanding(tmp_path: Path) -> None:
    """A "billion laughs" manifest: refused at parse, in one short line, at once."""
    path = tmp_path / 'bomb.yaml'
    path.write_text(ALIAS_BOMB)
    with time_limit(10), pytest.raises(ManifestError, match='anchors and aliases') as info:
        load_manifest(path)
    assert str(path) in _one_bounded_line(info.value)


@pytest.mark.parametrize('text,match', [
    ('name: &n tiny\nlabel: *n\n', 'anchors and aliases'),
    (f"name: {'[' * (MAX_MANIFEST_DEPTH + 1)}{']' * (MAX_MANIFEST_DEPTH + 1)}\n",
     f'nested deeper than {MAX_MANIFEST_DEPTH} levels'),
    # Far past the bound, the YAML library may stop the parse itself (PyYAML >= 6.0.3 does, in
    # its own words): what counts is the behaviour, one prompt line naming the file.
    ('[' * 100_000 + ']' * 100_000, None),
    ('labels: [' + ', '.join(['a'] * 30_000) + ']\n', 'more than'),
    ('name: !!python/object/apply:os.system ["touch /tmp/x"]\n', 'not valid YAML'),
    ('name: ' + '9' * 5000 + '\n', 'not accepted as a manifest'),
    ('name: tiny\nname: tiny\n\ttask: [\n', 'not valid YAML'),
], ids=['alias', 'deep', 'very deep', 'many nodes', 'python tag', 'huge int', 'tab'])
def test_hostile_yaml_is_one_line_error(tmp_path: Path, text: str, match: str | None) -> None:
    """Refused at parse within seconds, in one short line that names the file."""
    path = tmp_path / 'hostile.yaml'
    path.write_text(text)
    with time_limit(10), pytest.raises(ManifestError, match=match) as info:
        load_manifest(path)
    assert str(path) in _one_bounded_line(info.value)


def test_oversized_manifest_refused_before_reading(tmp_path: Path) -> None:
    """The size is checked on the open file: a 4 GiB (sparse) file is never read."""
    path = tmp_path / 'huge.yaml'
    with open(path, 'wb') as fh:
        fh.truncate(4 << 30)
    with time_limit(5), pytest.raises(ManifestError, match=f'at most {MAX_MANIFEST_BYTES}'):
        load_manifest(path)


@pytest.mark.parametrize('kind', ['fifo', 'folder', 'device'])
def test_manifest_must_be_a_regular_file(tmp_path: Path, kind: str) -> None:
    """A fifo would block the read forever, /dev/zero would never end: both refused."""
    path = tmp_path / 'special.yaml'
    if kind == 'fifo':
        os.mkfifo(path)
    elif kind == 'folder':
        path.mkdir()
    else:
        path.symlink_to('/dev/zero')
    with time_limit(5), pytest.raises(ManifestError, match='regular file') as info:
        resolve_manifest(str(path))
    assert str(path) in _one_bounded_line(info.value)


def test_non_utf8_manifest_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / 'latin1.yaml'
    path.write_bytes(yaml.safe_dump(VALID).replace('tiny', 'caf\xe9').encode('latin-1'))
    with pytest.raises(ManifestError, match=r'not UTF-8 text \(byte 0xe9 at offset') as info:
        load_manifest(path)
    assert str(path) in _one_bounded_line(info.value)


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / 'bom.yaml'
    path.write_bytes(b'\xef\xbb\xbf' + yaml.safe_dump(VALID).encode())
    assert load_manifest(path).name == 'tiny'


HUGE = 'x' * (50 << 20)


@pytest.mark.parametrize('key,value,field', [
    ('name', HUGE, '`name`'),
    ('task', HUGE, '`task`'),
    ('weights', HUGE, '`weights`'),
    ('architecture', HUGE, '`architecture`'),
    ('backends', ['onnx', HUGE], '`backends[1]`'),
    ('labels', [HUGE], '`labels[0]`'),
    ('input_size', [HUGE, 64], '`input_size[0]`'),
    ('input_size', [list(range(1_000_000)), 64], '`input_size[0]`'),
    ('rect', {HUGE: HUGE}, '`rect`'),
], ids=['name', 'task', 'weights', 'architecture', 'backends', 'labels', 'input_size',
        'input_size list', 'rect'])
def test_huge_values_are_clipped_in_errors(key: str, value: Any, field: str) -> None:
    """A 50 MB value gives a short message that still names the field."""
    data = {**copy.deepcopy({k: v for k, v in VALID.items() if k != key}), key: value}
    with time_limit(10), pytest.raises(ManifestError) as info:
        parse_manifest(data, 'big.yaml')
    assert field in _one_bounded_line(info.value)


@pytest.mark.parametrize('name', ['a-b', '1model', 'has space', 'dot.name', 'ünï', 'x/y', '..',
                                  'n' * (MAX_NAME_CHARS + 1), 'n' * 300, '_' * 65],
                         ids=lambda name: name if len(name) < 20 else f'{len(name)} chars')
def test_name_must_be_a_ros_name_token(name: str) -> None:
    """Names become ROS namespaces and cache folder names: letters, digits, underscores."""
    with pytest.raises(ManifestError, match='field `name`') as info:
        parse_manifest({**VALID, 'name': name}, 'n.yaml')
    _one_bounded_line(info.value)


@pytest.mark.parametrize('name', ['tiny', 'yolov8n', 'yolov8n_int8', '_private', 'A1',
                                  'n' * MAX_NAME_CHARS],
                         ids=lambda name: name if len(name) < 20 else f'{len(name)} chars')
def test_valid_names_are_valid_ros_namespaces(name: str) -> None:
    assert parse_manifest({**VALID, 'name': name}, 'n.yaml').name == name
    rclpy_names = pytest.importorskip('rclpy.validate_topic_name', reason='rclpy')
    rclpy_names.validate_topic_name(f'{name}/detections')


def test_shipped_manifests_are_valid() -> None:
    """Every manifest in config/models loads and its name matches its file."""
    shipped = sorted((REPO / 'config' / 'models').glob('*.yaml'))
    assert shipped
    for path in shipped:
        assert load_manifest(path).name == path.stem


NON_FINITE: list[tuple[str, Callable[[dict], None], str]] = [
    ('scale inf', _set('preprocessing.scale', float('inf')), '`preprocessing.scale`'),
    ('scale nan', _set('preprocessing.scale', float('nan')), '`preprocessing.scale`'),
    ('scale 1e999 int', _set('preprocessing.scale', 10 ** 400), '`preprocessing.scale`'),
    ('scale absurd', _set('preprocessing.scale', 1e30), '`preprocessing.scale`'),
    ('mean nan', _set('preprocessing.mean', [float('nan'), 0, 0]), '`preprocessing.mean[0]`'),
    ('mean -inf', _set('preprocessing.mean', [0, float('-inf'), 0]), '`preprocessing.mean[1]`'),
    ('std inf', _set('preprocessing.std', [1, 1, float('inf')]), '`preprocessing.std[2]`'),
    ('std negative', _set('preprocessing.std', [1, -1, 1]), '`preprocessing.std[1]`'),
    ('std tiny', _set('preprocessing.std', [1, 1e-30, 1]), '`preprocessing.std`'),
    ('confidence nan', _set('thresholds.confidence', float('nan')), '`thresholds.confidence`'),
    ('iou inf', _set('thresholds.iou', float('inf')), '`thresholds.iou`'),
    ('max_detections huge', _set('thresholds.max_detections', 10 ** 9),
     '`thresholds.max_detections`'),
    ('input_size 8192', _set('input_size', 8192), '`input_size[0]`'),
    ('input_size 4096 square', _set('input_size', [4096, 4096]), '`input_size`'),
    ('input_size huge int', _set('input_size', [10 ** 300, 64]), '`input_size[0]`'),
    ('labels too many', _set('labels', ['c'] * (MAX_LABELS + 1)), '`labels`'),
    ('label too long', _set('labels', ['a', 'b' * (MAX_LABEL_CHARS + 1)]), '`labels[1]`'),
    ('weights NUL', _set('weights', 'a\0b.pt'), '`weights`'),
    ('task a list', _set('task', ['detect']), '`task`'),
    ('labels a dict', _set('labels', {'a': 1}), '`labels`'),
]


@pytest.mark.parametrize('mutate,field', [(m, f) for _, m, f in NON_FINITE],
                         ids=[c[0] for c in NON_FINITE])
def test_values_out_of_bounds_refused(mutate: Callable[[dict], None], field: str) -> None:
    """Non-finite or absurd numbers and oversized lists are refused at load, by field."""
    data = copy.deepcopy(VALID)
    mutate(data)
    with pytest.raises(ManifestError) as info:
        parse_manifest(data, 'bounds.yaml')
    assert field in _one_bounded_line(info.value)


def test_largest_accepted_values_load() -> None:
    data = {**copy.deepcopy(VALID), 'input_size': [1024, MAX_INPUT_SIDE],
            'labels': [f'c{i}' for i in range(MAX_LABELS)]}
    m = parse_manifest(data, 'big.yaml')
    assert m.input_size == (1024, MAX_INPUT_SIDE) and len(m.labels) == MAX_LABELS


def test_keys_of_any_type_give_a_manifest_error(tmp_path: Path) -> None:
    """Unknown keys that are numbers, null or mixed with strings: a field error, no TypeError."""
    path = tmp_path / 'keys.yaml'
    path.write_text(yaml.safe_dump(VALID) + '1: one\nnull: none\nzzz: 3\n')
    with pytest.raises(ManifestError, match='field `1`: unknown key'):
        load_manifest(path)


# ----------------------------------------------------------------- the model against its manifest
def _tiny_onnx(path: Path, *, input_shape=(1, 3, 64, 64), outputs: int = 7,
               classifier: bool = False, names: list[str] | None = None,
               dtype: int | None = None, extra_input: bool = False) -> Path:
    """Write a real, tiny ONNX model: a strided convolution shaped like a detector head.

    Its output is (1, ``outputs``, anchors), i.e. 4 box values + ``outputs - 4`` class scores
    per anchor; ``classifier`` makes it (1, 3) instead.
    """
    onnx = pytest.importorskip('onnx', reason='onnx builds the test models')
    from onnx import TensorProto, helper, numpy_helper

    elem = TensorProto.FLOAT if dtype is None else dtype
    inputs = [helper.make_tensor_value_info('images', elem, list(input_shape))]
    if extra_input:
        inputs.append(helper.make_tensor_value_info('scale', TensorProto.FLOAT, [1]))
    channels = input_shape[1] if isinstance(input_shape[1], int) else 3
    weight = numpy_helper.from_array(
        np.random.default_rng(0).standard_normal((outputs, channels, 32, 32)).astype(
            np.float16 if elem == TensorProto.FLOAT16 else np.float32), 'w')
    if classifier:
        nodes = [helper.make_node('GlobalAveragePool', ['images'], ['pooled']),
                 helper.make_node('Flatten', ['pooled'], ['output0'])]
        out = helper.make_tensor_value_info('output0', elem, ['batch', 'classes'])
        initializers = []
    else:
        shape = numpy_helper.from_array(np.array([1, outputs, -1], np.int64), 'shape')
        nodes = [helper.make_node('Conv', ['images', 'w'], ['conv'], strides=[32, 32]),
                 helper.make_node('Reshape', ['conv', 'shape'], ['output0'])]
        out = helper.make_tensor_value_info('output0', elem, ['batch', 'values', 'anchors'])
        initializers = [weight, shape]
    graph = helper.make_graph(nodes, 'tiny', inputs, [out], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid('', 17)])
    model.ir_version = 8
    if names is not None:
        entry = model.metadata_props.add()
        entry.key, entry.value = 'names', repr(dict(enumerate(names)))
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def _pipeline(tmp_path: Path, weights: Path, **fields: Any):
    pytest.importorskip('onnxruntime', reason='ONNX Runtime is not installed')
    from vision_nodes.pipeline import build_pipeline

    data = {'name': 'tiny', 'task': 'detect', 'weights': str(weights), 'input_size': 64,
            'backends': ['onnx'], **fields}
    return build_pipeline(parse_manifest(data, 'tiny.yaml'), 'onnx', cache_dir=tmp_path)


def test_tiny_detector_model_runs(tmp_path: Path) -> None:
    """The synthetic model the checks below use is accepted when it matches its manifest."""
    from vision_nodes.tasks.detect import DetectionParams

    pipeline = _pipeline(tmp_path, _tiny_onnx(tmp_path / 'ok.onnx'), labels=['a', 'b', 'c'])
    try:
        assert pipeline.runner.output_shapes == [(1, 7, 4)]
        dets = pipeline.process(np.zeros((48, 80, 3), np.uint8), 'rgb8',
                                DetectionParams(confidence=0.0))
        assert set(dets.class_ids.tolist()) <= {0, 1, 2}
    finally:
        pipeline.close()


@pytest.mark.parametrize('model,fields,error,match', [
    (dict(), dict(labels=['a', 'b']), ManifestError,
     r"field `labels`: the manifest lists 2 class names but the model scores 3 classes: "
     r'list exactly 3 names in `labels`, or use `labels: from_weights`'),
    (dict(names=['a', 'b', 'c', 'd']), dict(), ManifestError,
     r"the model's own metadata lists 4 class names but the model scores 3 classes"),
    (dict(classifier=True), dict(), ManifestError,
     r'the model outputs 1x3, not a detector output: \(1, 4 \+ classes, anchors\)'),
    (dict(input_shape=(1, 3, 32, 32)), dict(), 'RunnerError',
     r'takes input 1x3x32x32 but the manifest says `input_size: \[64, 64\]`: set '
     r'`input_size: \[32, 32\]`'),
    (dict(input_shape=(1, 3, 'h', 96)), dict(), 'RunnerError',
     r'set `input_size: \[64, 96\]`'),
    (dict(input_shape=(1, 1, 64, 64)), dict(), 'RunnerError', r'one 3-channel image'),
    (dict(input_shape=(4, 3, 64, 64)), dict(), 'RunnerError', r'one 3-channel image'),
    (dict(input_shape=(3, 64, 64), classifier=True), dict(), 'RunnerError',
     r'takes a 3-D input'),
    (dict(extra_input=True), dict(), 'RunnerError', r'takes inputs \(images tensor\(float\), '
                                                    r'scale tensor\(float\)\)'),
    (dict(dtype=10), dict(), 'RunnerError', r'one float32 image tensor'),
], ids=['manifest labels', 'metadata labels', 'classifier', 'input size', 'input width',
        'one channel', 'batch of 4', 'rank 3', 'two inputs', 'float16 input'])
def test_model_that_does_not_fit_its_manifest_fails_configure(tmp_path: Path, model: dict,
                                                              fields: dict, error,
                                                              match: str) -> None:
    """Caught at configure in one line naming the field and the fix, never per frame."""
    from vision_nodes.runners.base import RunnerError

    error = RunnerError if error == 'RunnerError' else error
    weights = _tiny_onnx(tmp_path / 'model.onnx', **model)
    with pytest.raises(error, match=match) as info:
        _pipeline(tmp_path, weights, **fields)
    _one_bounded_line(info.value)


def test_empty_labels_are_refused_not_read_from_the_weights(tmp_path: Path) -> None:
    """`labels: []` names no class: refused at load (it used to fall back to the weights'
    names); `from_weights` says it explicitly and reads them."""
    data = {**copy.deepcopy(VALID), 'labels': []}
    with pytest.raises(ManifestError, match=r'field `labels`: an empty list names no class: '
                       r'.*`labels: from_weights`') as info:
        parse_manifest(data, 'empty_labels.yaml')
    _one_bounded_line(info.value)
    weights = _tiny_onnx(tmp_path / 'named.onnx', names=['a', 'b', 'c'])
    pipeline = _pipeline(tmp_path, weights, labels='from_weights')
    try:
        assert pipeline.labels == ['a', 'b', 'c']
    finally:
        pipeline.close()


@pytest.mark.parametrize('base,backend', [
    ('yolov8n', 'cpu'), ('yolov8n', 'onnx'), ('yolov8n', 'openvino'),
    ('yolov8n_int8_openvino', 'openvino'),
], ids=['pt on torch', 'pt on onnx', 'pt on openvino', 'IR on openvino'])
def test_label_count_is_checked_at_configure_on_every_backend(model_dir, engine_cache_dir,
                                                              base, backend):
    """3 names for an 80-class model: refused in one line naming both numbers, whatever
    runs it (.pt on PyTorch, its ONNX export, its OpenVINO IR, a ready IR)."""
    from vision_nodes.pipeline import build_pipeline
    from vision_nodes.runners.registry import runner_class

    if runner_class(backend).unavailable_reason(backend):
        pytest.skip(f'backend {backend} is not available here')
    data = yaml.safe_load(Path(resolve_manifest(base).source).read_text())
    manifest = parse_manifest({**data, 'labels': ['a', 'b', 'c']}, f'{base}.yaml')
    with pytest.raises(ManifestError, match='the manifest lists 3 class names but the model '
                                            'scores 80 classes') as info:
        build_pipeline(manifest, backend, model_dir=str(model_dir),
                       cache_dir=engine_cache_dir, precision='auto')
    _one_bounded_line(info.value)


def test_free_input_dimensions_take_the_manifest_size(tmp_path: Path) -> None:
    weights = _tiny_onnx(tmp_path / 'dynamic.onnx', input_shape=('n', 3, 'h', 'w'))
    pipeline = _pipeline(tmp_path, weights, input_size=[96, 128])
    try:
        assert pipeline.runner.model_input_shape() == (None, 3, None, None)
        assert pipeline.runner.output_shapes == [(1, 7, 12)]
    finally:
        pipeline.close()


def test_security_doc_lists_every_bound_with_its_value() -> None:
    """Each constant of vision_nodes.limits has a row in docs/security.md naming its value."""
    from vision_nodes import limits

    rows = [line for line in (REPO / 'docs' / 'security.md').read_text().splitlines()
            if line.startswith('| ') and '`MAX_' in line]
    constants = {name: value for name, value in vars(limits).items() if name.startswith('MAX_')}
    assert constants
    for name, value in constants.items():
        shown = f'{value:g}' if isinstance(value, float) else str(value)
        assert any(f'`{name}`' in row and shown in row for row in rows), (name, shown)


def test_default_model_dir_is_the_checkout_models_unless_set(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The environment variable wins; without it the checkout's shared/models is exported."""
    from vision_nodes.manifest import CHECKOUT_MODEL_DIR, use_default_model_dir

    monkeypatch.setenv(MODEL_DIR_ENV, str(tmp_path))
    assert use_default_model_dir() == tmp_path
    monkeypatch.delenv(MODEL_DIR_ENV)
    if not CHECKOUT_MODEL_DIR.is_dir():
        assert use_default_model_dir() is None and MODEL_DIR_ENV not in os.environ
        return
    assert use_default_model_dir() == CHECKOUT_MODEL_DIR
    assert os.environ[MODEL_DIR_ENV] == str(CHECKOUT_MODEL_DIR)  # node processes inherit it


def test_benchmark_finds_the_weights_without_the_variable():
    """bench_detect on a fresh checkout resolves yolov8n.pt as the demo does (no setting)."""
    from vision_nodes.manifest import CHECKOUT_MODEL_DIR

    if not (CHECKOUT_MODEL_DIR / 'yolov8n.pt').is_file():
        pytest.skip(f'no yolov8n.pt in {CHECKOUT_MODEL_DIR} (the development layout)')
    root = Path(__file__).resolve().parents[3]
    code = ('import sys; sys.path.insert(0, "benchmarks"); import bench_detect; '
            'bench_detect.bench_environment("default"); '
            'from vision_nodes.tasks import resolve_manifest; '
            'print(resolve_manifest("yolov8n").weights_path())')
    env = {k: v for k, v in os.environ.items() if k != MODEL_DIR_ENV}
    out = subprocess.run([sys.executable, '-c', code], cwd=root, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert Path(out.stdout.strip()) == CHECKOUT_MODEL_DIR / 'yolov8n.pt'
