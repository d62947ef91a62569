"""Fuzzing what the node reads from folders: transformers model folders, calibration sets.

Seeded and bounded like ``test_fuzz`` (``VISION_NODES_FUZZ_SCALE`` runs N times as many
cases). Every case runs in a bounded child (``hostile_loads``: limited address space, each
case timed out, connections refused and recorded) and must end in a result or in the
documented error class with a one-line message, within ``MAX_RSS_GROWTH_MB`` of peak memory
and without touching the network.
"""

from __future__ import annotations

import json
import os
import random
import struct
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from hostile_files import SPECIAL_FILES, jpeg_header, model_folder, png_header, replace_file
from hostile_loads import run_cases

SCALE = max(1, int(os.environ.get('VISION_NODES_FUZZ_SCALE', '1')))
MAX_RSS_GROWTH_MB = 200
MAX_MESSAGE = 600
#: Values a fuzzed config.json field may get: wrong types, absurd sizes, names to fetch.
HOSTILE_VALUES = [None, True, False, -1, 0, 1, 3, 24576, 100_000, 1 << 40, 10 ** 30, 1e308,
                  -1e308, 0.5, float('nan'), float('inf'), '', 'x' * 5000,
                  'facebook/dinov2-small', [], {}, [1] * 300, [4, 8], [[[[1]]]],
                  {'model_type': 'dinov2'}, {'model_type': 'timm_backbone'}]
#: Fields a fuzzed config.json may have set, top level or in backbone_config.
FIELDS = ['model_type', 'backbone', 'use_pretrained_backbone', 'use_timm_backbone', 'auto_map',
          'backbone_config', 'neck_hidden_sizes', 'reassemble_factors', 'fusion_hidden_size',
          'reassemble_hidden_size', 'head_hidden_size', 'head_in_index', 'patch_size',
          'depth_estimation_type', 'max_depth']
BACKBONE_FIELDS = ['hidden_size', 'num_hidden_layers', 'num_attention_heads', 'mlp_ratio',
                   'intermediate_size', 'image_size', 'patch_size', 'num_channels',
                   'out_indices', 'out_features', 'layerscale_value', 'use_swiglu_ffn',
                   'backbone', 'model_type', 'hidden_act']
#: Sizes of the right type but absurd (or just another model's): (sub-config, key, values).
SIZE_EDITS = [
    ('backbone_config', 'hidden_size', [24576, 1 << 20, 1 << 40, 10 ** 30, 7, 32]),
    ('backbone_config', 'num_hidden_layers', [0, 1, 256, 257, 100_000, 10 ** 30]),
    ('backbone_config', 'num_attention_heads', [0, 3, 1 << 30]),
    ('backbone_config', 'image_size', [14, 1 << 20, 10 ** 9]),
    ('backbone_config', 'patch_size', [1, 518, 1 << 20]),
    ('backbone_config', 'mlp_ratio', [0, 1e6, 1e30]),
    ('backbone_config', 'intermediate_size', [1 << 30, 64]),
    ('backbone_config', 'num_channels', [1, 1 << 30]),
    ('backbone_config', 'out_indices', [[0], [0, 1, 2, 3, 4, 5], list(range(200))]),
    (None, 'neck_hidden_sizes', [[1 << 30] * 4, [4, 8], [0, 0, 0, 0], [8, 16, 32, 32]]),
    (None, 'fusion_hidden_size', [1 << 24, 0, 16]),
    (None, 'reassemble_factors', [[1e9, 1, 1, 1], [4, 2, 1]]),
    (None, 'head_hidden_size', [1 << 30, 8]),
]
#: Whole config.json files that are not a config.
CONFIG_TEXTS = [b'', b'null', b'[]', b'{', b'"x"', b'\xff\xfe garbage', b'1e999999',
                b'[' * 100_000 + b']' * 100_000, b'{"a": ' * 50_000 + b'1' + b'}' * 50_000,
                b'{"model_type": "depth_anything", "pad": "' + b'x' * 900_000 + b'"}',
                b'\xef\xbb\xbf{"model_type": "depth_anything"}']


def _rewrite_safetensors(path: Path, change: Callable[[dict], None]) -> None:
    """Rewrite a safetensors file's header with ``change`` (the data stays as it is)."""
    raw = path.read_bytes()
    length = int.from_bytes(raw[:8], 'little')
    header = json.loads(raw[8:8 + length])
    change(header)
    blob = json.dumps(header).encode()
    path.write_bytes(struct.pack('<Q', len(blob)) + blob + raw[8 + length:])


def _own_weights(folder: Path) -> Path:
    """Replace the linked weights with a private copy that may be edited."""
    path = folder / 'model.safetensors'
    data = path.read_bytes()
    path.unlink()
    path.write_bytes(data)
    return path


def _tensor_edit(rng: random.Random) -> Callable[[dict], None]:
    def change(header: dict) -> None:
        name = rng.choice([k for k in header if k != '__metadata__'])
        entry = header[name]
        what = rng.randrange(6)
        if what == 0:
            entry['dtype'] = rng.choice(['F16', 'Q4', '', 'I64'])
        elif what == 1:
            entry['shape'] = rng.choice([[-1], [1 << 40, 1 << 40], [], ['a'], [2] * 20])
        elif what == 2:
            entry['data_offsets'] = rng.choice([[0, 1 << 62], [-8, 0], [5, 3], None, [0]])
        elif what == 3:
            del header[name]
        elif what == 4:
            header[name] = rng.choice([None, [], 'x', {}])
        else:
            header['__metadata__'] = rng.choice([None, {'format': 'pt'}, [1] * 10])
    return change


def _mutate_weights(folder: Path, rng: random.Random) -> str:
    path = folder / 'model.safetensors'
    what = rng.randrange(5)
    if what == 0:
        kind = rng.choice(sorted(SPECIAL_FILES))
        replace_file(path, SPECIAL_FILES[kind])
        return f'weights:{kind}'
    own = _own_weights(folder)
    if what == 1:
        own.write_bytes(own.read_bytes()[:rng.choice([0, 4, 8, 100, 1000, 20_000])])
        return 'weights:truncated'
    if what == 2:
        data = bytearray(own.read_bytes())
        data[:8] = struct.pack('<Q', rng.choice([1 << 63, 1 << 30, len(data), 2 << 20]))
        own.write_bytes(bytes(data))
        return 'weights:header length'
    if what == 3:
        data = own.read_bytes()
        length = int.from_bytes(data[:8], 'little')
        own.write_bytes(data[:8] + bytes(rng.randrange(256) for _ in range(length))
                        + data[8 + length:])
        return 'weights:header garbage'
    _rewrite_safetensors(own, _tensor_edit(rng))
    return 'weights:tensor entry'


def _mutate_config(folder: Path, config: dict, rng: random.Random) -> str:
    path = folder / 'config.json'
    what = rng.randrange(5)
    if what == 0:
        kind = rng.choice(sorted(SPECIAL_FILES))
        replace_file(path, SPECIAL_FILES[kind])
        return f'config:{kind}'
    if what == 4:
        changed = json.loads(json.dumps(config))
        scope, key, values = rng.choice(SIZE_EDITS)
        (changed[scope] if scope else changed)[key] = rng.choice(values)
        path.write_text(json.dumps(changed))
        return f'config:size {key}'
    if what == 1:
        path.write_bytes(rng.choice(CONFIG_TEXTS))
        return 'config:text'
    changed = json.loads(json.dumps(config))
    if what == 2:
        key = rng.choice(FIELDS)
        changed[key] = rng.choice(HOSTILE_VALUES)
    else:
        key = rng.choice(BACKBONE_FIELDS)
        changed['backbone_config'][key] = rng.choice(HOSTILE_VALUES)
    path.write_text(json.dumps(changed))
    return f'config:{key}'


def _model_case(root: Path, tiny: Path, config: dict, index: int,
                rng: random.Random) -> dict[str, Any]:
    folder = model_folder(root / f'case{index}', tiny)
    mutations = [_mutate_config, _mutate_weights]
    chosen = rng.sample(mutations, rng.randrange(1, 3))
    names = [m(folder, config, rng) if m is _mutate_config else m(folder, rng) for m in chosen]
    manifest = {'name': 'da', 'task': 'depth', 'weights': str(folder),
                'architecture': 'transformers', 'input_size': [70, 98],
                'depth': {'kind': 'relative'}, 'backends': ['cpu']}
    return {'name': '+'.join(names), 'kind': 'model', 'manifest': manifest,
            'weights': str(folder), 'timeout': 120}


def _check(results: list[dict], allowed: str) -> dict[str, int]:
    """Assert every case ended in a result or ``allowed``, bounded; count the outcomes."""
    failures, counts = [], {'ok': 0, 'refused': 0}
    for result in results:
        message = result['message']
        if result['error'] is None:
            counts['ok'] += 1
        elif result['error'] != allowed or not message or '\n' in message \
                or len(message) > MAX_MESSAGE:
            failures.append(f"{result['name']}: {result['error']}: {message[:300]}")
        else:
            counts['refused'] += 1
        if result['rss_growth_mb'] >= MAX_RSS_GROWTH_MB or result['network']:
            failures.append(f"{result['name']}: RSS +{result['rss_growth_mb']:.0f} MB, "
                            f"connections {result['network']}")
    assert failures == [], failures[:10]
    return counts


def test_fuzzed_model_folders(tmp_path_factory) -> None:
    """config.json and model.safetensors edited, replaced by special files or garbage: each
    folder loads or is refused (ModelLoadError, one line), in bounded memory, offline."""
    pytest.importorskip('transformers', reason='transformers is not installed')
    from depth_weights import depth_anything_folder, shared_folder

    tiny = depth_anything_folder(shared_folder(tmp_path_factory) / 'da_tiny_relative')
    config = json.loads((tiny / 'config.json').read_text())
    root = tmp_path_factory.mktemp('fuzzed_models')
    rng = random.Random(20)
    cases = [_model_case(root, tiny, config, i, rng) for i in range(60 * SCALE)]
    warmup = {**cases[0], 'name': 'warmup', 'weights': str(tiny),
              'manifest': {**cases[0]['manifest'], 'weights': str(tiny)}}
    results = run_cases(cases, root, warmup=warmup,
                        env={'HF_HUB_OFFLINE': None, 'TRANSFORMERS_OFFLINE': None},
                        timeout=1800 * SCALE)
    counts = _check(results, 'ModelLoadError')
    assert counts['refused'] >= 30 * SCALE, counts


# ----------------------------------------------------------------- calibration sets
def _encoded(rng: random.Random, suffix: str) -> bytes:
    import cv2

    shape = (rng.randrange(1, 64), rng.randrange(1, 64), 3)
    image = np.random.default_rng(rng.randrange(1 << 30)).integers(0, 255, shape, np.uint8)
    ok, data = cv2.imencode(suffix, image)
    assert ok
    return data.tobytes()


def _calibration_file(path: Path, rng: random.Random) -> None:
    what = rng.randrange(8)
    if what == 0:
        SPECIAL_FILES[rng.choice(sorted(SPECIAL_FILES))](path)
    elif what == 1:
        side = rng.choice([16385, 30000, 65535])
        header = png_header if path.suffix.lower() == '.png' else jpeg_header
        path.write_bytes(header(side, rng.choice([1, 9000, side])) + bytes(64))
    elif what == 2:
        path.write_bytes(_encoded(rng, '.png' if path.suffix.lower() == '.png' else '.jpg')
                         [:rng.randrange(1, 200)])
    elif what == 3:
        path.write_bytes(bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300))))
    else:
        path.write_bytes(_encoded(rng, '.png' if path.suffix.lower() == '.png' else '.jpg'))


def test_fuzzed_calibration_sets(tmp_path: Path) -> None:
    """Folders of valid, truncated, oversized, garbage and special files: each set lists and
    decodes what is usable or is refused (CalibrationError, one line), in bounded memory."""
    rng = random.Random(21)
    cases = []
    for index in range(30 * SCALE):
        folder = tmp_path / f'set{index}'
        folder.mkdir()
        for number in range(rng.randrange(1, 10)):
            suffix = rng.choice(['.jpg', '.jpeg', '.png', '.PNG', '.bmp', '.txt'])
            _calibration_file(folder / f'{number:02d}{suffix}', rng)
        cases.append({'name': f'set{index}', 'kind': 'calibration', 'folder': str(folder),
                      'timeout': 60})
    results = run_cases(cases, tmp_path, timeout=600 * SCALE)
    counts = _check(results, 'CalibrationError')
    assert counts['ok'] >= 5 * SCALE and counts['refused'] >= 3 * SCALE, counts
    for result in results:
        if result['error'] is None:
            outcome = result['outcome']
            assert len(outcome['log']) == (1 if outcome['skipped'] else 0), outcome
