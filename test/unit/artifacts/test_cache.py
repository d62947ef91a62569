"""vision_nodes.artifacts.cache: keys, hits and misses, atomic publish, corruption, locking."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from model_manifests import model_manifest
from vision_nodes.artifacts.cache import (ENTRY_FILE, CacheError, ArtifactCache, cache_key,
                                          file_sha256)
from vision_nodes.artifacts.onnx_export import onnx_cache_fields

REPO = Path(__file__).resolve().parents[3]
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
    manifest = model_manifest()
    base = onnx_cache_fields(manifest, weights, 'fp32', 17)
    assert base['weights_sha256'] == hashlib.sha256(b'weights v1').hexdigest()
    assert cache_key(base) == cache_key(onnx_cache_fields(manifest, weights, 'fp32', 17))
    variants = {
        'weights': onnx_cache_fields(manifest, other_weights, 'fp32', 17),
        'input_size': onnx_cache_fields(model_manifest(input_size=320), weights, 'fp32', 17),
        'precision': onnx_cache_fields(manifest, weights, 'fp16', 17),
        'opset': onnx_cache_fields(manifest, weights, 'fp32', 18),
        'exporter': {**base, 'exporter': base['exporter'] + '.1'},
        'architecture': onnx_cache_fields(
            dataclasses.replace(manifest, architecture='onnx'), weights, 'fp32', 17),
        'task': onnx_cache_fields(dataclasses.replace(manifest, task='pose'), weights, 'fp32',
                                  17),
    }
    keys = {name: cache_key(fields) for name, fields in variants.items()}
    assert cache_key(base) not in keys.values()
    assert len(set(keys.values())) == len(keys)


def test_get_or_build_miss_then_hit(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path / 'cache')
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
    cache = ArtifactCache(tmp_path)
    build = CountingBuild()
    a = cache.get_or_build('m', 'onnx', FIELDS, build, files=(ARTIFACT,))
    b = cache.get_or_build('m', 'onnx', {**FIELDS, 'precision': 'fp16'}, build,
                           files=(ARTIFACT,))
    c = cache.get_or_build('m', 'tensorrt', FIELDS, build, files=(ARTIFACT,))
    assert build.calls == 3
    assert len({a.path, b.path, c.path}) == 3


def test_another_name_with_the_same_key_is_a_hit(tmp_path: Path) -> None:
    """A manifest copied under a new name (same weights, same export): the entry made under
    the first name is the artifact, found without a build; a corrupt one is passed over and
    left in place for its own name's next configure; another kind or key never matches."""
    cache = ArtifactCache(tmp_path)
    build = CountingBuild()
    first = cache.get_or_build('yolov8n', 'onnx', FIELDS, build, files=(ARTIFACT,))
    copy = cache.get_or_build('yolov8n_strict', 'onnx', FIELDS, build, files=(ARTIFACT,))
    assert build.calls == 1 and copy.hit and (copy.path, copy.key) == (first.path, first.key)
    assert cache.lookup('n', 'onnx', {**FIELDS, 'precision': 'fp16'}, (ARTIFACT,)) is None
    assert cache.lookup('n', 'onnx-u8', FIELDS, (ARTIFACT,)) is None
    assert cache.lookup('n', 'onnx', FIELDS, (ARTIFACT, 'more.bin')) is None
    (first.path / ARTIFACT).write_bytes(b'edited')
    other = cache.get_or_build('yolov8n_high', 'onnx', FIELDS, build, files=(ARTIFACT,))
    assert build.calls == 2 and not other.hit and other.path != first.path
    assert other.path.name.startswith('yolov8n_high-onnx-')
    assert first.path.exists()  # not this name's to delete
    again = cache.lookup('yolov8n_strict', 'onnx', FIELDS, (ARTIFACT,))
    assert again is not None and again.path == other.path


def test_model_name_is_sanitised(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path)
    entry = cache.get_or_build('../evil/name', 'onnx', FIELDS, CountingBuild(),
                               files=(ARTIFACT,))
    assert entry.path.parent == tmp_path
    assert '/' not in entry.path.name


def _visible_dirs(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.is_dir())


def test_failed_build_publishes_nothing_and_propagates(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path)
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
    cache = ArtifactCache(tmp_path)

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
    cache = ArtifactCache(tmp_path)
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
    cache = ArtifactCache(tmp_path)
    cache.get_or_build('m', 'onnx', FIELDS, CountingBuild(), files=(ARTIFACT,))
    assert cache.lookup('m', 'onnx', FIELDS, (ARTIFACT, 'labels.json')) is None


def test_root_under_a_regular_file(tmp_path: Path) -> None:
    blocker = tmp_path / 'file.txt'
    blocker.write_text('not a folder')
    root = blocker / 'cache'
    with pytest.raises(CacheError) as info:
        ArtifactCache(root).get_or_build('m', 'onnx', FIELDS, CountingBuild(), files=(ARTIFACT,))
    assert str(root) in str(info.value)


def test_root_is_a_regular_file(tmp_path: Path) -> None:
    root = tmp_path / 'file.txt'
    root.write_text('not a folder')
    with pytest.raises(CacheError) as info:
        ArtifactCache(root).get_or_build('m', 'onnx', FIELDS, CountingBuild(), files=(ARTIFACT,))
    assert str(root) in str(info.value)


@pytest.mark.skipif(os.geteuid() == 0, reason='root ignores folder permissions')
def test_root_not_writable(tmp_path: Path) -> None:
    root = tmp_path / 'ro'
    root.mkdir()
    root.chmod(0o500)
    try:
        with pytest.raises(CacheError, match='not writable') as info:
            ArtifactCache(root).get_or_build('m', 'onnx', FIELDS, CountingBuild(),
                                             files=(ARTIFACT,))
        assert str(root) in str(info.value)
    finally:
        root.chmod(0o700)


WORKER = textwrap.dedent('''
    import json
    import sys
    import time
    from pathlib import Path

    from vision_nodes.artifacts.cache import ArtifactCache

    root, counter, start_at = sys.argv[1], Path(sys.argv[2]), float(sys.argv[3])


    def build(folder):
        with counter.open('a') as fh:
            fh.write('built\\n')
        time.sleep(1.0)
        (folder / 'model.bin').write_bytes(b'artifact')


    while time.time() < start_at:
        time.sleep(0.005)
    start = time.time()
    entry = ArtifactCache(root).get_or_build('m', 'onnx', {'k': 1}, build, files=('model.bin',))
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


# ----------------------------------------------------------------- hostile and stale entries
def _flip_in_place(path: Path, offset: int = 100) -> None:
    """Change one byte of ``path`` and put its modification time back (size unchanged)."""
    info = path.stat()
    with open(path, 'r+b') as fh:
        fh.seek(offset)
        byte = fh.read(1)
        fh.seek(offset)
        fh.write(bytes([byte[0] ^ 0xFF]))
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert path.stat().st_size == info.st_size
    assert path.stat().st_mtime_ns == info.st_mtime_ns


def test_in_place_corruption_keeping_size_and_mtime_is_a_miss(tmp_path: Path) -> None:
    """Hashes are never memoised on (path, size, mtime): an in-place edit is seen."""
    cache = ArtifactCache(tmp_path)
    build = CountingBuild()
    entry = cache.get_or_build('m', 'onnx', FIELDS, build, files=(ARTIFACT,))
    assert cache.lookup('m', 'onnx', FIELDS, (ARTIFACT,)) is not None  # hashed once here
    _flip_in_place(entry.file(ARTIFACT))
    assert cache.lookup('m', 'onnx', FIELDS, (ARTIFACT,)) is None
    with pytest.raises(CacheError, match='does not match the hash'):
        entry.read_verified(ARTIFACT)
    again = cache.get_or_build('m', 'onnx', FIELDS, build, files=(ARTIFACT,))
    assert build.calls == 2 and again.hit is False
    assert again.read_verified(ARTIFACT) == build.payload


def test_weights_hash_sees_in_place_edits(tmp_path: Path) -> None:
    """The cache key's weights hash follows the content, whatever size and mtime say."""
    weights = tmp_path / 'm.pt'
    weights.write_bytes(bytes(range(256)) * 4)
    before = onnx_cache_fields(model_manifest(), weights, 'fp32')['weights_sha256']
    _flip_in_place(weights)
    after = onnx_cache_fields(model_manifest(), weights, 'fp32')['weights_sha256']
    assert before != after == hashlib.sha256(weights.read_bytes()).hexdigest()


def test_corruption_after_lookup_is_caught_at_read(tmp_path: Path) -> None:
    """A file corrupted between the lookup and the load: a clear CacheError, then a rebuild."""
    cache = ArtifactCache(tmp_path)
    build = CountingBuild()
    cache.get_or_build('m', 'onnx', FIELDS, build, files=(ARTIFACT,))
    found = cache.get_or_build('m', 'onnx', FIELDS, build, files=(ARTIFACT,))
    assert found.hit is True
    found.file(ARTIFACT).write_bytes(b'X' * len(build.payload))
    with pytest.raises(CacheError) as info:
        found.read_verified(ARTIFACT)
    message = str(info.value)
    assert found.path.name in message and 'next configure rebuilds it' in message
    assert '\n' not in message
    rebuilt = cache.get_or_build('m', 'onnx', FIELDS, build, files=(ARTIFACT,))
    assert rebuilt.hit is False and rebuilt.read_verified(ARTIFACT) == build.payload


def _rewrite_meta(entry: Path, change: Callable[[dict], None]) -> None:
    meta = json.loads((entry / ENTRY_FILE).read_text())
    change(meta)
    (entry / ENTRY_FILE).write_text(json.dumps(meta))


def _list_outside(target: str) -> Callable[[Path], None]:
    def apply(entry: Path) -> None:
        data = Path(target).read_bytes() if Path(target).is_file() else b''
        _rewrite_meta(entry, lambda meta: meta['files'].update({target: {
            'size': len(data), 'sha256': hashlib.sha256(data).hexdigest()}}))
    return apply


def _symlink_artifact_to(target: str) -> Callable[[Path], None]:
    def apply(entry: Path) -> None:
        data = (entry / ARTIFACT).read_bytes()
        (entry / ARTIFACT).unlink()
        outside = entry.parent / 'outside.bin'
        outside.write_bytes(data)  # same bytes: only the link makes it wrong
        os.symlink(target if target != 'outside' else outside, entry / ARTIFACT)
    return apply


def _fifo_artifact(entry: Path) -> None:
    (entry / ARTIFACT).unlink()
    os.mkfifo(entry / ARTIFACT)


def _huge_recorded_size(entry: Path) -> None:
    _rewrite_meta(entry, lambda meta: meta['files'][ARTIFACT].update({'size': 1 << 62}))


def _entry_is_a_link(entry: Path) -> None:
    moved = entry.with_name('elsewhere')
    os.rename(entry, moved)
    os.symlink(moved, entry)


def _entry_is_a_file(entry: Path) -> None:
    shutil.rmtree(entry)
    entry.write_bytes(b'not a folder')


def _deeply_nested_meta(entry: Path) -> None:
    (entry / ENTRY_FILE).write_text('[' * 100_000 + ']' * 100_000)


HOSTILE: list[tuple[str, Callable[[Path], None]]] = [
    ('lists /dev/zero', _list_outside('/dev/zero')),
    ('lists a file outside', _list_outside('/etc/hostname')),
    ('lists ../', _list_outside('../outside.bin')),
    ('artifact links to /dev/zero', _symlink_artifact_to('/dev/zero')),
    ('artifact links outside', _symlink_artifact_to('outside')),
    ('artifact is a fifo', _fifo_artifact),
    ('huge recorded size', _huge_recorded_size),
    ('entry is a link', _entry_is_a_link),
    ('entry is a file', _entry_is_a_file),
    ('entry.json nested 100000 deep', _deeply_nested_meta),
]


def attack_and_recover(root: str, attack_name: str) -> dict:
    """Build an entry, attack it, then look it up, read it and get it again (in a child)."""
    attack = dict(HOSTILE)[attack_name]
    cache = ArtifactCache(root)
    build = CountingBuild()
    entry = cache.get_or_build('m', 'onnx', FIELDS, build, files=(ARTIFACT,))
    attack(entry.path)
    result: dict = {'lookup': cache.lookup('m', 'onnx', FIELDS, (ARTIFACT,)) is not None}
    try:
        entry.read_verified(ARTIFACT)
        result['read_error'] = None
    except CacheError as exc:
        result['read_error'] = str(exc)
    again = cache.get_or_build('m', 'onnx', FIELDS, build, files=(ARTIFACT,))
    result.update(calls=build.calls, hit=again.hit, link=again.path.is_symlink(),
                  payload=again.read_verified(ARTIFACT) == build.payload,
                  elsewhere=(Path(root) / 'elsewhere').exists())
    return result


CHILD = textwrap.dedent('''
    import json, resource, signal, sys
    sys.path.insert(0, sys.argv[1])
    # A read of /dev/zero or a fifo never ends: bounded memory and time turn that into a
    # failed test instead of a machine out of memory or a hung suite.
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
    signal.alarm(30)
    import test_cache
    print(json.dumps(getattr(test_cache, sys.argv[2])(*sys.argv[3:])))
''')


def run_in_child(func: str, *args: str) -> dict:
    """Run ``func(*args)`` of this module in a child process with bounded memory and time."""
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join(  # the package, the shared test helpers
        [str(REPO), str(REPO / 'test')] +
        [p for p in os.environ.get('PYTHONPATH', '').split(os.pathsep) if p])}
    here = str(Path(__file__).resolve().parent)  # where the child imports this module from
    proc = subprocess.run([sys.executable, '-c', CHILD, here, func, *args],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, f'child exited {proc.returncode}: {proc.stderr[-3000:]}'
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize('attack', [n for n, _ in HOSTILE])
def test_hostile_entry_is_refused_and_rebuilt(tmp_path: Path, attack: str) -> None:
    """Entries may only name regular files inside themselves; nothing else is read."""
    result = run_in_child('attack_and_recover', str(tmp_path / 'cache'), attack)
    assert result['lookup'] is False
    assert result['read_error'] is not None
    assert '\n' not in result['read_error'] and len(result['read_error']) < 500
    assert result['calls'] == 2 and result['hit'] is False
    assert result['payload'] is True and result['link'] is False
    assert result['elsewhere'] == (attack == 'entry is a link')  # the target is untouched


def test_build_records_only_regular_files(tmp_path: Path) -> None:
    """A link a build leaves behind is not part of the entry; a required one is an error."""
    cache = ArtifactCache(tmp_path)
    (tmp_path / 'secret').write_text('outside')

    def with_link(folder: Path) -> None:
        (folder / ARTIFACT).write_bytes(b'a')
        os.symlink(tmp_path / 'secret', folder / 'extra.bin')

    entry = cache.get_or_build('m', 'onnx', FIELDS, with_link, files=(ARTIFACT,))
    assert set(json.loads((entry.path / ENTRY_FILE).read_text())['files']) == {ARTIFACT}

    def link_only(folder: Path) -> None:
        os.symlink(tmp_path / 'secret', folder / ARTIFACT)

    with pytest.raises(CacheError, match=f'produced no {ARTIFACT}'):
        cache.get_or_build('m', 'onnx', {'other': 1}, link_only, files=(ARTIFACT,))


HOLDER = textwrap.dedent('''
    import sys
    import time
    from pathlib import Path

    from vision_nodes.artifacts.cache import ArtifactCache

    root, ready = sys.argv[1], Path(sys.argv[2])


    def build(folder):
        (folder / 'model.bin').write_bytes(b'half-written')
        ready.write_text(str(folder))
        time.sleep(600)  # an export that is still running (or hung)


    ArtifactCache(root).get_or_build('m', 'onnx', {'k': 'live'}, build, files=('model.bin',))
''')


def test_stale_temporaries_are_removed_never_a_live_build(tmp_path: Path) -> None:
    """A killed build's folder goes; a folder whose build holds its lock stays."""
    root = tmp_path / 'cache'
    script = tmp_path / 'holder.py'
    script.write_text(HOLDER)
    ready = tmp_path / 'ready'
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join(
        [str(REPO)] + [p for p in os.environ.get('PYTHONPATH', '').split(os.pathsep) if p])}
    proc = subprocess.Popen([sys.executable, str(script), str(root), str(ready)], env=env,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, 'the holder never started its build'
            time.sleep(0.05)
        live = Path(ready.read_text())
        # A folder left by an earlier version's killed build (mkdtemp naming), no lock held.
        old = root / f'.m-onnx-{"0" * 20}.k3x_9a7q'
        old.mkdir()
        (old / 'model.bin').write_bytes(b'stale')
        cache = ArtifactCache(root)
        build = CountingBuild()
        cache.get_or_build('m', 'onnx', FIELDS, build, files=(ARTIFACT,))
        assert live.is_dir(), 'a live build lost its folder'
        assert not old.exists()
        assert cache.remove_stale_temporaries() == []
        proc.send_signal(signal.SIGKILL)  # killed mid-export: its lock goes with it
        proc.wait(30)
        assert live.is_dir()  # left behind
        assert cache.remove_stale_temporaries() == [live.name]
        assert not live.exists()
        assert cache.get_or_build('m', 'onnx', FIELDS, build, files=(ARTIFACT,)).hit is True
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ----------------------------------------------------------------- through the ONNX runner
class CorruptedAfterCheck(ArtifactCache):
    """A cache whose artifact another process corrupts right after it was checked."""

    def get_or_build(self, *args, **kwargs):
        entry = super().get_or_build(*args, **kwargs)
        onnx = entry.file('model.onnx')
        _flip_in_place(onnx, onnx.stat().st_size // 2)
        return entry


def test_onnx_runner_never_runs_a_corrupted_cached_model(model_dir, engine_cache_dir, bus_bgr,
                                                         tmp_path: Path) -> None:
    """The issue's case: a cached .onnx corrupted in place, size and mtime kept, same process.

    It used to be a cache hit and the node published 97 detections instead of 5. Now one
    corrupted after the check is never loaded, and the next configure rebuilds it.
    """
    pytest.importorskip('onnxruntime', reason='ONNX Runtime is not installed')
    from vision_nodes.tasks import resolve_manifest
    from vision_nodes.pipeline import build_pipeline
    from vision_nodes.runners.base import RunnerConfig
    from vision_nodes.pipeline import create_runner
    from vision_nodes.tasks.detect import DetectionParams

    manifest = resolve_manifest('yolov8n')
    first = build_pipeline(manifest, 'onnx', model_dir=str(model_dir),
                           cache_dir=engine_cache_dir)
    expected = first.process(bus_bgr, 'bgr8', DetectionParams())
    entry_dir = first.runner.model_path.parent
    first.close()
    cache = tmp_path / 'cache'
    shutil.copytree(entry_dir, cache / entry_dir.name)  # keeps mtimes
    hit = build_pipeline(manifest, 'onnx', model_dir=str(model_dir), cache_dir=cache)
    assert hit.runner.cache_hit is True
    hit.close()
    config = RunnerConfig(manifest=manifest, weights=manifest.weights_path(str(model_dir)),
                          backend='onnx', cache=CorruptedAfterCheck(cache))
    with pytest.raises(CacheError, match='does not match the hash.*next configure rebuilds'):
        create_runner(config)
    rebuilt = build_pipeline(manifest, 'onnx', model_dir=str(model_dir), cache_dir=cache)
    try:
        assert rebuilt.runner.cache_hit is False
        dets = rebuilt.process(bus_bgr, 'bgr8', DetectionParams())
    finally:
        rebuilt.close()
    # The rebuilt entry gives the good model's detections (bus.jpg: a handful), not the
    # corrupted one's (97 in the report).
    assert len(dets) == len(expected) and 4 <= len(expected) <= 8
    np.testing.assert_allclose(dets.boxes, expected.boxes, atol=1e-3)
