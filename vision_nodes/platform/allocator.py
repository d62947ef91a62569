"""Process-wide glibc allocator settings for a node that moves large frames.

By default glibc maps large allocations (above a threshold that adapts, from 128 KB up) with
a fresh ``mmap`` and gives the heap's top back to the OS once more than twice that threshold
is free. A 1080p frame passes through several frame-sized buffers that are alive at once and
freed together (the serialised message, the message, the resized image, the input tensor,
the network outputs), so every frame gives its buffers back and page-faults them in
again (thousands of page faults per frame, see test_allocator); with the settings below a
frame's buffers are reused instead (the saving is in docs/benchmarks.md).

:func:`keep_freed_buffers` fixes both thresholds high, so freed frame buffers stay in the
heap and are reused; :func:`release_freed_memory` gives the free heap back to the OS
explicitly (the node does it at cleanup). Both are no-ops where the C library is not glibc.
``VISION_NODES_MALLOC_TUNING=0`` in the environment turns :func:`keep_freed_buffers` off.

It also keeps every thread on one heap (glibc arena). By default glibc gives threads up to
eight arenas a core, and ``malloc_trim`` never returns the free top of a thread's arena (a
trim threshold above an arena heap's 64 MB means it is never trimmed on free either), so
each arena keeps the largest frame working set any thread ever had there. The node's
threads come and go (each transition on a fresh one, the inference workers at every
activate) and land on other arenas each time, so its memory grew lifecycle cycle after cycle
until every arena held one (scripts/soak.py --lifecycle). With one arena every thread reuses
the same freed buffers and cleanup gives them back. Arenas made before the call (rclpy's
import starts native threads that make two) stay, with what little their threads hold.
"""

from __future__ import annotations

import ctypes
import os
import sys

# mallopt() parameters, from glibc's <malloc.h>.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8

#: Allocations up to this size come from the heap (glibc's maximum for this setting).
MMAP_THRESHOLD = 32 * 1024 * 1024
#: Free memory kept at the top of the heap before glibc returns it to the OS.
TRIM_THRESHOLD = 128 * 1024 * 1024
#: Heaps (glibc arenas) every thread allocates from: the main one only.
ARENA_MAX = 1


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith('linux'):
        return None
    try:
        libc = ctypes.CDLL('libc.so.6')
        libc.mallopt  # noqa: B018 - absent on non-glibc C libraries
        libc.malloc_trim  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


def keep_freed_buffers() -> bool:
    """Let freed frame-sized buffers be reused, by any thread, instead of unmapped.

    Returns True if applied. Call it early, before threads allocate: arenas made before stay.
    """
    if os.environ.get('VISION_NODES_MALLOC_TUNING', '1').strip().lower() in ('0', 'false',
                                                                             'no', 'off'):
        return False
    libc = _libc()
    if libc is None:
        return False
    return bool(libc.mallopt(_M_ARENA_MAX, ARENA_MAX)) and \
        bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and \
        bool(libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))


def release_freed_memory() -> None:
    """Return freed heap pages to the OS (glibc keeps them otherwise); no-op elsewhere."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
