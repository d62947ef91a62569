"""What the node reads from model and calibration folders: regular files, bounded, offline.

Each input here once hurt the node: a FIFO as ``config.json`` blocked configure forever, a link
to ``/dev/zero`` read gigabytes, absurd architecture sizes allocated gigabytes before any
check, a backbone named in ``config.json`` made transformers try the network, a 30000 x 30000
calibration PNG cost gigabytes to decode. Now each is refused (or skipped) in one line without
the network and without the memory: the model cases run in a bounded child process
(``hostile_loads``) that reports the growth of its peak RSS and every connection attempted.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from hostile_files import SPECIAL_FILES, jpeg_header, model_folder, png_header, replace_file
from hostile_loads import run_cases
from model_manifests import manifest_data
from time_limit import time_limit
from vision_nodes import files
from vision_nodes.artifacts.calibration import (CalibrationError, calibration_image,
                                                calibration_set)
from vision_nodes.files import FileRefused, read_regular
from vision_nodes.limits import (MAX_CALIBRATION_FILES, MAX_IMAGE_BYTES, MAX_MODEL_LAYERS,
                                 MAX_MODEL_PARAMETERS)

#: Most a hostile input may add to the peak RSS of the process that reads it.
MAX_RSS_GROWTH_MB = 200


def _one_line(message: str) -> str:
    assert message and '\n' not in message and len(message) <= 600, message[:2000]
    return message


# ----------------------------------------------------------------- the one bounded reader
@pytest.mark.parametrize('kind', sorted(SPECIAL_FILES))
def test_special_files_are_refused_without_being_opened(tmp_path: Path, kind: str,
                                                        monkeypatch: pytest.MonkeyPatch):
    """A FIFO, a device, a folder, a dangling link or a 1 TiB sparse file: refused in one
    line, before any of it is read; a special file is not even opened (a device may act on
    being opened)."""
    path = tmp_path / 'config.json'
    SPECIAL_FILES[kind](path)
    opened: list[str] = []
    real_open = os.open
    monkeypatch.setattr(files.os, 'open', lambda p, *a, **k: opened.append(str(p)) or
                        real_open(p, *a, **k))
    with time_limit(10), pytest.raises(FileRefused) as info:
        read_regular(path, 1 << 20, 'config.json')
    message = _one_line(str(info.value))
    assert str(path) in message
    expected = {'fifo': 'this is a FIFO', 'dev_zero': 'this is a character device',
                'dev_urandom': 'this is a character device', 'folder': 'this is a folder',
                'dangling': 'cannot read config.json: No such file',
                'sparse': f'config.json is {1 << 40} bytes; at most {1 << 20} are accepted'}
    assert expected[kind] in message
    assert opened == []


def test_regular_files_are_read_whole_and_bounded(tmp_path: Path) -> None:
    path = tmp_path / 'small.json'
    path.write_bytes(b'{"a": 1}')
    assert read_regular(path, 8) == b'{"a": 1}'
    link = tmp_path / 'link.json'
    link.symlink_to(path)  # a link to a regular file is that file
    assert read_regular(link, 8) == b'{"a": 1}'
    with pytest.raises(ValueError, match='small.json: thing is 8 bytes; at most 7'):
        read_regular(path, 7, 'thing', ValueError)  # the caller's error class


# ----------------------------------------------------------------- weights files
@pytest.mark.parametrize('kind', ['fifo', 'dev_zero', 'sparse'])
@pytest.mark.parametrize('suffix,backend', [('.onnx', 'onnx'), ('.pt', 'cpu')])
def test_weights_files_are_checked_before_any_runtime_reads_them(tmp_path: Path, kind: str,
                                                                 suffix: str, backend: str):
    """A weights file that is no regular file, or larger than MAX_WEIGHTS_BYTES, fails in one
    line before ONNX Runtime (which opens it by name) or the checkpoint reader reads it."""
    weights = tmp_path / f'model{suffix}'
    SPECIAL_FILES[kind](weights)
    manifest = manifest_data(name='hostile', weights=weights, input_size=64, backends=[backend])
    [result] = run_cases([{'name': kind, 'kind': 'pipeline', 'manifest': manifest,
                           'backend': backend, 'cache': str(tmp_path / 'cache')}], tmp_path,
                         warmup={'kind': 'imports', 'modules': [
                             'torch', 'onnxruntime', 'vision_nodes.pipeline',
                             'vision_nodes.runners.onnx_runner',
                             'vision_nodes.runners.torch_runner']})
    assert result['error'] in ('ModelLoadError', 'RunnerError'), result
    reason = {'fifo': 'must be a regular file; this is a FIFO',
              'dev_zero': 'must be a regular file; this is a character device',
              'sparse': f'weights file is {1 << 40} bytes; at most'}[kind]
    assert reason in _one_line(result['message'])
    assert result['rss_growth_mb'] < MAX_RSS_GROWTH_MB, result


# ----------------------------------------------------------------- model folders
def _load(name: str, weights: Path) -> dict:
    manifest = manifest_data(name='da', task='depth', weights=weights,
                             architecture='transformers', input_size=[70, 98],
                             depth={'kind': 'relative'})
    return {'name': name, 'kind': 'model', 'manifest': manifest, 'weights': str(weights)}


def _with_backbone(config: dict, **changes) -> dict:
    return {**config, 'backbone_config': {**config['backbone_config'], **changes}}


def _hostile_folders(root: Path, tiny: Path) -> dict[str, Path]:
    """One folder per hostile input: special files and absurd or fetching configs."""
    config = json.loads((tiny / 'config.json').read_text())
    remote = {k: v for k, v in config.items() if k != 'backbone_config'}
    configs = {
        'hidden_size_24576': _with_backbone(config, hidden_size=24576),
        'layers_100000': _with_backbone(config, num_hidden_layers=100_000),
        'another_model': _with_backbone(config, hidden_size=32),
        'long_list': {**config, 'neck_hidden_sizes': [4] * 100_000},
        'remote_backbone': {**remote, 'backbone': 'facebook/dinov2-small'},
        'pretrained_backbone': {**remote, 'backbone': 'facebook/dinov2-small',
                                'use_pretrained_backbone': True},
        'timm_backbone': {**config, 'backbone_config': {
            'model_type': 'timm_backbone', 'backbone': 'resnet50',
            'use_pretrained_backbone': True}},
        'remote_code': {**config, 'auto_map': {'AutoModel': 'someone/repo--model.Model'}},
    }
    folders = {name: model_folder(root / name, tiny, data) for name, data in configs.items()}
    for name in ('fifo', 'dev_zero', 'sparse'):
        folders[f'config_{name}'] = model_folder(root / f'config_{name}', tiny)
        replace_file(folders[f'config_{name}'] / 'config.json', SPECIAL_FILES[name])
        folders[f'weights_{name}'] = model_folder(root / f'weights_{name}', tiny)
        replace_file(folders[f'weights_{name}'] / 'model.safetensors', SPECIAL_FILES[name])
    return folders


@pytest.fixture(scope='module')
def tiny(tmp_path_factory) -> Path:
    pytest.importorskip('transformers', reason='transformers is not installed')
    from depth_weights import depth_anything_folder, shared_folder

    return depth_anything_folder(shared_folder(tmp_path_factory) / 'da_tiny_relative')


@pytest.fixture(scope='module')
def hostile_loads(tiny, tmp_path_factory) -> dict[str, dict]:
    """Every hostile folder loaded once, in one bounded child, the Hub not set offline."""
    root = tmp_path_factory.mktemp('hostile_models')
    folders = _hostile_folders(root, tiny)
    cases = [_load(name, folder) for name, folder in folders.items()]
    cases += [_load('good', model_folder(root / 'good', tiny)),
              {'name': 'hub_query', 'kind': 'hub_query', 'repo': 'facebook/dinov2-small'}]
    env = {'HF_HUB_OFFLINE': '0', 'TRANSFORMERS_OFFLINE': None, 'HF_HOME': str(root / 'hf'),
           'PYTHONUNBUFFERED': '1'}
    results = run_cases(cases, root, warmup=_load('warmup', tiny), env=env)
    assert not (root / 'hf').exists() or not list((root / 'hf').rglob('*'))
    return {result['name']: result for result in results}


def _refused(results: dict[str, dict], name: str, pattern: str) -> str:
    """Assert a case failed configure-style: ModelLoadError, one line, no network, bounded."""
    result = results[name]
    assert result['error'] == 'ModelLoadError', result
    message = _one_line(result['message'])
    assert re.search(pattern, message), message
    assert result['network'] == [], result
    assert result['rss_growth_mb'] < MAX_RSS_GROWTH_MB, result
    return message


@pytest.mark.parametrize('file', ['config', 'weights'])
def test_a_fifo_in_the_model_folder_never_blocks(hostile_loads, file: str) -> None:
    """Point 1: a FIFO as config.json or model.safetensors is refused at once."""
    name = 'config.json' if file == 'config' else 'model.safetensors'
    _refused(hostile_loads, f'{file}_fifo', f'{name} must be a regular file; this is a FIFO')


@pytest.mark.parametrize('file', ['config', 'weights'])
def test_unbounded_streams_are_never_read(hostile_loads, file: str) -> None:
    """Point 2: a link to /dev/zero is not read at all, a 1 TiB sparse file refused by size."""
    name = 'config.json' if file == 'config' else 'model.safetensors'
    _refused(hostile_loads, f'{file}_dev_zero', f'{name} must be a regular file; this is a '
             'character device')
    _refused(hostile_loads, f'{file}_sparse', f'{name} is {1 << 40} bytes; at most')


def test_absurd_architecture_sizes_are_refused_before_building(hostile_loads) -> None:
    """Point 3: sizes are checked on the config (the model built on the meta device, which
    allocates nothing) and against the weights, before any memory is spent."""
    _refused(hostile_loads, 'hidden_size_24576',
             rf"config.json' describes a model of \d+ parameters; at most "
             rf'{MAX_MODEL_PARAMETERS} are accepted')
    _refused(hostile_loads, 'layers_100000',
             f'`num_hidden_layers` is 100000; at most {MAX_MODEL_LAYERS} layers are accepted')
    _refused(hostile_loads, 'long_list',
             f'`neck_hidden_sizes` has 100000 items; at most {MAX_MODEL_LAYERS} are accepted')
    _refused(hostile_loads, 'another_model',
             r'model.safetensors holds 58181 parameters but config.json describes a model of '
             r'\d+: both files must come from the same save_pretrained')


@pytest.mark.parametrize('name,key', [
    ('remote_backbone', 'backbone'), ('pretrained_backbone', 'backbone'),
    ('remote_code', 'auto_map')])
def test_nothing_named_in_config_is_fetched(hostile_loads, name: str, key: str) -> None:
    """Point 4: a backbone or code named for download is refused with the fix, whatever
    HF_HUB_OFFLINE says (here: 0), and no connection is attempted."""
    message = _refused(hostile_loads, name, f'`{key}` is .* which transformers would fetch '
                       'from the network; this node never downloads')
    assert 'save the complete model with save_pretrained' in message


def test_only_dinov2_backbones_are_built(hostile_loads) -> None:
    _refused(hostile_loads, 'timm_backbone',
             "backbone_config model_type 'timm_backbone' is not served")


def test_loading_puts_the_process_offline(hostile_loads) -> None:
    """Point 4: after a load, the Hub client refuses requests though the environment said
    HF_HUB_OFFLINE=0; the good folder still loads."""
    assert hostile_loads['good']['error'] is None, hostile_loads['good']
    query = hostile_loads['hub_query']
    assert query['error'] == 'OfflineModeIsEnabled', query
    assert query['network'] == []
    assert all(result['network'] == [] for result in hostile_loads.values())


# ----------------------------------------------------------------- calibration folders
def _png_prefix(width: int, height: int) -> bytes:
    """A real PNG start: header, then compressed rows of zeros for the first few lines."""
    import struct
    import zlib

    rows = zlib.compress(bytes(min(height, 8) * (1 + 3 * width)))
    return png_header(width, height) + struct.pack('>I', len(rows)) + b'IDAT' + rows


def test_calibration_images_beyond_the_frame_bounds_are_skipped(tmp_path: Path, assets):
    """Point 5: each file is bounded like a camera frame before anything is decoded; the
    offenders are skipped, counted, and named in one log line; the rest calibrate."""
    folder = tmp_path / 'calibration'
    folder.mkdir()
    (folder / 'bus.jpg').write_bytes((assets / 'bus.jpg').read_bytes())
    (folder / 'huge.png').write_bytes(_png_prefix(30000, 30000))
    (folder / 'huge.jpg').write_bytes(jpeg_header(20000, 20000) + bytes(64))
    with open(folder / 'big_file.jpg', 'wb') as fh:
        fh.truncate(MAX_IMAGE_BYTES + 1)
    for kind in ('fifo', 'dev_zero', 'folder'):
        SPECIAL_FILES[kind](folder / f'{kind}.png')
    (folder / 'picture.bmp').write_bytes(b'BM' + bytes(60))
    (folder / 'notes.txt').write_text('not an image')  # not an image name: not looked at
    lines: list[str] = []
    with time_limit(30):
        found = calibration_set(folder, log=lines.append)
    assert found.images == (folder / 'bus.jpg',) and found.skipped == 7
    assert len(lines) == 1, lines
    assert _one_line(lines[0]).startswith(
        f"warning: calibration_dir '{folder}': skipped 7 of 8 image files, which are not "
        'used (first: ')
    assert 'big_file.jpg: calibration image is 268435457 bytes; at most' in lines[0]


@pytest.mark.parametrize('name,data,reason', [
    ('huge.png', _png_prefix(30000, 30000), 'png image of 30000x30000 exceeds the decode limit'),
    ('wide.jpg', jpeg_header(16385, 2), 'jpeg image of 16385x2 exceeds the decode limit'),
    ('many.png', png_header(8193, 8192), 'png image of 8193x8192 exceeds the decode limit'),
    ('garbage.jpg', b'GIF89a', 'neither JPEG nor PNG'),
], ids=['30000 square', 'too wide', 'too many pixels', 'not jpeg or png'])
def test_an_image_beyond_the_bounds_is_never_decoded(tmp_path: Path, name: str, data: bytes,
                                                     reason: str) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(CalibrationError, match=re.escape(reason)) as info:
        calibration_image(path)
    assert str(path) in _one_line(str(info.value))
    with pytest.raises(CalibrationError, match='holds no usable image: all 1 were skipped'):
        calibration_set(tmp_path)


def test_a_calibration_folder_of_too_many_files_is_refused(tmp_path: Path) -> None:
    for i in range(MAX_CALIBRATION_FILES + 1):
        (tmp_path / f'{i:05d}.txt').touch()
    with time_limit(30), pytest.raises(CalibrationError,
                                       match=f'holds more than {MAX_CALIBRATION_FILES} files'):
        calibration_set(tmp_path)


def test_calibration_images_decode_as_imread_does(assets) -> None:
    import cv2

    path = assets / 'bus.jpg'
    np.testing.assert_array_equal(calibration_image(path), cv2.imread(str(path)))
