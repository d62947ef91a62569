"""A content-addressed cache for exported model artifacts (ONNX files, TensorRT engines, IR).

Each entry is a folder ``<engine_cache_dir>/<model>-<kind>-<key>/`` holding the artifact files
and ``entry.json`` (the key fields and each file's size and SHA-256). The key is a hash of
everything that changes the artifact: the weights' content hash, input size, precision,
opset, exporter versions, target device. Entries are built in a temporary folder and published
with one atomic ``rename``; a per-key file lock makes concurrent processes build an entry once.
An entry whose files do not match ``entry.json`` (truncated, edited, half-deleted) is treated
as a miss, moved aside and rebuilt. The model name only makes the folder readable: a lookup
that finds no entry of its own name takes an intact one of the same kind and key made under
another name (the same weights exported the same way; a TensorRT engine's file, named after
its model, is found through the entry's listing).

The cache is untrusted input: nothing read from it is believed without checking. Hashes are
computed from the content every time (never memoised on path, size or modification time,
which an in-place edit can keep); an entry may only list plain regular files inside its own
folder, opened without following links and size-checked before they are read; and runners
load the bytes :meth:`CacheEntry.read_verified` checked, never the path again. Temporary
folders left by a process killed mid-build are removed once no process holds their key's lock.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from ..files import open_regular
from ..limits import MAX_CACHE_FILE_BYTES, MAX_ENTRY_FILES, MAX_ENTRY_JSON_BYTES
from ..text import clip, show

ENTRY_FILE = 'entry.json'
#: Bump when the entry layout changes; it is part of every key.
CACHE_FORMAT = 1

#: A file an entry may list: a plain name inside the entry (no separator, not '.' or '..').
_MEMBER = re.compile(r'[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}')
#: Temporary folders next to the entries: ``.<entry>.build-<hex>`` while an entry is built
#: (``.<entry>.<8 chars>`` from earlier versions) and ``.<entry>.corrupt-<hex>`` while a
#: corrupt one is deleted. Entry names end in their 20-hex-digit key.
_TEMP = re.compile(r'\.(?P<entry>.+-[0-9a-f]{20})\.(?:[a-z0-9_]{8}|(?:build|corrupt)-[0-9a-f]{8})')
_O_CLOEXEC = getattr(os, 'O_CLOEXEC', 0)
_O_NOFOLLOW = getattr(os, 'O_NOFOLLOW', 0)
_CHUNK = 1 << 20


class CacheError(RuntimeError):
    """The cache folder cannot be used (not writable, not a folder, build failed)."""


def file_sha256(path: str | os.PathLike, max_bytes: int = MAX_CACHE_FILE_BYTES) -> str:
    """SHA-256 of a regular file's content, read now (never memoised: edits may keep mtime).

    Raises OSError (:class:`~vision_nodes.files.FileRefused`) for anything but a regular file
    of at most ``max_bytes``.
    """
    fd, _ = open_regular(path, max_bytes)
    try:
        return _hash_fd(fd, max_bytes)[0]
    finally:
        os.close(fd)


def _hash_fd(fd: int, limit: int | None) -> tuple[str, int]:
    """Hash what ``fd`` holds from its current offset; stop after ``limit`` + 1 bytes."""
    digest = hashlib.sha256()
    total = 0
    while limit is None or total <= limit:
        chunk = os.read(fd, _CHUNK if limit is None else min(_CHUNK, limit + 1 - total))
        if not chunk:
            break
        digest.update(chunk)
        total += len(chunk)
    return digest.hexdigest(), total


def cache_key(fields: dict[str, Any]) -> str:
    """Return a short stable hash of the key fields (JSON-canonicalised)."""
    blob = json.dumps({'cache_format': CACHE_FORMAT, **fields}, sort_keys=True,
                      separators=(',', ':'), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def _open_dir(path: Path) -> int:
    """Open an entry folder itself (not a link to one elsewhere)."""
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC)


def _open_member(dir_fd: int, name: str, max_bytes: int) -> tuple[int, int]:
    """Open ``name`` inside the folder ``dir_fd``: a regular file, not a link; (fd, size).

    ``O_NONBLOCK`` keeps a FIFO from blocking the open; the checks run on the open file, so
    what is checked is what is then read.
    """
    if not isinstance(name, str) or not _MEMBER.fullmatch(name):
        raise CacheError(f'{show(name)} is not a plain file name inside the entry')
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | _O_NOFOLLOW | _O_CLOEXEC,
                     dir_fd=dir_fd)
    except OSError as exc:
        reason = 'is a symbolic link' if exc.errno == errno.ELOOP else \
            f'cannot be opened ({clip(exc.strerror or exc)})'
        raise CacheError(f'{name} {reason}') from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise CacheError(f'{name} is not a regular file')
    if info.st_size > max_bytes:
        os.close(fd)
        raise CacheError(f'{name} is {info.st_size} bytes, more than the {max_bytes} accepted')
    return fd, info.st_size


def _read_member(dir_fd: int, name: str, max_bytes: int) -> bytes:
    fd, size = _open_member(dir_fd, name, max_bytes)
    with os.fdopen(fd, 'rb') as fh:
        data = fh.read(size + 1)  # one more byte shows a file that grew since fstat
    if len(data) != size:
        raise CacheError(f'{name} changed size while being read')
    return data


def _recorded_files(dir_fd: int) -> dict[str, tuple[int, str]]:
    """Parse and check ``entry.json``: name -> (size, sha256) of every file it lists."""
    try:
        meta = json.loads(_read_member(dir_fd, ENTRY_FILE, MAX_ENTRY_JSON_BYTES))
    except (ValueError, RecursionError) as exc:
        raise CacheError(f'{ENTRY_FILE} is not valid JSON ({clip(exc, 80)})') from None
    files = meta.get('files') if isinstance(meta, dict) else None
    if not isinstance(files, dict) or len(files) > MAX_ENTRY_FILES:
        raise CacheError(f'{ENTRY_FILE} has no valid `files` table')
    recorded = {}
    for name, info in files.items():
        if not _MEMBER.fullmatch(name):
            raise CacheError(f'{ENTRY_FILE} lists {show(name)}, which is not a plain file '
                             'name inside the entry')
        size = info.get('size') if isinstance(info, dict) else None
        digest = info.get('sha256') if isinstance(info, dict) else None
        if type(size) is not int or not 0 <= size <= MAX_CACHE_FILE_BYTES or \
                not isinstance(digest, str) or not re.fullmatch(r'[0-9a-f]{64}', digest):
            raise CacheError(f'{ENTRY_FILE} records no valid size and sha256 for {name}')
        recorded[name] = (size, digest)
    return recorded


@dataclass(frozen=True)
class CacheEntry:
    """A published cache entry."""

    path: Path
    key: str
    hit: bool  # True when it already existed, False when it was built by this call

    def file(self, name: str) -> Path:
        """Path of one file inside the entry (for messages; load with :meth:`read_verified`)."""
        return self.path / name

    @contextlib.contextmanager
    def _opened(self, reading: str) -> Iterator[tuple[int, dict[str, tuple[int, str]]]]:
        """Yield the entry's folder fd and its ``entry.json`` listing; one-line errors.

        ``reading``: what the block reads, named if the system refuses it.
        """
        try:
            dir_fd = _open_dir(self.path)
        except OSError as exc:
            raise CacheError(f'cache entry {self.path.name}: cannot open it '
                             f'({clip(exc.strerror or exc)}); the next configure rebuilds it'
                             ) from None
        try:
            yield dir_fd, _recorded_files(dir_fd)
        except CacheError as exc:
            raise CacheError(f'cache entry {self.path.name}: {exc}; the next configure '
                             'rebuilds it') from None
        except OSError as exc:
            raise CacheError(f'cache entry {self.path.name}: cannot read {reading} '
                             f'({clip(exc.strerror or exc)})') from None
        finally:
            os.close(dir_fd)

    def names(self) -> tuple[str, ...]:
        """Return the names of the files ``entry.json`` lists (read as :meth:`read_verified`)."""
        with self._opened(ENTRY_FILE) as (_, recorded):
            return tuple(sorted(recorded))

    def read_verified(self, name: str) -> bytes:
        """Return the content of one file of the entry, checked against its recorded SHA-256.

        Runners load artifacts from these bytes, not from the path, so what runs is exactly
        what was checked (a file swapped or corrupted after the check is never loaded). The
        file must be a regular file inside the entry, no larger than ``entry.json`` says.
        """
        with self._opened(name) as (dir_fd, recorded):
            if name not in recorded:
                raise CacheError(f'{ENTRY_FILE} does not list {show(name)}')
            size, digest = recorded[name]
            data = _read_member(dir_fd, name, size)
        if hashlib.sha256(data).hexdigest() != digest:
            raise CacheError(f'cache entry {self.path.name}: {name} does not match the hash '
                             'recorded when it was built (corrupted or edited); the next '
                             'configure rebuilds it')
        return data


def _safe(name: str) -> str:
    return ''.join(c if c.isalnum() or c in '-_.' else '_' for c in name[:64]) or 'model'


def entries_alike(entry: Path, kind: str) -> list[Path]:
    """Return the folders beside ``entry`` of its kind and key made under other model names.

    ``entry`` is a ``<model>-<kind>-<key>`` folder; the others, by name, hold the same
    artifact, the key being the content.
    """
    suffix = f"-{_safe(kind)}-{entry.name.rsplit('-', 1)[-1]}"
    try:
        names = [e.name for e in os.scandir(entry.parent) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []
    return [entry.parent / name for name in sorted(names)
            if name.endswith(suffix) and name != entry.name and len(name) > len(suffix)
            and not name.startswith('.')]


def _discard(path: Path) -> None:
    """Delete a folder, file or link at ``path`` (never what a link points to)."""
    try:
        if stat.S_ISDIR(os.lstat(path).st_mode):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    except OSError:
        pass


class ArtifactCache:
    """The artifact cache rooted at ``engine_cache_dir``."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(os.path.expanduser(str(root)))

    def _ensure_root(self) -> None:
        try:  # private by default: whoever can write here chooses what the node runs
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise CacheError(f"engine_cache_dir '{clip(self.root)}' cannot be created: "
                             f'{clip(exc.strerror or exc)}') from exc
        if not os.access(self.root, os.W_OK | os.X_OK):
            raise CacheError(f"engine_cache_dir '{clip(self.root)}' is not writable")

    def entry_dir(self, model: str, kind: str, key: str) -> Path:
        """Where the entry for (model, kind, key) lives."""
        return self.root / f'{_safe(model)}-{_safe(kind)}-{key}'

    def _locate(self, model: str, kind: str, fields: dict[str, Any]) -> tuple[str, Path]:
        key = cache_key({'kind': kind, **fields})
        return key, self.entry_dir(model, kind, key)

    def _lock_path(self, entry_name: str) -> Path:
        return self.root / f'{entry_name}.lock'

    def _open_lock(self, entry_name: str) -> int:
        return os.open(self._lock_path(entry_name),
                       os.O_RDWR | os.O_CREAT | _O_NOFOLLOW | _O_CLOEXEC, 0o644)

    @contextlib.contextmanager
    def _lock(self, entry: Path, timeout_s: float) -> Iterator[None]:
        fd = self._open_lock(entry.name)
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
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
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def remove_stale_temporaries(self) -> list[str]:
        """Delete temporary folders that no live build owns; return their names.

        A build creates its temporary folder while holding its key's lock and renames or
        deletes it before letting go, and the kernel drops a flock when its process dies. So a
        temporary folder whose key's lock can be taken right now belongs to a process that
        was killed mid-build: it is deleted while the lock is held, so no new build of that
        key can start meanwhile. One whose lock is held is left alone.
        """
        removed: list[str] = []
        try:
            names = [e.name for e in os.scandir(self.root)]
        except OSError:
            return removed
        for name in names:
            match = _TEMP.fullmatch(name)
            if match is None:
                continue
            try:
                fd = self._open_lock(match.group('entry'))
            except OSError:
                continue  # a read-only cache: nothing can be deleted anyway
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue  # a live build
            try:
                if os.path.lexists(self.root / name):
                    _discard(self.root / name)
                    removed.append(name)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
        return removed

    @staticmethod
    def check(entry: Path, files: tuple[str, ...] = ()) -> None:
        """Raise CacheError saying why ``entry`` is not complete and intact.

        Complete: ``entry.json`` parses and lists every name in ``files``; intact: every file
        it lists is a regular file inside the entry whose size and SHA-256 match.
        """
        try:
            dir_fd = _open_dir(entry)
        except OSError as exc:
            raise CacheError(f'{entry.name} is not a folder ({clip(exc.strerror or exc)})'
                             ) from None
        try:
            recorded = _recorded_files(dir_fd)
            for name in files:
                if name not in recorded:
                    raise CacheError(f'{ENTRY_FILE} does not list {name}')
            for name, (size, digest) in recorded.items():
                fd, actual = _open_member(dir_fd, name, MAX_CACHE_FILE_BYTES)
                try:
                    if actual != size or _hash_fd(fd, size) != (digest, size):
                        raise CacheError(f'{name} does not match its recorded size and hash')
                finally:
                    os.close(fd)
        except OSError as exc:
            raise CacheError(f'cannot read it ({clip(exc.strerror or exc)})') from None
        finally:
            os.close(dir_fd)

    @classmethod
    def validate(cls, entry: Path, files: tuple[str, ...] = ()) -> bool:
        """Return True when ``entry`` is complete and intact (see :meth:`check`)."""
        try:
            cls.check(entry, files)
        except CacheError:
            return False
        return True

    def lookup(self, model: str, kind: str, fields: dict[str, Any],
               files: tuple[str, ...] = (), shared: tuple[str, ...] | None = None
               ) -> CacheEntry | None:
        """Return a valid existing entry, or None (a corrupt one counts as absent).

        The key is the content: an intact entry of the same kind and key made under another
        model name (a manifest copied under a new name, with the same weights and export
        settings) is the same artifact, and is returned when there is none of this name. It
        must list ``shared`` instead of ``files`` where the file names carry the model name.
        """
        key, entry = self._locate(model, kind, fields)
        if os.path.lexists(entry) and self.validate(entry, files):
            return CacheEntry(entry, key, hit=True)
        for other in entries_alike(entry, kind):
            if self.validate(other, files if shared is None else shared):
                return CacheEntry(other, key, hit=True)
        return None

    def get_or_build(self, model: str, kind: str, fields: dict[str, Any],
                     build: Callable[[Path], None], files: tuple[str, ...],
                     lock_timeout_s: float = 1800.0,
                     shared: tuple[str, ...] | None = None) -> CacheEntry:
        """Return the entry for ``fields``, calling ``build(tmp_dir)`` on a miss.

        ``build`` writes the artifact files named in ``files`` into the folder it is given.
        The folder is published atomically only after ``build`` returns and every file exists.
        Temporary folders of builds killed earlier are cleared first. ``shared``: see
        :meth:`lookup`.
        """
        self.remove_stale_temporaries()
        found = self.lookup(model, kind, fields, files, shared)
        if found:
            return found
        self._ensure_root()
        key, entry = self._locate(model, kind, fields)
        with self._lock(entry, lock_timeout_s):
            if os.path.lexists(entry):
                if self.validate(entry, files):
                    return CacheEntry(entry, key, hit=True)  # built by another process
                self._discard(entry)
            tmp = entry.with_name(f'.{entry.name}.build-{uuid.uuid4().hex[:8]}')
            try:
                tmp.mkdir(mode=0o700)
                build(tmp)
                meta = {
                    'model': model, 'kind': kind, 'key': key, 'fields': fields,
                    'created': time.strftime('%Y-%m-%dT%H:%M:%S%z'),
                    'files': _describe_files(tmp, files, entry.name),
                }
                _write_atomic(tmp / ENTRY_FILE, json.dumps(meta, indent=2, default=str))
                _fsync_dir(tmp)
                os.rename(tmp, entry)
                _fsync_dir(self.root)
            except BaseException:
                _discard(tmp)
                raise
        return CacheEntry(entry, key, hit=False)

    def _discard(self, entry: Path) -> None:
        """Move a corrupt entry aside (then delete it) so it can be rebuilt."""
        trash = entry.with_name(f'.{entry.name}.corrupt-{uuid.uuid4().hex[:8]}')
        try:
            os.rename(entry, trash)
        except OSError:
            return
        _discard(trash)


def _describe_files(folder: Path, required: tuple[str, ...], entry_name: str
                    ) -> dict[str, dict[str, Any]]:
    """Size and SHA-256 of every regular file a build wrote (what ``entry.json`` records)."""
    described: dict[str, dict[str, Any]] = {}
    dir_fd = _open_dir(folder)
    try:
        for item in sorted(os.scandir(folder), key=lambda e: e.name):
            if not item.is_file(follow_symlinks=False) or item.name == ENTRY_FILE:
                continue
            if not _MEMBER.fullmatch(item.name):
                if item.name in required:
                    raise CacheError(f'building {entry_name}: {show(item.name)} is not a '
                                     'plain file name')
                continue  # e.g. an exporter's hidden scratch file: not part of the entry
            fd, size = _open_member(dir_fd, item.name, MAX_CACHE_FILE_BYTES)
            try:
                described[item.name] = {'size': size, 'sha256': _hash_fd(fd, size)[0]}
            finally:
                os.close(fd)
    finally:
        os.close(dir_fd)
    missing = [f for f in required if f not in described]
    if missing:
        raise CacheError(f"building {entry_name} produced no {', '.join(missing)}")
    if len(described) > MAX_ENTRY_FILES:
        raise CacheError(f'building {entry_name} produced {len(described)} files, more than '
                         f'the {MAX_ENTRY_FILES} an entry may hold')
    return described


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
