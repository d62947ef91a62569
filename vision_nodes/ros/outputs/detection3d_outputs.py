"""``detections_3d`` of a detection model: its detections with 3D boxes, from depth.

``depth_source`` says where depth comes from: ``topic`` (an aligned depth image on
``depth_topic``, paired by stamp, see :mod:`..inputs.depth_topic`) or ``model:<name>`` (a metric
depth model of the same node, on the same frame). Both need the colour camera's intrinsics,
from ``camera_info`` (a sibling of the image topic), checked for each frame's image
(``Intrinsics.for_image``). The geometry is :mod:`vision_nodes.geometry3d`; detections
without enough valid depth are left out and counted for the diagnostics. 3D never holds 2D
back: a frame is paired with the depth that has arrived when its 2D results are out, and a
frame that cannot have 3D (no usable camera_info, no depth within ``depth_slop``) is counted
and its reason logged in one line when it begins (again only after a 3D frame went out, and at
most every :data:`SAY_AGAIN_S`). Created at activate when ``depth_source`` is set; with
``publish_markers`` the same boxes also go to ``<ns>markers`` for RViz
(:mod:`.detection3d_markers`), built only while someone subscribes.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

from sensor_msgs.msg import CameraInfo
from vision_msgs.msg import Detection3DArray
from visualization_msgs.msg import MarkerArray

from ...geometry3d import Boxes3D, Intrinsics, IntrinsicsError, boxes_3d
from ...images import ImageConversionError
from ...tasks.detect import Detections
from ...text import clip
from ..inputs.camera_names import camera_sibling
from ..inputs.depth_topic import DepthTopic, depth_view
from ..inputs.qos import CAMERA_INFO_IN
from ..wire.detection3d_cdr import encode_detection3d_array
from .detection3d_markers import markers_msg
from .detection_switches import DetectionSwitches

MODEL_PREFIX = 'model:'
#: Seconds before one reason for frames without 3D is logged again.
SAY_AGAIN_S = 10.0


class DepthSourceError(ValueError):
    """A ``depth_source`` that cannot give depth (one line, naming the fix)."""


def parse_depth_source(value: str, models: dict[str, Any], own: str) -> str | None:
    """Return the depth model's name for ``model:<name>``, None for ``topic``; refuse the rest.

    ``models`` maps the node's model names to their tasks (objects with ``metric``, for depth).
    """
    if value == 'topic':
        return None
    if not value.startswith(MODEL_PREFIX):
        raise DepthSourceError(f"depth_source {clip(value)!r} is not 'topic' or "
                               "'model:<name>' (empty: no 3D)")
    name = value[len(MODEL_PREFIX):]
    task = models.get(name)
    if task is None:
        raise DepthSourceError(
            f"depth_source {clip(value)!r}: this node runs no model named {clip(name)!r} "
            f"(models: {', '.join(n for n in models if n != own) or 'none besides this one'}); "
            'add the depth model to `models`')
    if getattr(task, 'name', '') != 'depth' or not getattr(task, 'metric', False):
        raise DepthSourceError(
            f"depth_source {clip(value)!r}: model {clip(name)!r} is not a metric depth model; "
            '3D boxes need depth in metres (e.g. depth_anything_v2_metric_indoor_small)')
    return name


class Detection3DOutputs:
    """The ``<ns>detections_3d`` publisher, the depth and camera_info it reads."""

    def __init__(self, node: Any, namespace: str, switches: DetectionSwitches,
                 models: dict[str, Any], own: str,
                 report_error: Callable[[str], None], camera_namespace: str = '',
                 names: Sequence[str] = ()) -> None:
        """Read depth and K of the camera in ``camera_namespace`` ('' = the node's one camera).

        ``names`` are the class names the markers' labels show.
        """
        self._node = node
        self._report_error = report_error
        self._model = parse_depth_source(switches.depth_source, models, own)
        #: Seconds a depth image's stamp may differ from the frame's (``depth_slop``, live:
        #: the outputs set it on a change, the next frame pairs with it).
        self.slop = switches.depth_slop
        depth_topic = camera_sibling(camera_namespace, switches.depth_topic, 'depth_topic')
        info_topic = camera_sibling(camera_namespace, 'camera_info', 'camera_info')
        self._pub = node.endpoints.publisher(Detection3DArray, f'{namespace}detections_3d', 10)
        self._made: list[Any] = [self._pub]
        self._names = names
        self._markers = None
        try:
            if switches.publish_markers:
                self._markers = node.endpoints.publisher(MarkerArray, f'{namespace}markers', 10)
                self._made.append(self._markers)
            self._depth = None if self._model else DepthTopic(node, depth_topic)
            self._info_sub = node.endpoints.subscription(
                CameraInfo, info_topic, self._on_info, CAMERA_INFO_IN, label='camera_info')
        except BaseException:
            self.destroy()
            raise
        self._info: Any = None
        self._reasons = _Reasons(node.get_logger().warning)
        #: Counts since activation, for the diagnostics.
        self.left_out = 0
        self.frames_without_k = 0
        self.frames_without_depth = 0
        self.published = 0
        self.state = 'waiting for camera_info'

    @property
    def topics(self) -> list[str]:
        """Resolved names of the outputs: detections_3d, then markers when published."""
        return [p.topic_name for p in self._made]

    def sources(self) -> tuple[str, ...]:
        """Return the model whose results this reads (for lazy mode)."""
        return (self._model,) if self._model else ()

    def wanted(self) -> bool:
        """Whether anything subscribes to detections_3d or its markers."""
        return any(p.get_subscription_count() > 0 for p in self._made)

    def _on_info(self, msg: Any) -> None:
        self._info = msg

    def _say(self, key: str, text: str) -> None:
        """Show why this frame has no 3D (diagnostics) and log it as :class:`_Reasons` does."""
        self.state = text
        self._reasons.say(key, text)

    def _intrinsics(self, shape: tuple[int, int]) -> Intrinsics | None:
        """K of the newest camera_info for images of ``shape``; None (said why) if unusable."""
        info = self._info
        if info is None:
            self._say('info', f"no 3D detections: no camera_info received on "
                      f"'{self._info_sub.topic_name}' yet; 3D boxes need the colour "
                      "camera's intrinsics K: publish its CameraInfo there")
            return None
        try:
            return Intrinsics.for_image(info.k, (info.width, info.height), shape)
        except IntrinsicsError as exc:
            self._say(f'k:{exc.rule}', f'no 3D detections: {exc}')
            return None

    def _depth_map(self, frame: Any) -> tuple[Any, float] | None:
        """Return the frame's depth map and its factor to metres (None: none for it, said why)."""
        if self._model:
            result = frame.result_of(self._model)
            if result is None:
                self._say('model', f'no 3D detections: the depth model {self._model!r} gave '
                          'no depth map for the frame')
            return None if result is None else (result.depth, 1.0)
        found = self._depth.nearest(frame.header.stamp)
        if found is None or abs(found[1]) > self.slop:
            self._say_no_depth(found)
            return None
        try:
            return depth_view(found[0])
        except ImageConversionError as exc:
            self._report_error(f'detections_3d: {exc}')
            return None

    def _say_no_depth(self, found: tuple[Any, float] | None) -> None:
        """Say why no depth image pairs with the frame: none yet, or none within depth_slop."""
        topic = self._depth.topic_name
        if found is None:
            self._say('depth', f"no 3D detections: no depth image received on '{topic}' yet "
                      '(set depth_topic to the aligned depth image topic)')
            return
        when = 'after' if found[1] > 0 else 'before'
        self._say('slop', f"no 3D detections for frames without a depth image on '{topic}' "
                  f'within depth_slop ({self.slop:g} s) of their stamp: the nearest is '
                  f"{abs(found[1]):.3g} s {when} this frame's (has the depth camera stopped? "
                  'are both stamped by one clock?)')

    def publish(self, dets: Detections, header: Any, frame: Any, labels: Any = None) -> None:
        """Publish the 3D boxes of one frame's detections (when K and depth are there).

        ``labels``: the instance label image of a segmentation model (1 + detection index),
        whose masks then select each detection's depths.
        """
        shape = (int(frame.image.shape[0]), int(frame.image.shape[1]))
        k = self._intrinsics(shape)
        if k is None:
            self.frames_without_k += 1
            return
        depth = self._depth_map(frame)
        if depth is None:
            self.frames_without_depth += 1
            return
        boxes = boxes_3d(dets.boxes, depth[0], k, shape, labels, depth_scale=depth[1])
        self.left_out += len(dets) - len(boxes)
        self.published += 1
        self.state = 'publishing'
        self._reasons.recovered()

        self._pub.publish(detections_3d_to_cdr(dets, boxes, header))
        markers = self._markers
        if markers is not None and markers.get_subscription_count() > 0:
            markers.publish(markers_msg(dets, boxes, header, self._names))

    def diagnostics(self, prefix: str) -> dict[str, str]:
        """Key/values for the node's status."""
        return {f'{prefix}detections_3d': self.state,
                f'{prefix}3D frames published': str(self.published),
                f'{prefix}3D frames without usable camera_info': str(self.frames_without_k),
                f'{prefix}3D frames without depth': str(self.frames_without_depth),
                f'{prefix}3D detections left out (too little depth)': str(self.left_out)}

    def destroy(self) -> None:
        """Destroy the publisher and the subscriptions."""
        for entity in (self._made + [getattr(self, '_info_sub', None)]):
            if entity is not None:
                self._node.endpoints.destroy(entity)
        depth = getattr(self, '_depth', None)
        if depth is not None:
            depth.destroy()


class _Reasons:
    """Log each reason for frames without 3D once while it lasts, and not twice in a period.

    A reason is logged when it begins; again only after a 3D frame was published
    (:meth:`recovered`) and at least ``period_s`` after it was last logged, so a depth camera
    that stops says so once, and one that flickers says so at most once a period.
    """

    def __init__(self, log: Callable[[str], Any], period_s: float = SAY_AGAIN_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._log, self._period, self._clock = log, period_s, clock
        self._said: set[str] = set()
        self._last: dict[str, float] = {}

    def say(self, key: str, text: str) -> None:
        """Log ``text`` (one line, clipped) unless reason ``key`` is held back."""
        now = self._clock()
        if key in self._said or now - self._last.get(key, float('-inf')) < self._period:
            return
        self._said.add(key)
        self._last[key] = now
        self._log(clip(text, 600))

    def recovered(self) -> None:
        """Let the next frame without 3D say why again (a 3D frame went out)."""
        self._said.clear()


def detections_3d_to_cdr(dets: Detections, boxes: Boxes3D, header) -> bytes:
    """Serialise a Detection3DArray: one Detection3D per detection that has a 3D box.

    Each carries the image's header (its optical frame), the 2D detection's hypothesis (its
    pose: the box centre) and ``id``, and the box (centre, identity orientation, size), in
    metres.
    """
    ids = dets.ids()
    index = boxes.index.tolist()
    classes = dets.class_ids.tolist()
    return encode_detection3d_array(
        header.stamp.sec, header.stamp.nanosec, header.frame_id,
        [str(classes[i]) for i in index], dets.scores.astype(float)[boxes.index],
        boxes.centers, boxes.sizes, [ids[i] for i in index])
