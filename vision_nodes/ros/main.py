"""The ``vision_node`` program: process settings first, then the node (:mod:`.node`).

glibc's arena limit (:mod:`vision_nodes.platform.allocator`) holds only for arenas made after
it is set, and importing rclpy starts native threads that make two of their own; the node's
worker threads would then take turns on those too, whose free memory cleanup cannot give
back. So the settings come here, before anything imports rclpy: this module imports nothing
of ROS until they are made. ``python -m vision_nodes.ros.main`` runs the same program.

OpenMP's spinning is bounded here too (:data:`OPENMP_SPIN_COUNT`), before PyTorch loads GNU
OpenMP at configure: by default its threads spin 300,000 times waiting for work before they
sleep, and on a robot other processes want the cores. YOLOv8n on the ``cpu`` backend, 2-core
Xeon, bus.jpg, paired rounds against libgomp's default (``benchmarks/bench_openmp.py``,
docs/benchmarks.md): within noise on a quiet machine (1.03 [1.00, 1.08]) and 3x faster
while another process keeps one core busy (0.32 [0.29, 0.38]; 554 against 188 ms a frame);
fewer spins or passive waiting were 7x faster there but 14-48 % slower when quiet. A user's
``GOMP_SPINCOUNT`` or ``OMP_WAIT_POLICY`` is kept.
"""

from __future__ import annotations

import os

#: GNU OpenMP's spins before a waiting thread sleeps, unless the environment sets one.
OPENMP_SPIN_COUNT = '10000'


def bound_openmp_spinning() -> None:
    """Set ``GOMP_SPINCOUNT`` unless the user chose a spin count or a wait policy."""
    if 'GOMP_SPINCOUNT' not in os.environ and 'OMP_WAIT_POLICY' not in os.environ:
        os.environ['GOMP_SPINCOUNT'] = OPENMP_SPIN_COUNT


def main(args: list[str] | None = None) -> None:
    """Apply the process settings, then run the node (:func:`.node.main`)."""
    from ..platform.allocator import keep_freed_buffers

    keep_freed_buffers()
    bound_openmp_spinning()
    from .node import main as node_main

    node_main(args)


if __name__ == '__main__':
    main()
