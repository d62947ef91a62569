"""vision_nodes: a ROS 2 lifecycle node for detection and depth models on any accelerator."""

__version__ = '0.1.0'
