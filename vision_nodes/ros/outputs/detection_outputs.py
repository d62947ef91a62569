"""What a detection model publishes: ``detections``, ``label_info`` and extras on request.

The obb task's outputs are these too: its rotated boxes go out with their ``theta``
(:func:`detections_to_cdr`) and are drawn as polygons; its tracker and 3D boxes take the
axis-aligned box around each.

``detections_3d`` with ``depth_source`` (and its RViz ``markers`` with ``publish_markers``),
``annotated`` with ``publish_annotated``: switches these outputs declare
(:mod:`.detection_switches`), not the task.

With ``tracker`` set, each frame's detections go through the model's tracker first
(:mod:`vision_nodes.tracking`), so every output carries the same detections and track ids.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar, Mapping, Sequence

import numpy as np
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image
from std_msgs.msg import Header
from vision_msgs.msg import Detection2DArray, LabelInfo

from ...drawing import draw
from ...images import to_rgb
from ...param_spec import ParamSpec
from ...pipeline import LoadedModel
from ...stage_times import mark
from ...tasks.detect import DetectionParams, Detections
from ...text import clip
from ...tracking import Tracking, TrackerConfigError
from ..inputs.depth_topic import stamp_ns
from ..process.log_limiter import LogLimiter
from ..wire.detection2d_cdr import encode_detection2d_array
from ..wire.image_cdr import encode_image
from .detection3d_outputs import Detection3DOutputs
from .detection_switches import SWITCHES, DetectionSwitches
from .label_info import label_info_msg

#: label_info is sent once per activation and kept for late subscribers.
LATCHED = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST,
                     reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
#: Frame-sized images (annotated, masks, depth): keep only the newest one queued.
IMAGES = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST,
                    reliability=ReliabilityPolicy.RELIABLE)


class _Lazy:
    """A value computed on first use (an instance label image, shared by 3D and drawing)."""

    def __init__(self, make: Callable[[], Any] | None) -> None:
        self._make, self._value = make, None

    def get(self) -> Any:
        if self._make is not None:
            self._value, self._make = self._make(), None
        return self._value


class DetectionOutputs:
    """Publishers of one detection model: ``<ns>detections``, ``<ns>label_info`` and extras."""

    #: The ROS output switches these outputs declare (node parameters): 3D and annotated.
    params: ClassVar[tuple[ParamSpec, ...]] = SWITCHES

    def __init__(self, node: Any, model: LoadedModel, namespace: str = '',
                 report_error: Callable[[str], None] = lambda text: None) -> None:
        self._node = node
        self._report_error = report_error
        self._name = model.manifest.name
        self._namespace = namespace
        self._labels = model.labels
        if not self._labels:
            node.get_logger().warning(f"model '{model.manifest.name}' has no class names: "
                                      'label_info is empty (list `labels` in its manifest)')
        self._detections, self._label_info = node.endpoints.publishers([
            (Detection2DArray, f'{namespace}detections', 10),
            (LabelInfo, f'{namespace}label_info', LATCHED)])
        self._active = False
        self._tracking: Tracking | None = None
        #: What the tracker's library says while tracking (BoT-SORT's motion compensation
        #: failing on a frame), as rate-limited warnings of the node.
        self._tracker_says = LogLimiter(node.get_logger().warning)
        #: Why tracking is off although a tracker is set (a bad tracker_config), or ''.
        self._tracking_off = ''
        self._3d: Detection3DOutputs | None = None
        self._annotated: Any = None
        #: The namespace of this camera's image topic with several cameras (set by
        #: ``CameraOutputs``; '' = the node's one camera): 3D reads its camera_info and depth.
        self.camera_namespace = ''

    @property
    def topics(self) -> list[str]:
        """Resolved names of the topics published."""
        extra = (self._3d.topics if self._3d else []) + \
            ([self._annotated.topic_name] if self._annotated else [])
        return [self._detections.topic_name, self._label_info.topic_name] + extra

    def wanted(self) -> bool:
        """Whether anything subscribes to a per-frame output (lazy mode asks)."""
        return (self._detections.get_subscription_count() > 0
                or (self._3d is not None and self._3d.wanted())
                or (self._annotated is not None
                    and self._annotated.get_subscription_count() > 0))

    def sources(self) -> tuple[str, ...]:
        """Models of the node whose results on the same frame these outputs read."""
        return self._3d.sources() if self._3d else ()

    def activate(self, params: DetectionParams, switches: Mapping[str, Any]) -> None:
        """Send label_info; start tracking, 3D and the annotated image as asked."""
        self._use_tracker(params)
        on = DetectionSwitches.of(switches)
        try:
            if on.depth_source:
                models = {m.name: m.pipeline.task for m in self._node.frames.models}
                self._3d = Detection3DOutputs(self._node, self._namespace, on, models,
                                              self._name, self._report_error,
                                              self.camera_namespace, self._labels)
            elif on.publish_markers:
                self._node.get_logger().warning(
                    f"model '{self._name}': publish_markers is true but depth_source is empty: "
                    'markers show 3D boxes, which need depth (set depth_source to topic or '
                    'model:<name>)')
            if on.publish_annotated:
                self._annotated = self._node.endpoints.publisher(
                    Image, f'{self._namespace}annotated', IMAGES)
        except BaseException:
            self.deactivate()
            raise
        self._active = True
        self._send_label_info(params)

    def deactivate(self) -> None:
        """Stop the extras; forget the tracks (ids start again at the next activate)."""
        self._active = False
        self._tracking = None
        if self._3d is not None:
            self._3d.destroy()
            self._3d = None
        if self._annotated is not None:
            self._node.endpoints.destroy(self._annotated)
            self._annotated = None

    def params_changed(self, old: DetectionParams, new: DetectionParams) -> None:
        """Resend label_info on a new threshold; switch trackers."""
        if self._active and new.confidence != old.confidence:
            self._send_label_info(new)
        if self._active and (new.tracker, new.tracker_config) != \
                (old.tracker, old.tracker_config):
            self._use_tracker(new)

    def update_switches(self, switches: Mapping[str, Any]) -> None:
        """Take a new ``depth_slop`` (live); the other switches wait for activate."""
        three_d = self._3d
        if three_d is not None:
            three_d.slop = DetectionSwitches.of(switches).depth_slop

    def _use_tracker(self, params: DetectionParams) -> None:
        """Start a fresh tracker of ``params.tracker`` (none: no tracking)."""
        self._tracking, self._tracking_off = None, ''
        if params.tracker == 'none':
            return
        try:
            self._tracking = Tracking(params.tracker, params.tracker_config,
                                      warn=self._tracker_warning)
        except (TrackerConfigError, OSError) as exc:
            self._tracking_off = f'off: {clip(exc, 600)}'
            self._node.get_logger().error(
                f"model '{self._name}': tracking is {self._tracking_off}")

    def _tracker_warning(self, text: str) -> None:
        """Log what the tracker's library said on a frame: one rate-limited warning."""
        self._tracker_says(f"model '{self._name}': tracker: {text}")

    def publish(self, result: Detections, header: Any, frame: Any) -> None:
        """Track, then publish one frame's detections and the extras someone listens to."""
        result = self._tracked(result, header, frame)
        payload = detections_to_cdr(result, header)
        mark('message')
        self._detections.publish(payload)
        self._publish_instances(result, header)
        labels = _Lazy(getattr(result, 'label_image', None))
        if self._3d is not None:
            self._3d.publish(result, header, frame, labels.get())
        annotated = self._annotated
        if annotated is not None and annotated.get_subscription_count() > 0:
            bgr = to_rgb(frame.image, frame.encoding)[:, :, ::-1]
            picture = draw(bgr, result.boxes, result.scores, result.class_ids, self._labels,
                           result.track_ids, labels.get(), getattr(result, 'keypoints', None),
                           getattr(result, 'skeleton', ()), getattr(result, 'polygons', None))
            annotated.publish(encode_image(np.ascontiguousarray(picture), 'bgr8', header))

    def _publish_instances(self, result: Detections, header: Any) -> None:
        """Publish what a subclass adds per detection (masks, keypoints), with the same ids."""

    def _tracked(self, result: Detections, header: Any, frame: Any) -> Detections:
        """Return the detections the tracker confirms, with track ids (all of them: no tracker)."""
        tracking = self._tracking
        if tracking is None:
            return result
        bgr = to_rgb(frame.image, frame.encoding)[:, :, ::-1] \
            if tracking.kind == 'botsort' else None
        index, ids = tracking.update(result.boxes, result.scores, result.class_ids,
                                     stamp_ns=stamp_ns(header.stamp), frame_id=header.frame_id,
                                     key=frame.input, image=bgr)
        return result.take(index, ids)

    def diagnostics(self) -> dict[str, str]:
        """Key/values for the node's status (tracking and 3D, when on)."""
        prefix = f'{self._name}: ' if self._namespace else ''
        values = {}
        if self._tracking is not None or self._tracking_off:
            values[f'{prefix}tracker'] = self._tracking_off or self._tracking.kind
        if self._3d is not None:
            values.update(self._3d.diagnostics(prefix))
        return values

    def destroy(self) -> None:
        """Destroy the publishers."""
        self.deactivate()
        for pub in (self._detections, self._label_info):
            self._node.endpoints.destroy(pub)

    def _send_label_info(self, params: DetectionParams) -> None:
        header = Header(stamp=self._node.get_clock().now().to_msg())
        self._label_info.publish(label_info_msg(self._labels, header, params.confidence))


def detections_to_cdr(dets: Detections, header, ids: Sequence[str] | None = None) -> bytes:
    """Serialise the detections as a Detection2DArray in CDR bytes for ``Publisher.publish``.

    ``class_id`` is the class index as a string; each Detection2D carries the input image's
    header, one hypothesis, an axis-aligned box (centre and size in source pixels, ``theta``
    0) and its ``id``: from ``ids`` when given, else the detection's own
    (:meth:`Detections.ids`: its track id when a tracker follows the detections, else its
    index; decimal strings). Rotated boxes (results with ``xywhr``, the obb task) are
    published as they are: centre, ``size_x`` = w, ``size_y`` = h, ``theta`` = the angle in
    radians, so that ``cv2.boxPoints(((x, y), (size_x, size_y), degrees(theta)))`` gives the
    box's corners. Encoded with NumPy (:mod:`..wire.detection2d_cdr`), so the cost hardly grows
    with the number of detections, unlike building and publishing the message objects.
    """
    return encode_detection2d_array(header.stamp.sec, header.stamp.nanosec, header.frame_id,
                                    dets.boxes, dets.scores, dets.class_ids,
                                    dets.ids() if ids is None else ids,
                                    rotated=getattr(dets, 'xywhr', None))
