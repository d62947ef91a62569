"""Fuzzing what reaches the node from outside: images, manifests, engine-cache entries.

Seeded and bounded (set ``VISION_NODES_FUZZ_SCALE`` to run N times as many cases). Every case
must end in a valid result or in the documented error class with a one-line, bounded message:
never a hang, a crash, or another exception type. Cases that could hang or eat memory run
under an alarm, and the cache cases in a child process with bounded memory.
"""

from __future__ import annotations

import array
import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from time_limit import time_limit
from vision_nodes.images import CAMERA_ENCODINGS, ENCODINGS, ImageConversionError
from vision_nodes.limits import (MAX_DEPTH_METRES, MAX_IMAGE_BYTES, MAX_IMAGE_PIXELS,
                                 MAX_INPUT_PIXELS, MAX_INPUT_SIDE, MAX_LABELS, MAX_NAME_CHARS)
from vision_nodes.manifest import ManifestError, ModelManifest
from vision_nodes.tasks import load_manifest
from vision_nodes.tasks.detect import DetectionParams, Detections
from vision_nodes.tasks.preprocess import rect_shape
from vision_nodes.text import clip, clip_path, show, show_path

REPO = Path(__file__).resolve().parents[3]
SCALE = max(1, int(os.environ.get('VISION_NODES_FUZZ_SCALE', '1')))
#: Longest error message any case may produce.
MAX_MESSAGE = 600


def check_message(error: BaseException) -> str:
    """Assert the message is one bounded line; return it."""
    message = str(error)
    assert message, f'{type(error).__name__} without a message'
    assert '\n' not in message and '\r' not in message, message[:2000]
    assert len(message) <= MAX_MESSAGE, f'{len(message)} chars: {message[:300]}'
    return message


# ----------------------------------------------------------------- text
def test_clip_and_show_stay_bounded() -> None:
    """Whatever the value, what reaches a message is short, one line, and cheap to make."""
    nested: Any = 'x'
    for _ in range(10_000):
        nested = [nested]
    values = ['y' * (50 << 20), 'line\n[ERROR] forged\r\x1b[31m', list(range(1_000_000)),
              {str(i): 'v' * 1000 for i in range(10_000)}, nested, 10 ** 5000, b'\xff' * 10 ** 6,
              float('nan'), object()]
    with time_limit(10):
        for value in values:
            for text in (clip(value), show(value), clip(value, 40), show_path(value),
                         clip_path(value)):
                assert len(text) <= 240 and text.isprintable(), text[:300]
    assert clip('a\nb') == 'a\\x0ab'
    assert show('name') == "'name'"


def test_a_long_path_keeps_its_file_name() -> None:
    """A path too long for a message loses its middle: where it starts and its name stay."""
    path = Path('/tmp') / ('deep/' * 60) / 'params\n.yaml'
    text = show_path(path, 80)
    assert text.startswith("'/tmp/deep/") and text.endswith("/params\\x0a.yaml'"), text
    assert f'(+{len(str(path)) - 80} chars)' in text and text.isprintable()
    assert len(text) < 120
    assert show_path('/short/params.yaml') == "'/short/params.yaml'"
    assert clip_path(path, 80) == text[1:-1]


# ----------------------------------------------------------------- images
@pytest.fixture(scope='module')
def pipeline(model_dir, engine_cache_dir):
    """YOLOv8n on ONNX Runtime, the node's default model and backend."""
    pytest.importorskip('onnxruntime', reason='ONNX Runtime is not installed')
    from vision_nodes.tasks import resolve_manifest
    from vision_nodes.pipeline import build_pipeline

    loaded = build_pipeline(resolve_manifest('yolov8n'), 'onnx', model_dir=str(model_dir),
                            cache_dir=engine_cache_dir)
    yield loaded
    loaded.close()


def _message(height: int, width: int, encoding: str, step: int, data: bytes,
             big_endian: int = 0):
    from sensor_msgs.msg import Image

    msg = Image()
    msg.height, msg.width, msg.step = height, width, step
    msg.encoding = encoding
    msg.is_bigendian = big_endian
    msg.data = array.array('B', data)
    return msg


def _check_detections(dets: Detections, height: int, width: int) -> None:
    assert isinstance(dets, Detections)
    assert dets.boxes.shape == (len(dets), 4) and len(dets) <= 300
    assert np.isfinite(dets.boxes).all() and np.isfinite(dets.scores).all()
    assert (dets.boxes[:, 0::2] >= 0).all() and (dets.boxes[:, 0::2] <= width).all()
    assert (dets.boxes[:, 1::2] >= 0).all() and (dets.boxes[:, 1::2] <= height).all()
    assert ((dets.class_ids >= 0) & (dets.class_ids < 80)).all()


def _through_the_node_path(pipeline, msg) -> str:
    """What the node does with a frame: convert, process. Return 'ok' or 'refused'."""
    from vision_nodes.ros.inputs.conversion import image_to_array

    try:
        image, encoding = image_to_array(msg)
        dets = pipeline.process(image, encoding, DetectionParams())
    except ImageConversionError as exc:
        check_message(exc)
        return 'refused'
    _check_detections(dets, image.shape[0], image.shape[1])
    return 'ok'


@pytest.mark.parametrize('shape', [(1, 2000), (4000, 1), (1, 1), (2, 3000), (3000, 2)])
@pytest.mark.parametrize('encoding', ['bgr8', 'mono8', 'rgba8'])
def test_thin_images_through_the_real_model(pipeline, shape: tuple[int, int],
                                            encoding: str) -> None:
    """1 x 2000 and 4000 x 1 are valid images: they give detections, not an OpenCV error."""
    from vision_nodes.ros.inputs.conversion import numpy_to_image

    channels = ENCODINGS[encoding].channels
    rng = np.random.default_rng(sum(shape))
    pixels = rng.integers(0, 256, shape + ((channels,) if channels > 1 else ()), np.uint8)
    msg = numpy_to_image(pixels, encoding)
    assert _through_the_node_path(pipeline, msg) == 'ok'
    rect = rect_shape(shape, pipeline.manifest.input_size)
    assert all(0 < side <= limit and side % 32 == 0
               for side, limit in zip(rect, pipeline.manifest.input_size))
    tensor, _ = pipeline.task.preprocess(pixels, encoding, rect)  # the rect-inference path
    assert tensor.shape == (1, 3) + rect and np.isfinite(tensor).all()


@pytest.mark.parametrize('height,width,step', [
    (1, MAX_IMAGE_PIXELS + 1, MAX_IMAGE_PIXELS + 1),
    (100_000, 100_000, 100_000),
    (4096, 4096, MAX_IMAGE_BYTES // 4096 + 1),
    (2 ** 32 - 1, 2 ** 32 - 1, 2 ** 32 - 1),
])
def test_images_beyond_the_bound_are_refused_before_any_work(height: int, width: int,
                                                             step: int) -> None:
    from vision_nodes.ros.inputs.conversion import image_to_array

    for encoding in ('mono8', 'yuv422', 'nv24', 'bayer_rggb8'):
        msg = _message(height, width, encoding, step, b'\0' * 64)
        with time_limit(5), pytest.raises(ImageConversionError, match='larger than this node'):
            image_to_array(msg)


ENCODING_POOL = sorted(ENCODINGS) + sorted(CAMERA_ENCODINGS) + [
    '', 'RGB8', 'bgr16', 'jpeg', 'rgb8 ', 'rgb8\n[ERROR] forged line', '\x1b[2J', 'ünïcode',
    'rgb8\x00', 'x' * 100_000, 'bayer_rggb16', 'YUV422', 'nv12 ', 'yuv420']
#: Camera encodings: bytes a pixel in the first plane's rows, and all planes' rows per image
#: row (from the layouts image_encodings.hpp cites, written out independently of the node).
CAMERA_LAYOUT = {'uyvy': (2, 1), 'yuv422': (2, 1), 'yuyv': (2, 1), 'yuv422_yuy2': (2, 1),
                 'nv12': (1, 1.5), 'nv21': (1, 1.5), 'nv24': (1, 3), 'bayer_rggb8': (1, 1),
                 'bayer_bggr8': (1, 1), 'bayer_gbrg8': (1, 1), 'bayer_grbg8': (1, 1)}


def _fuzzed_image(rng: np.random.Generator, bus: bytes) -> Any:
    encoding = ENCODING_POOL[rng.integers(len(ENCODING_POOL))]
    info = ENCODINGS.get(encoding)
    if info:
        pixel, rows = info.channels * info.dtype.itemsize, 1
    else:
        pixel, rows = CAMERA_LAYOUT.get(encoding, (int(rng.integers(1, 5)), 1))
    kind = rng.integers(6)
    if kind == 0:  # the bundled bus.jpg as bgr8, truncated or with a wrong step
        height, width, encoding, pixel = 1080, 810, 'bgr8', 3
        data = bus[:int(rng.integers(len(bus) // 2, len(bus) + 1))]
    else:
        if kind == 1:
            height, width = 1, int(rng.integers(1, 5000))
        elif kind == 2:
            height, width = int(rng.integers(1, 5000)), 1
        elif kind == 3:
            height, width = (int(rng.choice([0, 1, 2 ** 16, 2 ** 31 - 1, 2 ** 32 - 1]))
                             for _ in range(2))
        else:
            height, width = (int(v) for v in rng.integers(1, 700, 2))
        data = None
    row = width * pixel
    step = int(rng.choice([row, row, row + int(rng.integers(1, 64)), max(row - 1, 0), 0,
                           int(rng.integers(0, 2 ** 32))]))
    step = min(step, 2 ** 32 - 1)
    if data is None:
        needed = step * max(height - 1, 0) + row if rows == 1 else int(step * height * rows)
        size = needed if needed <= 8 << 20 and rng.random() < 0.7 else \
            int(rng.integers(0, 1 << 16))
        if rng.random() < 0.2:
            size = max(size - int(rng.integers(1, 100)), 0)
        data = rng.integers(0, 256, size, np.uint8).tobytes()
    return _message(height, width, encoding, step, data, int(rng.integers(2)))


def test_fuzzed_images_through_the_real_model(pipeline, assets: Path) -> None:
    """Random shapes, steps, encodings (camera ones too) and truncated data, as the node's
    subscription gets them.

    Each frame is converted and run through the model as the node does; every outcome is
    detections within the image or an ImageConversionError in one bounded line.
    """
    import cv2

    bus = cv2.imread(str(assets / 'bus.jpg')).tobytes()
    rng = np.random.default_rng(20261123)
    outcomes = {'ok': 0, 'refused': 0, 'camera encodings converted': 0}
    inferences, started = 0, time.monotonic()
    from vision_nodes.ros.inputs.conversion import image_to_array

    for case in range(300 * SCALE):
        msg = _fuzzed_image(rng, bus)
        described = (f'case {case}: {msg.width}x{msg.height} {clip(msg.encoding, 20)} '
                     f'step {msg.step} data {len(msg.data)} B')
        try:
            with time_limit(30):
                try:
                    image_to_array(msg)
                except ImageConversionError as exc:
                    check_message(exc)
                    outcomes['refused'] += 1
                    continue
                outcomes['camera encodings converted'] += msg.encoding in CAMERA_ENCODINGS
                if inferences >= 30 * SCALE:  # the model is the slow part: enough of it
                    continue
                inferences += 1
                outcomes[_through_the_node_path(pipeline, msg)] += 1
        except Exception as exc:  # noqa: BLE001 - report which case, then fail
            raise AssertionError(f'{described}: {type(exc).__name__}: {clip(exc)}') from exc
    assert outcomes['ok'] >= 10 and outcomes['refused'] >= 100, outcomes
    assert outcomes['camera encodings converted'] >= 10, outcomes
    assert time.monotonic() - started < 300


def _compressed_bases(bgr: np.ndarray) -> list[tuple[bytes, str]]:
    """Complete images as cameras send them: JPEG variants and PNG, with their format."""
    import cv2

    small = np.ascontiguousarray(bgr[300:540, 200:520])
    grey = cv2.cvtColor(small, cv2.COLOR_BGR2GRAY)
    variants = [(small, []), (small, [cv2.IMWRITE_JPEG_PROGRESSIVE, 1]),
                (small, [cv2.IMWRITE_JPEG_RST_INTERVAL, 3]), (grey, [])]
    bases = [(cv2.imencode('.jpg', image, params)[1].tobytes(), 'jpeg')
             for image, params in variants]
    return bases + [(cv2.imencode('.png', small)[1].tobytes(), 'png')]


def _trailer(rng: np.random.Generator, bases: list[tuple[bytes, str]]) -> bytes:
    """Bytes after a complete image: padding, maker data, a second image, stray markers."""
    size = int(rng.choice([1, 100, 4095, 4097, 65536, 1 << 20]))
    kind = int(rng.integers(5))
    if kind == 0:
        return b'\x00' * size
    if kind == 1:
        return rng.integers(0, 256, size, np.uint8).tobytes()
    if kind == 2:
        return bases[rng.integers(len(bases))][0] * int(rng.integers(1, 4))
    if kind == 3:
        return b'\xff' * size
    return (b'\xff\xd9\xff\xd8' * (size // 4 + 1))[:size]


def _fuzzed_compressed(rng: np.random.Generator, bases: list[tuple[bytes, str]]
                       ) -> tuple[bytes, str, int | None]:
    """A compressed frame; with the index of its base when it must decode to the base's pixels."""
    index = int(rng.integers(len(bases)))
    data, fmt = bases[index]
    kind = int(rng.integers(4))
    if kind == 0:  # complete, then anything at all
        return data + _trailer(rng, bases), fmt, index
    if kind == 1:  # cut short, maybe followed by bytes that hold no end-of-image marker
        data = data[:int(rng.integers(0, len(data) - 1))]
        if rng.random() < 0.5:
            data += rng.integers(0, 0xD9, int(rng.integers(1, 10_000)), np.uint8).tobytes()
        return data, fmt, None
    edited = bytearray(data)
    for _ in range(int(rng.integers(1, 8))):  # damaged bytes, in the header or the data
        at = int(rng.integers(0, 64 if kind == 2 else len(edited)))
        edited[at] = int(rng.integers(256))
    tail = _trailer(rng, bases) if rng.random() < 0.5 else b''
    return bytes(edited) + tail, str(rng.choice([fmt, '', 'rgb8; jpeg compressed bgr8'])), None


def test_fuzzed_compressed_images_through_the_real_model(pipeline, bus_bgr) -> None:
    """JPEG/PNG frames cut short, damaged, or followed by any data, as the node decodes them.

    A complete image decodes to its own pixels whatever follows it (trailing data of any
    length); everything else ends in an ImageConversionError in one bounded line or in an
    image of the header's size, and the frames that decode go through the model.
    """
    from vision_nodes.image_codecs import decode_compressed

    bases = _compressed_bases(bus_bgr)
    pixels = [decode_compressed(data, fmt)[0] for data, fmt in bases]
    rng = np.random.default_rng(20260607)
    outcomes = {'ok': 0, 'refused': 0, 'complete': 0}
    inferences = 0
    for case in range(400 * SCALE):
        data, fmt, base = _fuzzed_compressed(rng, bases)
        try:
            with time_limit(30):
                try:
                    image, encoding = decode_compressed(data, fmt)
                except ImageConversionError as exc:
                    check_message(exc)
                    assert base is None, f'a complete image was refused: {exc}'
                    outcomes['refused'] += 1
                    continue
                if base is not None:
                    np.testing.assert_array_equal(image, pixels[base])
                    outcomes['complete'] += 1
                outcomes['ok'] += 1
                if inferences < 20 * SCALE:
                    inferences += 1
                    dets = pipeline.process(image, encoding, DetectionParams())
                    _check_detections(dets, image.shape[0], image.shape[1])
        except Exception as exc:  # noqa: BLE001 - report which case, then fail
            raise AssertionError(f'case {case} ({len(data)} B, {clip(fmt)}): '
                                 f'{type(exc).__name__}: {clip(exc)}') from exc
    assert outcomes['complete'] >= 60 and outcomes['refused'] >= 100, outcomes


# ----------------------------------------------------------------- manifests
VALID_MANIFEST: dict[str, Any] = {
    'name': 'fuzz', 'task': 'detect', 'weights': 'w.pt', 'architecture': 'ultralytics',
    'input_size': [320, 640],
    'preprocessing': {'letterbox': True, 'pad_value': 114, 'color_order': 'rgb',
                      'scale': 0.003921, 'mean': [0.0, 0.0, 0.0], 'std': [1.0, 1.0, 1.0]},
    'labels': ['a', 'b'], 'backends': ['cpu', 'onnx'],
    'thresholds': {'confidence': 0.25, 'iou': 0.45, 'max_detections': 300}, 'rect': True,
}
PATHS = ['name', 'task', 'weights', 'architecture', 'input_size', 'input_size.0',
         'preprocessing', 'preprocessing.scale', 'preprocessing.mean', 'preprocessing.mean.1',
         'preprocessing.std', 'preprocessing.pad_value', 'preprocessing.letterbox',
         'preprocessing.color_order', 'labels', 'labels.0', 'backends', 'backends.0',
         'thresholds', 'thresholds.confidence', 'thresholds.max_detections', 'rect', 'extra']
#: A metric depth model's manifest, fuzzed as often as the detector's.
VALID_DEPTH_MANIFEST: dict[str, Any] = {
    'name': 'fuzz_depth', 'task': 'depth', 'weights': 'w.onnx', 'input_size': [320, 640],
    'backends': ['onnx'], 'depth': {'kind': 'metric', 'max_depth': 20.0},
}
DEPTH_PATHS = ['task', 'input_size', 'depth', 'depth.kind', 'depth.output', 'depth.max_depth',
               'depth.max_depth', 'labels']
SNIPPETS = [b'&a ', b'*a', b'!!python/object/apply:os.system ["touch x"]', b'{', b'[', b': ',
            b'\t', b'\x00', b'\xff\xfe', b'\xc3', b'---\n', b'...\n', b'%YAML 1.1\n', b'? ',
            b'|', b'>', b'"\\', b"'", b'#', b'!!binary ', b'<<: *a', b'\r', b'\xef\xbb\xbf',
            b'!!set {a, b}', b'2001-12-14', b'.inf', b'.nan', b'1e999', b'0x' + b'f' * 200,
            b'&a [*a]', b'\n' * 50, b'- ' * 200]


def _random_value(rng: np.random.Generator, depth: int = 0) -> Any:
    kind = int(rng.integers(16))
    if kind == 0:
        return None
    if kind == 1:
        return bool(rng.integers(2))
    if kind == 2:
        return int(rng.choice([0, -1, 1, 31, 32, 640, 4096, 4097, 10_001, 2 ** 31, 2 ** 64]))
    if kind == 3:
        return 10 ** int(rng.integers(100, 4000))
    if kind == 4:
        return float(rng.choice([0.0, -0.5, 0.5, 1.5, 1e-30, 1e30, np.inf, -np.inf, np.nan]))
    if kind == 5:
        return 'x' * int(rng.choice([0, 1, 64, 65, 300, 100_000]))
    if kind == 6:
        return str(rng.choice(['detect', 'depth', 'onnx', 'rgb', 'from_weights', 'a-b',
                               '1abc', 'ok_name', '../../etc/passwd', 'a\nb', '\x1b[31m']))
    if kind == 7 and depth < 40:
        return [_random_value(rng, depth + 1) for _ in range(int(rng.integers(0, 4)))]
    if kind == 8 and depth < 40:
        return {str(_random_value(rng, 99))[:20]: _random_value(rng, depth + 1)
                for _ in range(int(rng.integers(0, 3)))}
    if kind == 9:
        nested: Any = 1
        for _ in range(int(rng.integers(1, 60))):
            nested = [nested]
        return nested
    if kind == 10:
        return ['c'] * int(rng.choice([0, 1, 2, 80, MAX_LABELS, MAX_LABELS + 1]))
    if kind == 11:
        return b'\x00\xff binary'
    if kind == 12:
        return [int(v) for v in rng.integers(-64, 5000, 2)]
    return str(rng.integers(0, 1000))


def _set_path(data: dict, path: str, value: Any) -> None:
    """Set ``data`` at a dotted path (list indices as numbers), if the path still exists."""
    *parents, last = path.split('.')
    node: Any = data
    for part in parents + [last]:
        index: Any = int(part) if part.isdigit() else part
        if isinstance(node, list) and isinstance(index, int) and index < len(node):
            pass
        elif not (isinstance(node, dict) and isinstance(index, str)):
            return
        if part is last:
            node[index] = value
        else:
            node = node[index] if isinstance(node, list) else node.get(index)


def _fuzzed_manifest(rng: np.random.Generator) -> bytes:
    depth = rng.random() < 0.5
    data = json.loads(json.dumps(VALID_DEPTH_MANIFEST if depth else VALID_MANIFEST))
    paths = DEPTH_PATHS if depth else PATHS
    for _ in range(int(rng.integers(0, 4))):  # 0: a valid manifest, differently written
        path = paths[rng.integers(len(paths))]
        if rng.random() < 0.15:
            data.pop(path.split('.')[0], None)
        else:
            _set_path(data, path, _random_value(rng))
    text = yaml.safe_dump(data, allow_unicode=bool(rng.integers(2)),
                          default_flow_style=bool(rng.integers(2))).encode()
    if rng.random() < 0.5:  # byte-level edits of the YAML text
        for _ in range(int(rng.integers(1, 4))):
            at = int(rng.integers(0, len(text) + 1))
            edit = int(rng.integers(4))
            if edit == 0:
                text = text[:at] + SNIPPETS[rng.integers(len(SNIPPETS))] + text[at:]
            elif edit == 1 and text:
                text = text[:at] + bytes([int(rng.integers(256))]) + text[at + 1:]
            elif edit == 2:
                text = text[:at]
            else:
                text = text[:at] + text[at:at + int(rng.integers(1, 200))] * 3 + text[at:]
    return text


def _check_manifest(manifest: ModelManifest) -> None:
    """A manifest that loads is within every documented bound."""
    assert re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*', manifest.name)
    assert len(manifest.name) <= MAX_NAME_CHARS
    height, width = manifest.input_size
    assert 32 <= height <= MAX_INPUT_SIDE and 32 <= width <= MAX_INPUT_SIDE
    assert height * width <= MAX_INPUT_PIXELS and height % 32 == width % 32 == 0
    prep = manifest.preprocessing
    assert all(np.isfinite(v) for v in (prep.scale, *prep.mean, *prep.std)) and prep.scale > 0
    assert manifest.labels is None or 1 <= len(manifest.labels) <= MAX_LABELS
    spec = manifest.block('depth')
    max_depth = spec.max_depth if spec else None
    assert max_depth is None or 0 < max_depth <= MAX_DEPTH_METRES  # positive and finite
    assert 0 <= manifest.thresholds.confidence <= 1 and 0 <= manifest.thresholds.iou <= 1


def test_fuzzed_manifests(tmp_path: Path) -> None:
    """Random values, types, nesting, anchors, huge strings and broken bytes in a manifest."""
    rng = np.random.default_rng(7)
    outcomes = {'ok': 0, 'refused': 0}
    for case in range(600 * SCALE):
        text = _fuzzed_manifest(rng)
        path = tmp_path / f'case{case}.yaml'
        path.write_bytes(text)
        try:
            with time_limit(10):
                try:
                    manifest = load_manifest(path)
                except ManifestError as exc:
                    assert str(path) in check_message(exc)
                    outcomes['refused'] += 1
                else:
                    _check_manifest(manifest)
                    outcomes['ok'] += 1
        except Exception as exc:  # noqa: BLE001 - report which case, then fail
            raise AssertionError(f'case {case} ({path}): {type(exc).__name__}: {clip(exc)}; '
                                 f'text {clip(text[:300])}') from exc
        path.unlink()
    assert outcomes['ok'] >= 30 and outcomes['refused'] >= 200, outcomes


BOMB_LEVELS = [f'l{i}: &l{i} [' + ', '.join([f'*l{i - 1}'] * 10) + ']' for i in range(1, 12)]


@pytest.mark.parametrize('text', [
    'l0: &l0 [lol]\n' + '\n'.join(BOMB_LEVELS) + '\nname: *l11\n',
    '[' * 500_000 + ']' * 500_000,
    '{a: ' * 200_000 + '1' + '}' * 200_000,
    'name: "' + 'x' * 900_000 + '"\n',
    'labels: [' + 'a, ' * 300_000 + ']\n',
], ids=['alias bomb', 'deep list', 'deep map', 'huge string', 'many items'])
def test_pathological_yaml_is_refused_quickly(tmp_path: Path, text: str) -> None:
    path = tmp_path / 'pathological.yaml'
    path.write_text(text)
    with time_limit(10), pytest.raises(ManifestError) as info:
        load_manifest(path)
    check_message(info.value)


# ----------------------------------------------------------------- cache entries
CACHE_FUZZ = textwrap.dedent(r'''
    import hashlib, json, os, random, resource, shutil, signal, stat, sys
    from pathlib import Path

    # Bounded memory: a read of /dev/zero fails the case instead of the machine.
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
    from vision_nodes.artifacts.cache import CacheError, ArtifactCache

    root, seed, cases = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    ARTIFACT, FIELDS = 'model.bin', {'weights_sha256': 'ab' * 32}


    class Timeout(Exception):
        pass


    def expire(signum, frame):
        raise Timeout('still running after 10 s')


    signal.signal(signal.SIGALRM, expire)


    def regular(path):
        """Mutations only edit plain files (opening a fifo left by another would block)."""
        try:
            return stat.S_ISREG(os.lstat(path).st_mode)
        except OSError:
            return False


    def rewrite_meta(entry, change):
        if not regular(entry / 'entry.json'):
            return
        meta = json.loads((entry / 'entry.json').read_text())
        change(meta)
        (entry / 'entry.json').write_text(json.dumps(meta))


    def flip(entry):
        if not regular(entry / ARTIFACT):
            return
        path = entry / ARTIFACT
        info = path.stat()
        data = bytearray(path.read_bytes())
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(data))
        os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))


    def truncate(entry):
        if not regular(entry / ARTIFACT):
            return
        with open(entry / ARTIFACT, 'r+b') as fh:
            fh.truncate(rng.randrange(0, 1400))


    def append(entry):
        if not regular(entry / ARTIFACT):
            return
        with open(entry / ARTIFACT, 'ab') as fh:
            fh.write(os.urandom(rng.randrange(1, 100)))


    def link(entry):
        (entry / ARTIFACT).unlink()
        target = rng.choice(['/dev/zero', '/dev/urandom', '/etc/hostname', '/nonexistent',
                             str(entry.parent / 'outside.bin'), '.', '..'])
        os.symlink(target, entry / ARTIFACT)


    def fifo(entry):
        (entry / ARTIFACT).unlink()
        os.mkfifo(entry / ARTIFACT)


    def folder(entry):
        (entry / ARTIFACT).unlink()
        (entry / ARTIFACT).mkdir()


    def sparse(entry):
        if not regular(entry / ARTIFACT):
            return
        with open(entry / ARTIFACT, 'r+b') as fh:
            fh.truncate(1 << 40)
        rewrite_meta(entry, lambda m: m['files'][ARTIFACT].update(size=1 << 40))


    NAMES = ['../outside.bin', '/dev/zero', '/etc/hostname', 'a/b', '.', '..', '', 'x' * 300,
             'entry.json', '.hidden', 'model.bin/', '\x00', 'ok.bin']
    VALUES = [None, True, -1, 0, 1 << 63, 1e30, float('inf'), '12', [], {}, 'ab' * 32,
              'zz' * 32, 'AB' * 32, ['x'] * 3]


    def meta_files(entry):
        def change(meta):
            name = rng.choice(NAMES)
            meta['files'][name] = {'size': rng.choice(VALUES + [0, 1400]),
                                   'sha256': rng.choice(VALUES + [hashlib.sha256().hexdigest()])}
        rewrite_meta(entry, change)


    def meta_values(entry):
        def change(meta):
            key = rng.choice(['size', 'sha256'])
            meta['files'][ARTIFACT][key] = rng.choice(VALUES)
        rewrite_meta(entry, change)


    def meta_shape(entry):
        data = rng.choice([
            b'', b'{', b'null', b'[]', b'{"files": []}', b'{"files": null}', b'"x"',
            b'1e999999', b'[' * 200000 + b']' * 200000, ('{"files": {' + ', '.join(
                f'"f{i}": {{"size": 0, "sha256": "{"0" * 64}"}}' for i in range(100))
                + '}}').encode(), b'\xff\xfe garbage', b'x' * (2 << 20)])
        (entry / 'entry.json').write_bytes(data)


    def meta_link(entry):
        (entry / 'entry.json').unlink()
        os.symlink(rng.choice(['/dev/zero', '/etc/hostname', '/nonexistent']),
                   entry / 'entry.json')


    def entry_link(entry):
        moved = entry.with_name('moved')
        if moved.exists():
            shutil.rmtree(moved)
        os.rename(entry, moved)
        os.symlink(rng.choice([str(moved), '/dev', '/nonexistent']), entry)


    def entry_file(entry):
        shutil.rmtree(entry)
        if rng.random() < 0.5:
            entry.write_bytes(b'not a folder')
        else:
            os.mkfifo(entry)


    def extra_file(entry):  # harmless: not part of the entry
        (entry / 'notes.txt').write_text('hello')


    MUTATIONS = [flip, truncate, append, link, fifo, folder, sparse, meta_files, meta_values,
                 meta_shape, meta_link, entry_link, entry_file, extra_file]
    PAYLOAD = os.urandom(1400)
    results = {'refused': 0, 'hit': 0, 'failures': [], 'kinds': {}}
    for case in range(cases):
        folder_ = root / f'case{case}'
        cache = ArtifactCache(folder_)
        built = []

        def build(folder):
            built.append(1)
            (folder / ARTIFACT).write_bytes(PAYLOAD)

        chosen = rng.sample(MUTATIONS, rng.randrange(1, 3))
        name = '+'.join(m.__name__ for m in chosen)
        try:
            signal.alarm(10)
            entry = cache.get_or_build('m', 'onnx', FIELDS, build, files=(ARTIFACT,))
            for mutate in chosen:
                if entry.path.is_dir() and not entry.path.is_symlink():
                    try:
                        mutate(entry.path)
                    except (OSError, ValueError, KeyError, TypeError, AttributeError):
                        pass  # a mutation that does not apply after the previous one
            found = cache.lookup('m', 'onnx', FIELDS, (ARTIFACT,))
            try:
                data = entry.read_verified(ARTIFACT)
                assert data == PAYLOAD, 'read_verified returned other bytes'
            except CacheError as exc:
                message = str(exc)
                assert '\n' not in message and len(message) <= 600, message[:300]
                assert found is None, 'lookup accepted an entry that read_verified refuses'
                results['refused'] += 1
            else:
                results['hit'] += found is not None
            again = cache.get_or_build('m', 'onnx', FIELDS, build, files=(ARTIFACT,))
            assert again.read_verified(ARTIFACT) == PAYLOAD
            assert again.hit == (found is not None)
            signal.alarm(0)
        except BaseException as exc:
            signal.alarm(0)
            results['failures'].append(f'{name}: {type(exc).__name__}: {str(exc)[:300]}')
        results['kinds'][name] = results['kinds'].get(name, 0) + 1
        shutil.rmtree(folder_, ignore_errors=True)
        for leftover in ('moved',):
            shutil.rmtree(root / leftover, ignore_errors=True)
    print(json.dumps(results))
''')


def test_fuzzed_cache_entries(tmp_path: Path) -> None:
    """Truncated, bit-flipped, relinked, swapped and rewritten entries, in a bounded child.

    An entry is either used with exactly the bytes that were built, or refused (CacheError,
    one line) and rebuilt by the next get_or_build; nothing outside the entry is read.
    """
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join(
        [str(REPO)] + [p for p in os.environ.get('PYTHONPATH', '').split(os.pathsep) if p])}
    proc = subprocess.run([sys.executable, '-c', CACHE_FUZZ, str(tmp_path), '11',
                           str(250 * SCALE)], capture_output=True, text=True,
                          timeout=300 * SCALE, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    assert results['failures'] == [], results['failures'][:10]
    assert results['refused'] >= 100 and results['hit'] >= 5, results
