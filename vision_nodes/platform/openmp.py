"""GNU OpenMP's spinning, bounded for a process that shares the machine's cores.

By default a GNU OpenMP thread (PyTorch's kernels use libgomp) spins 300,000 times waiting
for work before it sleeps, and on a robot other processes want the cores. libgomp reads
``GOMP_SPINCOUNT`` once, when it is loaded, so the ``vision_node`` program sets it before
PyTorch loads it at configure (:mod:`vision_nodes.ros.main`). YOLOv8n on the ``cpu``
backend, 2-core Xeon, bus.jpg, paired rounds against libgomp's default
(``benchmarks/bench_openmp.py``, docs/benchmarks.md): within noise on a quiet machine (1.03
[1.00, 1.08]) and 3x faster while another process keeps one core busy (0.32 [0.29, 0.38];
554 against 188 ms a frame); fewer spins or passive waiting were 7x faster there but 14-48 %
slower when quiet. A user's ``GOMP_SPINCOUNT`` or ``OMP_WAIT_POLICY`` is kept.
"""

from __future__ import annotations

import os

#: GNU OpenMP's spins before a waiting thread sleeps, unless the environment sets one.
OPENMP_SPIN_COUNT = '10000'


def bound_openmp_spinning() -> None:
    """Set ``GOMP_SPINCOUNT`` unless the user chose a spin count or a wait policy."""
    if 'GOMP_SPINCOUNT' not in os.environ and 'OMP_WAIT_POLICY' not in os.environ:
        os.environ['GOMP_SPINCOUNT'] = OPENMP_SPIN_COUNT
