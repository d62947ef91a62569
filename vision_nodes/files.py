"""Reading files the node does not control: regular files only, never blocking, bounded.

Manifests, a model folder's ``config.json``, weights, calibration images and the like are
named by parameters and written by whoever can write those folders. A FIFO there would block
a plain ``open`` forever, a link to ``/dev/zero`` would never end a plain read, a device may
act on being opened, and a sparse file can claim terabytes. Every such file is therefore
opened through :func:`open_regular`: its type is checked before it is opened (a special file
is never opened), it is opened non-blocking, and the check is repeated on the open file
(what is checked is what is read), together with a size bound. :func:`read_regular` then
reads at most that many bytes.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any, Callable

from .text import clip, clip_path

_FLAGS = (os.O_RDONLY | os.O_NONBLOCK | getattr(os, 'O_NOCTTY', 0)
          | getattr(os, 'O_CLOEXEC', 0))

#: Builds the exception a refusal raises from its one-line message.
ErrorFactory = Callable[[str], Exception]


class FileRefused(OSError):
    """A file that is not read: missing, not a regular file, or over its size bound."""


def _kind(mode: int) -> str:
    """Name what a non-regular file is, for the error message."""
    for test, name in ((stat.S_ISDIR, 'a folder'), (stat.S_ISFIFO, 'a FIFO'),
                       (stat.S_ISCHR, 'a character device'), (stat.S_ISBLK, 'a block device'),
                       (stat.S_ISSOCK, 'a socket')):
        if test(mode):
            return name
    return 'not a regular file'


def _check(path: Path, info: os.stat_result, max_bytes: int, what: str,
           error: ErrorFactory) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise error(f'{clip_path(path)}: {what} must be a regular file; this is '
                    f'{_kind(info.st_mode)}')
    if info.st_size > max_bytes:
        raise error(f'{clip_path(path)}: {what} is {info.st_size} bytes; at most {max_bytes} '
                    'are accepted')


def _call(path: Path, what: str, error: ErrorFactory, call: Callable) -> Any:
    """Return ``call(path)``; an OSError (or a NUL in the name) becomes ``error``."""
    try:
        return call(path)
    except (OSError, ValueError) as exc:
        reason = getattr(exc, 'strerror', None) or exc
        raise error(f'{clip_path(path)}: cannot read {what}: {clip(reason)}') from None


def check_regular(path: str | os.PathLike, max_bytes: int, what: str = 'file',
                  error: ErrorFactory = FileRefused) -> int:
    """Check, without opening it, that ``path`` is a regular file of at most ``max_bytes``.

    For a file a library opens by its name; returns its size. Raises as :func:`open_regular`.
    """
    path = Path(path)
    info = _call(path, what, error, os.stat)
    _check(path, info, max_bytes, what, error)
    return info.st_size


def open_regular(path: str | os.PathLike, max_bytes: int, what: str = 'file',
                 error: ErrorFactory = FileRefused) -> tuple[int, int]:
    """Open a regular file of at most ``max_bytes`` for reading; return ``(fd, size)``.

    Symbolic links are followed, to a regular file only. Anything else (missing, a folder, a
    FIFO, a device, a socket, too large) raises ``error`` with a one-line message naming the
    file and ``what`` it is. The caller closes the descriptor.
    """
    path = Path(path)
    check_regular(path, max_bytes, what, error)
    fd = _call(path, what, error, lambda p: os.open(p, _FLAGS))
    try:
        info = os.fstat(fd)
        _check(path, info, max_bytes, what, error)  # swapped after the first look
    except BaseException:
        os.close(fd)
        raise
    return fd, info.st_size


def read_regular(path: str | os.PathLike, max_bytes: int, what: str = 'file',
                 error: ErrorFactory = FileRefused) -> bytes:
    """Return the bytes of a regular file of at most ``max_bytes`` (see :func:`open_regular`).

    The read stops one byte past the bound, so a file growing meanwhile is refused too.
    """
    fd, _ = open_regular(path, max_bytes, what, error)
    try:
        with os.fdopen(fd, 'rb', closefd=False) as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise error(f'{clip_path(path)}: cannot read {what}: '
                    f'{clip(exc.strerror or exc)}') from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise error(f'{clip_path(path)}: {what} grew past {max_bytes} bytes while being read')
    return data


def fd_path(fd: int, fallback: str | os.PathLike) -> str:
    """Return a path that opens the very file ``fd`` has open, for a library that wants one.

    On Linux ``/proc/self/fd/N`` reopens the same file, so what was checked through ``fd`` is
    what the library reads, even if the name is replaced meanwhile; elsewhere ``fallback``.
    """
    proc = f'/proc/self/fd/{fd}'
    return proc if os.path.exists(proc) else str(fallback)
