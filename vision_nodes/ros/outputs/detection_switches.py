"""The ROS output switches of a detection model (detect, segment, pose, obb).

Where 3D boxes read depth, their RViz markers, the annotated picture.

They belong to the model's outputs, not to its ROS-free task: the outputs declare them
(:data:`SWITCHES`, ``DetectionOutputs.params``), the node's parameter policy declares them beside
the task's parameters (prefixed with the model's name when the node runs several models), and
their values reach the outputs at activate and, for a live one, on every change
(``Outputs.update_switches``) as a :class:`DetectionSwitches`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping

from ...param_spec import ParamSpec
from ..inputs.camera_names import check_topic


def check_depth_topic(value: str, values: Mapping[str, Any]) -> str | None:
    """Check ``depth_topic`` when it is given: a name rcl can resolve (as image_topics' entries).

    Unchecked, a bad name was taken and failed activate with rcl's own error, which does not
    name the parameter.
    """
    return check_topic('depth_topic', value)


#: Where 3D boxes read depth, whether they go to RViz as markers, and whether the annotated
#: picture is published.
SWITCHES: tuple[ParamSpec, ...] = (
    ParamSpec('depth_source', '',
              'Publish detections_3d (vision_msgs/Detection3DArray) from depth: topic (an '
              'aligned depth image on depth_topic) or model:<name> (a metric depth model of '
              'this node, on the same frame); both need camera_info. Empty: no 3D.',
              applies='activate'),
    ParamSpec('depth_topic', 'depth_registered/image_rect',
              'Depth image aligned with the colour image (32FC1 metres or 16UC1 millimetres, '
              'NaN/0 = no return) for depth_source topic. With image_topics a relative name, '
              "read beside each camera's image topic.", applies='activate',
              check=check_depth_topic),
    ParamSpec('depth_slop', 0.05,
              'Seconds a depth image\'s stamp may differ from the colour image\'s to pair '
              '(among the depth images already received: a frame never waits for depth).',
              float_range=(0.0, 10.0), applies='live'),
    ParamSpec('publish_markers', False,
              'With depth_source: publish markers (visualization_msgs/MarkerArray) of the 3D '
              'boxes for RViz: a box and a label (class, track id when tracking, score) each, '
              'built only while someone subscribes.', applies='activate'),
    ParamSpec('publish_annotated', False,
              'Publish annotated (bgr8): the image with boxes, labels, scores, track ids, '
              'masks and skeletons drawn, built only while someone subscribes.',
              applies='activate'),
)


@dataclass(frozen=True)
class DetectionSwitches:
    """The values of :data:`SWITCHES`, one field each (defaults: the specs')."""

    depth_source: str = ''
    depth_topic: str = 'depth_registered/image_rect'
    depth_slop: float = 0.05
    publish_markers: bool = False
    publish_annotated: bool = False

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> 'DetectionSwitches':
        """Read the switches from parameter values keyed by spec name (missing: default)."""
        return cls(**{f.name: values[f.name] for f in fields(cls) if f.name in values})
