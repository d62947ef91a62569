"""Task name → the class that publishes that task's results (``ros/outputs``).

The node creates one outputs object per model from this map, as it creates runners from the
backend map and tasks from the task map; it never names a task itself. An outputs class takes
``(node, model, namespace)`` and has ``topics``, ``wanted()``, ``activate(params)``,
``deactivate()``, ``params_changed(old, new)``, ``publish(result, header)`` and ``destroy()``.
Its publishers and subscriptions are made through ``node.endpoints`` (:mod:`..endpoints`), so
a remap that puts two of the node's endpoints on one topic is refused in one line.
"""

from __future__ import annotations

import importlib
from typing import Any

#: task name → (module, class).
OUTPUTS_MAP: dict[str, tuple[str, str]] = {
    'detect': ('vision_nodes.ros.outputs.detection_outputs', 'DetectionOutputs'),
    'depth': ('vision_nodes.ros.outputs.depth_outputs', 'DepthOutputs'),
}


def outputs_class(task: str) -> Any:
    """Return the outputs class of a task (KeyError for a task without ROS outputs)."""
    module, cls = OUTPUTS_MAP[task]
    return getattr(importlib.import_module(module), cls)
