"""vision_nodes.artifacts.cache: keys, hits and misses, atomic publish, corruption, locking."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Callable

import pytest

from vision_nodes.artifacts.cache import (ENTRY_FILE, CacheError, EngineCache, cache_key,
                                          file_sha256)
from vision_nodes.artifacts.onnx_export import onnx_cache_fields
from vision_nodes.manifest import parse_manifest

REPO = Path(__file__).resolve().parents[1]
ARTIFACT = 'model.bin'
FIELDS = {'weights_sha256': 'ab' * 32, 'input_size': [640, 640], 'precision': 'fp32'}


class CountingBuild:
    """A build callable that writes ``ARTIFACT`` and counts its calls."""

    def __init__(self, payload: bytes = b'artifact-bytes' * 100) -> None:
        self.calls = 0
        self.payload = payload

    def __call__(self, folder: Path) -> None:
        self.calls += 1
        (folder / ARTIFACT).write_bytes(self.payload)


def _manifest(input_size: int = 640):
    return parse_manifest({'name': 'm', 'task': 'detect', 'weights': 'm.pt',
                           'input_size': input_size, 'backends': ['cpu', 'onnx']})


def test_file_sha256_matches_hashlib(tmp_path: Path) -> None:
    path = tmp_path / 'blob'
    data = os.urandom(3 * (1 << 20) + 17)  # several read chunks
    path.write_bytes(data)
    assert file_sha256(path) == hashlib.sha256(data).hexdigest()
    assert file_sha256(str(path)) == hashlib.sha256(data).hexdigest()
    path.write_bytes(b'short')  # new size: the memo must not answer
    assert file_sha256(path) == hashlib.sha256(b'short').hexdigest()


def test_cache_key_stable_and_order_independent() -> None:
    key = cache_key(dict(FIELDS))
    assert key == cache_key(dict(reversed(list(FIELDS.items()))))
    assert len(key) == 20 and all(c in '0123456789abcdef' for c in key)


def test_onnx_cache_key_changes_with_every_field(tmp_path: Path) -> None:
    weights = tmp_path / 'm.pt'
    weights.write_bytes(b'weights v1')
    other_weights = tmp_path / 'other.pt'
    other_weights.write_bytes(b'weights v2')
    manifest = _manifest()
    base = onnx_cache_fields(manifest, weights, 'fp32', 17)
    assert base['weights_sha256'] == hashlib.sha256(b'weights v1').hexdigest()
    assert cache_key(base) == cache_key(onnx_cache_fields(manifest, weights, 'fp32', 17))
    variants = {
        'weights': onnx_cache_fields(manifest, other_weights, 'fp32', 17),
        'input_size': onnx_cache_fields(_manifest(320), weights, 'fp32', 17),
        'precision': onnx_cache_fields(manifest, weights, 'fp16', 17),
        'opset': onnx_cache_fields(manifest, weights, 'fp32', 18),
        'exporter': {**base, 'exporter': base['exporter'] + '.1'},
        'architecture': onnx_cache_fields(
            dataclasses.replace(manifest, architecture='onnx'), weights, 'fp32', 17),
    }
    keys = {name: cache_key(fields) for name, fields in variants.items()}
    assert cache_key(base) not in keys.values()
    assert len(set(keys.values())) == len(keys)


def test_get_or_build_miss_then_hit(tmp_path: Path) -> None:
    cache = EngineCache(tmp_path / 'cache')
    build = CountingBuild()
    assert cache.lookup('m', 'onnx', FIELDS, (ARTIFACT,)) is None
    first = cache.get_or_build('m', 'onnx', FIELDS, build, files=(ARTIFACT,))
    assert build.calls == 1
    assert first.hit is False
    assert first.file(ARTIFACT).read_bytes() == build.payload
    second = cache.get_or_build('m', 'onnx', FIELDS, build, files=(ARTIFACT,))
    assert build.calls == 1
    assert second.hit is True
    assert (second.path, second.key) == (first.path, first.key)
    assert cache.lookup('m', 'onnx', FIELDS, (ARTIFACT,)) == second
    meta = json.loads((first.path / ENTRY_FILE).read_text())
    assert meta['fields'] == FIELDS
    assert meta['files'][ARTIFACT] == {'size': len(build.payload),
                                       'sha256': hashlib.sha256(build.payload).hexdigest()}


def test_different_fields_or_kind_build_separately(tmp_path: Path) -> None:
    cache = EngineCache(tmp_path)
    build = CountingBuild()
    a = cache.get_or_build('m', 'onnx', FIELDS, build, files=(ARTIFACT,))
    b = cache.get_or_build('m', 'onnx', {**FIELDS, 'precision': 'fp16'}, build,
                           files=(ARTIFACT,))
    c = cache.get_or_build('m', 'tensorrt', FIELDS, build, files=(ARTIFACT,))
    assert build.calls == 3
    assert len({a.path, b.path, c.path}) == 3


def test_model_name_is_sanitised(tmp_path: Path) -> None:
    cache = EngineCache(tmp_path)
    entry = cache.get_or_build('../evil/name', 'onnx', FIELDS, CountingBuild(),
                               files=(ARTIFACT,))
    assert entry.path.parent == tmp_path
    assert '/' not in entry.path.name


def _visible_dirs(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.is_dir())


def test_failed_build_publishes_nothing_and_propagates(tmp_path: Path) -> None:
    cache = EngineCache(tmp_path)
    seen: list[tuple[Path, bool]] = []
    entry_dir = cache.entry_dir('m', 'onnx', cache_key({'kind': 'onnx', **FIELDS}))

    def failing(folder: Path) -> None:
        seen.append((folder, entry_dir.exists()))
        (folder / ARTIFACT).write_bytes(b'half')
        raise RuntimeError('exporter crashed')

    with pytest.raises(RuntimeError, match='exporter crashed'):
        cache.get_or_build('m', 'onnx', FIELDS, failing, files=(ARTIFACT,))
    (folder, published_during_build), = seen
    assert folder.parent == tmp_path and folder != entry_dir
    assert published_during_build is False
    assert _visible_dirs(tmp_path) == []  # temporary folder removed, nothing published
    assert cache.lookup('m', 'onnx', FIELDS, (ARTIFACT,)) is None

    build = CountingBuild()
    entry = cache.get_or_build('m', 'onnx', FIELDS, build, files=(ARTIFACT,))
    assert build.calls == 1 and entry.hit is False and entry.path == entry_dir
    assert _visible_dirs(tmp_path) == [entry_dir.name]


def test_build_without_promised_file_raises(tmp_path: Path) -> None:
    cache = EngineCache(tmp_path)

    def wrong(folder: Path) -> None:
        (folder / 'other.bin').write_bytes(b'x')

    with pytest.raises(CacheError, match=ARTIFACT):
        cache.get_or_build('m', 'onnx', FIELDS, wrong, files=(ARTIFACT,))
    assert _visible_dirs(tmp_path) == []


def _truncate(entry: Path) -> None:
    with open(entry / ARTIFACT, 'r+b') as fh:
        fh.truncate(10)


def _delete_meta(entry: Path) -> None:
    (entry / ENTRY_FILE).unlink()


def _garble_meta(entry: Path) -> None:
    (entry / ENTRY_FILE).write_text('{not json')


def _delete_artifact(entry: Path) -> None:
    (entry / ARTIFACT).unlink()


@pytest.mark.parametrize('corrupt', [_truncate, _delete_meta, _garble_meta, _delete_artifact])
def test_corrupt_entry_is_rebuilt(tmp_path: Path, corrupt: Callable[[Path], None]) -> None:
    cache = EngineCache(tmp_path)
    build = CountingBuild()
    entry = cache.get_or_build('m', 'onnx', FIELDS, build, files=(ARTIFACT,))
    corrupt(entry.path)
    assert cache.lookup('m', 'onnx', FIELDS, (ARTIFACT,)) is None
    again = cache.get_or_build('m', 'onnx', FIELDS, build, files=(ARTIFACT,))
    assert build.calls == 2
    assert again.hit is False and again.path == entry.path
    assert (again.path / ARTIFACT).read_bytes() == build.payload
    assert _visible_dirs(tmp_path) == [entry.path.name]  # the corrupt copy is gone
    assert cache.get_or_build('m', 'onnx', FIELDS, build, files=(ARTIFACT,)).hit is True
    assert build.calls == 2


def test_entry_missing_a_newly_required_file_is_a_miss(tmp_path: Path) -> None:
    cache = EngineCache(tmp_path)
    cache.get_or_build('m', 'onnx', FIELDS, CountingBuild(), files=(ARTIFACT,))
    assert cache.lookup('m', 'onnx', FIELDS, (ARTIFACT, 'labels.json')) is None


def test_root_under_a_regular_file(tmp_path: Path) -> None:
    blocker = tmp_path / 'file.txt'
    blocker.write_text('not a folder')
    root = blocker / 'cache'
    with pytest.raises(CacheError) as info:
        EngineCache(root).get_or_build('m', 'onnx', FIELDS, CountingBuild(), files=(ARTIFACT,))
    assert str(root) in str(info.value)


def test_root_is_a_regular_file(tmp_path: Path) -> None:
    root = tmp_path / 'file.txt'
    root.write_text('not a folder')
    with pytest.raises(CacheError) as info:
        EngineCache(root).get_or_build('m', 'onnx', FIELDS, CountingBuild(), files=(ARTIFACT,))
    assert str(root) in str(info.value)


@pytest.mark.skipif(os.geteuid() == 0, reason='root ignores folder permissions')
def test_root_not_writable(tmp_path: Path) -> None:
    root = tmp_path / 'ro'
    root.mkdir()
    root.chmod(0o500)
    try:
        with pytest.raises(CacheError, match='not writable') as info:
            EngineCache(root).get_or_build('m', 'onnx', FIELDS, CountingBuild(),
                                           files=(ARTIFACT,))
        assert str(root) in str(info.value)
    finally:
        root.chmod(0o700)


WORKER = textwrap.dedent('''
    import json
    import sys
    import time
    from pathlib import Path

    from vision_nodes.artifacts.cache import EngineCache

    root, counter, start_at = sys.argv[1], Path(sys.argv[2]), float(sys.argv[3])


    def build(folder):
        with counter.open('a') as fh:
            fh.write('built\\n')
        time.sleep(1.0)
        (folder / 'model.bin').write_bytes(b'artifact')


    while time.time() < start_at:
        time.sleep(0.005)
    start = time.time()
    entry = EngineCache(root).get_or_build('m', 'onnx', {'k': 1}, build, files=('model.bin',))
    print(json.dumps({'path': str(entry.path), 'hit': entry.hit, 'start': start,
                      'end': time.time()}))
''')


def test_concurrent_processes_build_once(tmp_path: Path) -> None:
    script = tmp_path / 'worker.py'
    script.write_text(WORKER)
    counter = tmp_path / 'builds.txt'
    root = tmp_path / 'cache'
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join(
        [str(REPO)] + [p for p in os.environ.get('PYTHONPATH', '').split(os.pathsep) if p])}
    start_at = time.time() + 1.0
    procs = [subprocess.Popen([sys.executable, str(script), str(root), str(counter),
                               str(start_at)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env)
             for _ in range(3)]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        results.append(json.loads(out))
    assert counter.read_text().splitlines() == ['built']
    assert len({r['path'] for r in results}) == 1
    assert sorted(r['hit'] for r in results) == [False, True, True]
    # Every process was inside get_or_build while the (1 s) build was running.
    assert max(r['start'] for r in results) < min(r['end'] for r in results)
    assert (Path(results[0]['path']) / 'model.bin').read_bytes() == b'artifact'
