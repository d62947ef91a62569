"""What a detection model publishes: ``detections`` and ``label_info``."""

from __future__ import annotations

from typing import Any, Callable, ClassVar, Mapping

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import Header
from vision_msgs.msg import Detection2DArray, LabelInfo

from ...param_spec import ParamSpec
from ...pipeline import LoadedModel
from ...tasks.detect import DetectionParams, Detections
from .detection_messages import detections_to_cdr
from .label_info import label_info_msg

#: label_info is sent once per activation and kept for late subscribers.
LATCHED = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST,
                     reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)


class DetectionOutputs:
    """Publishers of one detection model: ``<ns>detections`` and ``<ns>label_info``."""

    #: No ROS output switches of its own.
    params: ClassVar[tuple[ParamSpec, ...]] = ()

    def __init__(self, node: Any, model: LoadedModel, namespace: str = '',
                 report_error: Callable[[str], None] = lambda text: None) -> None:
        self._node = node
        self._report_error = report_error
        self._labels = model.labels
        if not self._labels:
            node.get_logger().warning(f"model '{model.manifest.name}' has no class names: "
                                      'label_info is empty (list `labels` in its manifest)')
        self._detections, self._label_info = node.endpoints.publishers([
            (Detection2DArray, f'{namespace}detections', 10),
            (LabelInfo, f'{namespace}label_info', LATCHED)])
        self._active = False

    @property
    def topics(self) -> list[str]:
        """Resolved names of the topics published."""
        return [self._detections.topic_name, self._label_info.topic_name]

    def wanted(self) -> bool:
        """Whether anything subscribes to the per-frame output (lazy mode asks)."""
        return self._detections.get_subscription_count() > 0

    def activate(self, params: DetectionParams, switches: Mapping[str, Any]) -> None:
        """Send label_info for this activation."""
        self._active = True
        self._send_label_info(params)

    def deactivate(self) -> None:
        """Stop republishing label_info on parameter changes."""
        self._active = False

    def params_changed(self, old: DetectionParams, new: DetectionParams) -> None:
        """label_info carries the confidence threshold: resend it when that changes."""
        if self._active and new.confidence != old.confidence:
            self._send_label_info(new)

    def publish(self, result: Detections, header: Any) -> None:
        """Publish one frame's detections (serialised with NumPy, see ``cdr.py``)."""
        self._detections.publish(detections_to_cdr(result, header))

    def destroy(self) -> None:
        """Destroy the publishers."""
        for pub in (self._detections, self._label_info):
            self._node.endpoints.destroy(pub)

    def _send_label_info(self, params: DetectionParams) -> None:
        header = Header(stamp=self._node.get_clock().now().to_msg())
        self._label_info.publish(label_info_msg(self._labels, header, params.confidence))
