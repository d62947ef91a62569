"""A content-addressed cache for exported model artifacts (ONNX files, TensorRT engines, IR).

Each entry is a folder ``<engine_cache_dir>/<model>-<kind>-<key>/`` holding the artifact files
and ``entry.json`` (the key fields and each file's size and SHA-256). The key is a hash of
everything that changes the artifact: the weights' content hash, input size, precision,
opset, exporter versions, target device. Entries are built in a temporary folder and published
with one atomic ``rename``; a per-key file lock makes concurrent processes build an entry once.
An entry whose files do not match ``entry.json`` (truncated, edited, half-deleted) is treated
as a miss, moved aside and rebuilt.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

ENTRY_FILE = 'entry.json'
#: Bump when the entry layout changes; it is part of every key.
CACHE_FORMAT = 1

_HASH_MEMO: dict[tuple[str, int, int], str] = {}


class CacheError(RuntimeError):
    """The cache folder cannot be used (not writable, not a folder, build failed)."""


def file_sha256(path: str | os.PathLike) -> str:
    """SHA-256 of a file's content, memoised on (path, size, mtime)."""
    path = Path(path)
    st = path.stat()
    memo_key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    cached = _HASH_MEMO.get(memo_key)
    if cached:
        return cached
    digest = hashlib.sha256()
    with path.open('rb') as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b''):
            digest.update(chunk)
    _HASH_MEMO[memo_key] = digest.hexdigest()
    return _HASH_MEMO[memo_key]


def cache_key(fields: dict[str, Any]) -> str:
    """Return a short stable hash of the key fields (JSON-canonicalised)."""
    blob = json.dumps({'cache_format': CACHE_FORMAT, **fields}, sort_keys=True,
                      separators=(',', ':'), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


@dataclass(frozen=True)
class CacheEntry:
    """A published cache entry."""

    path: Path
    key: str
    hit: bool  # True when it already existed, False when it was built by this call

    def file(self, name: str) -> Path:
        """Path of one file inside the entry."""
        return self.path / name

    def read_verified(self, name: str) -> bytes:
        """Return the content of one file of the entry, checked against its recorded SHA-256.

        Runners load artifacts from these bytes, not from the path, so what runs is exactly
        what was checked (a file swapped or corrupted after the check is never loaded).
        """
        try:
            recorded = json.loads((self.path / ENTRY_FILE).read_text())['files'][name]
            data = (self.path / name).read_bytes()
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CacheError(f'cache entry {self.path.name}: cannot read {name}: {exc}') from exc
        if len(data) != recorded.get('size') or \
                hashlib.sha256(data).hexdigest() != recorded.get('sha256'):
            raise CacheError(f'cache entry {self.path.name}: {name} does not match the hash '
                             'recorded when it was built (corrupted or edited); the next '
                             'configure rebuilds it')
        return data


def _safe(name: str) -> str:
    return ''.join(c if c.isalnum() or c in '-_.' else '_' for c in name) or 'model'


class EngineCache:
    """The artifact cache rooted at ``engine_cache_dir``."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(os.path.expanduser(str(root)))

    def _ensure_root(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CacheError(f"engine_cache_dir '{self.root}' cannot be created: "
                             f'{exc.strerror or exc}') from exc
        if not os.access(self.root, os.W_OK | os.X_OK):
            raise CacheError(f"engine_cache_dir '{self.root}' is not writable")

    def entry_dir(self, model: str, kind: str, key: str) -> Path:
        """Where the entry for (model, kind, key) lives."""
        return self.root / f'{_safe(model)}-{_safe(kind)}-{key}'

    def _locate(self, model: str, kind: str, fields: dict[str, Any]) -> tuple[str, Path]:
        key = cache_key({'kind': kind, **fields})
        return key, self.entry_dir(model, kind, key)

    @contextlib.contextmanager
    def _lock(self, entry: Path, timeout_s: float) -> Iterator[None]:
        lock_path = entry.with_name(entry.name + '.lock')
        with open(lock_path, 'a+') as fh:
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EAGAIN, errno.EACCES):
                        raise
                    if time.monotonic() > deadline:
                        raise CacheError(f'timed out after {timeout_s:.0f} s waiting for '
                                         f'another process building {entry.name}') from exc
                    time.sleep(0.1)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    @staticmethod
    def validate(entry: Path, files: tuple[str, ...] = ()) -> bool:
        """Return True when ``entry`` is complete: its entry.json parses, every file matches."""
        try:
            meta = json.loads((entry / ENTRY_FILE).read_text())
            recorded = meta['files']
            for name in files:
                if name not in recorded:
                    return False
            for name, info in recorded.items():
                path = entry / name
                if path.stat().st_size != info['size'] or file_sha256(path) != info['sha256']:
                    return False
            return True
        except (OSError, ValueError, KeyError, TypeError):
            return False

    def lookup(self, model: str, kind: str, fields: dict[str, Any],
               files: tuple[str, ...] = ()) -> CacheEntry | None:
        """Return a valid existing entry, or None (a corrupt one counts as absent)."""
        key, entry = self._locate(model, kind, fields)
        if entry.is_dir() and self.validate(entry, files):
            return CacheEntry(entry, key, hit=True)
        return None

    def get_or_build(self, model: str, kind: str, fields: dict[str, Any],
                     build: Callable[[Path], None], files: tuple[str, ...],
                     lock_timeout_s: float = 1800.0) -> CacheEntry:
        """Return the entry for ``fields``, calling ``build(tmp_dir)`` on a miss.

        ``build`` writes the artifact files named in ``files`` into the folder it is given.
        The folder is published atomically only after ``build`` returns and every file exists.
        """
        found = self.lookup(model, kind, fields, files)
        if found:
            return found
        self._ensure_root()
        key, entry = self._locate(model, kind, fields)
        with self._lock(entry, lock_timeout_s):
            if entry.is_dir():
                if self.validate(entry, files):
                    return CacheEntry(entry, key, hit=True)  # built by another process
                self._discard(entry)
            tmp = Path(tempfile.mkdtemp(prefix=f'.{entry.name}.', dir=self.root))
            try:
                build(tmp)
                missing = [f for f in files if not (tmp / f).is_file()]
                if missing:
                    raise CacheError(f"building {entry.name} produced no {', '.join(missing)}")
                meta = {
                    'model': model, 'kind': kind, 'key': key, 'fields': fields,
                    'created': time.strftime('%Y-%m-%dT%H:%M:%S%z'),
                    'files': {p.name: {'size': p.stat().st_size, 'sha256': file_sha256(p)}
                              for p in sorted(tmp.iterdir()) if p.is_file()},
                }
                _write_atomic(tmp / ENTRY_FILE, json.dumps(meta, indent=2, default=str))
                _fsync_dir(tmp)
                os.rename(tmp, entry)
                _fsync_dir(self.root)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
        return CacheEntry(entry, key, hit=False)

    def _discard(self, entry: Path) -> None:
        """Move a corrupt entry aside (then delete it) so it can be rebuilt."""
        trash = entry.with_name(f'.{entry.name}.corrupt-{uuid.uuid4().hex[:8]}')
        try:
            os.rename(entry, trash)
        except OSError:
            return
        shutil.rmtree(trash, ignore_errors=True)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f'.{path.name}.{uuid.uuid4().hex[:8]}')
    with open(tmp, 'w') as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def default_cache_dir() -> Path:
    """``$VISION_NODES_CACHE_DIR``, else ``$XDG_CACHE_HOME/vision_nodes``, else ~/.cache."""
    env = os.environ.get('VISION_NODES_CACHE_DIR')
    if env:
        return Path(env)
    base = os.environ.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'), '.cache')
    return Path(base) / 'vision_nodes' / 'engines'
