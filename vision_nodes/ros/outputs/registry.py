"""Task name → the class that publishes that task's results (``ros/outputs``).

The node creates one outputs object per model from this map, as it creates runners from the
backend map and tasks from the task map; it never names a task itself. What an outputs class
takes and does is :class:`.protocol.Outputs`.
"""

from __future__ import annotations

import importlib

from .protocol import OutputsFactory

#: task name → (module, class).
OUTPUTS_MAP: dict[str, tuple[str, str]] = {
    'detect': ('vision_nodes.ros.outputs.detection_outputs', 'DetectionOutputs'),
    'depth': ('vision_nodes.ros.outputs.depth_outputs', 'DepthOutputs'),
    'segment': ('vision_nodes.ros.outputs.segment_outputs', 'SegmentOutputs'),
    'pose': ('vision_nodes.ros.outputs.pose_outputs', 'PoseOutputs'),
    'obb': ('vision_nodes.ros.outputs.detection_outputs', 'DetectionOutputs'),
    'classify': ('vision_nodes.ros.outputs.classify_outputs', 'ClassifyOutputs'),
}


def outputs_class(task: str) -> OutputsFactory:
    """Return the outputs class of a task (KeyError for a task without ROS outputs)."""
    module, cls = OUTPUTS_MAP[task]
    return getattr(importlib.import_module(module), cls)
