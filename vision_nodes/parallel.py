"""The per-frame work of a batch on several threads: conversion, pre- and post-processing.

OpenCV and NumPy release the GIL inside their loops (resize, colour conversion, the tensor's
float conversion, a decode's array maths), so a batch's frames are prepared side by side on
the machine's cores, as N single-camera processes would prepare them, instead of one after
the other on the batcher's thread. One pool serves the process; a single frame, or a machine
with one core, runs on the calling thread.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, TypeVar

from .limits import MAX_FRAME_WORKERS

T = TypeVar('T')
R = TypeVar('R')

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def workers() -> int:
    """Threads the pool uses: the cores this process may run on, at most the bound."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else \
        (os.cpu_count() or 1)
    return max(1, min(cores, MAX_FRAME_WORKERS))


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(workers(), thread_name_prefix='frames')
        return _pool


def map_frames(work: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """Return ``[work(item) for item in items]``, the items run side by side.

    The first exception a call raises is raised here, as in the loop it replaces.
    """
    items = list(items)
    if len(items) < 2 or workers() < 2:
        return [work(item) for item in items]
    return list(_executor().map(work, items))
