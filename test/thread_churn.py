"""Worker threads that come and go, as the node's do, and what the process keeps of them.

A fresh thread for each transition and the inference workers at each activate: each touches
60 MB of frame buffers and frees them, then cleanup's release runs. Imported by the probe
subprocesses of test_allocator and test_lifecycle_soak (``PATH`` is this folder, for them to
put on ``sys.path``).
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

PATH = str(Path(__file__).resolve().parent)


def rss_mb() -> float:
    """Return this process's resident set in MB."""
    with open('/proc/self/status') as status:
        for line in status:
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) / 1024
    raise RuntimeError('no VmRSS in /proc/self/status')


def _frames() -> None:
    buffers = [np.ones(5 * 2 ** 20, np.uint8) for _ in range(12)]
    del buffers


def churn() -> float:
    """Run three worker threads one after another, release; return the MB still held."""
    from vision_nodes.platform.allocator import release_freed_memory

    before = rss_mb()
    for _ in range(3):
        worker = threading.Thread(target=_frames)
        worker.start()
        worker.join()
    release_freed_memory()
    return rss_mb() - before
