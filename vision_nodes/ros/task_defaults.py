"""A model's parameter defaults from its manifest (ROS-free): ``thresholds`` → detect's params.

A manifest saying ``thresholds: {confidence: 0.6}`` makes 0.6 the default of the model's
``confidence_threshold`` on the node; a value the user gives (``-p``, a parameters file,
``ros2 param set``) still wins. Seam: once ``vision_nodes.tasks`` publishes each task's
defaults for a manifest, :func:`task_defaults` becomes a call to that.
"""

from __future__ import annotations

from typing import Any

from ..manifest import ModelManifest

#: Detect task parameter → the manifest ``thresholds`` field it defaults to.
_DETECT_THRESHOLDS = {'confidence_threshold': 'confidence', 'iou_threshold': 'iou',
                      'max_detections': 'max_detections'}


def task_defaults(manifest: ModelManifest) -> dict[str, Any]:
    """Return the task parameter defaults this manifest sets (spec name → value)."""
    if manifest.task != 'detect':
        return {}
    return {name: getattr(manifest.thresholds, field)
            for name, field in _DETECT_THRESHOLDS.items()}
