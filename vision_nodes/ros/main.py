"""The ``vision_node`` program: process settings first, then the node (:mod:`.node`).

glibc's arena limit (:mod:`vision_nodes.platform.allocator`) holds only for arenas made after
it is set, and importing rclpy starts native threads that make two of their own; the node's
worker threads would then take turns on those too, whose free memory cleanup cannot give
back. So the settings come here, before anything imports rclpy: this module imports nothing
of ROS until they are made. ``python -m vision_nodes.ros.main`` runs the same program.

GNU OpenMP's spin count is bounded here too (:mod:`vision_nodes.platform.openmp`), before
PyTorch loads it at configure.
"""

from __future__ import annotations


def main(args: list[str] | None = None) -> None:
    """Apply the process settings, then run the node (:func:`.node.main`)."""
    from ..platform.allocator import keep_freed_buffers
    from ..platform.openmp import bound_openmp_spinning

    keep_freed_buffers()
    bound_openmp_spinning()
    from .node import main as node_main

    node_main(args)


if __name__ == '__main__':
    main()
