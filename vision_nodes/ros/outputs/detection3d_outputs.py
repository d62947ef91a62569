"""``detections_3d`` of a detection model: its detections with 3D boxes, from depth.

``depth_source`` says where depth comes from: ``topic`` (an aligned depth image on
``depth_topic``, paired by stamp, see :mod:`..depth_topic`) or ``model:<name>`` (a metric
depth model of the same node, on the same frame). Both need the colour camera's intrinsics,
from ``camera_info`` (a sibling of the image topic). The geometry is
:mod:`vision_nodes.geometry3d`; detections without enough valid depth are left out and
counted for the diagnostics. Created at activate when ``depth_source`` is set.
"""

from __future__ import annotations

from typing import Any, Callable

from sensor_msgs.msg import CameraInfo
from vision_msgs.msg import Detection3DArray

from ...geometry3d import Intrinsics, IntrinsicsError, boxes_3d
from ...images import ImageConversionError
from ...tasks.detect import Detections
from ...text import clip
from ..camera_names import camera_sibling
from ..depth_topic import DepthTopic, depth_view
from ..qos import CAMERA_INFO_IN
from .detection3d_messages import detections_3d_to_cdr
from .detection_switches import DetectionSwitches

MODEL_PREFIX = 'model:'


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
                 report_error: Callable[[str], None], camera_namespace: str = '') -> None:
        """Read depth and K of the camera in ``camera_namespace`` ('' = the node's one camera)."""
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
        try:
            self._depth = None if self._model else DepthTopic(node, depth_topic)
            self._info_sub = node.endpoints.subscription(
                CameraInfo, info_topic, self._on_info, CAMERA_INFO_IN, label='camera_info')
        except BaseException:
            self.destroy()
            raise
        self._info: Any = None
        self._said: set[str] = set()
        #: Counts since activation, for the diagnostics.
        self.left_out = 0
        self.frames_without_depth = 0
        self.published = 0
        self.state = 'waiting for camera_info'

    @property
    def topic(self) -> str:
        """The resolved output topic."""
        return self._pub.topic_name

    def sources(self) -> tuple[str, ...]:
        """Return the model whose results this reads (for lazy mode)."""
        return (self._model,) if self._model else ()

    def wanted(self) -> bool:
        """Whether anything subscribes to detections_3d."""
        return self._pub.get_subscription_count() > 0

    def _on_info(self, msg: Any) -> None:
        self._info = msg

    def _say_once(self, key: str, text: str) -> None:
        self.state = text
        if key not in self._said:
            self._said.add(key)
            self._node.get_logger().warning(text)

    def _intrinsics(self, shape: tuple[int, int]) -> Intrinsics | None:
        """K of the newest camera_info, for images of ``shape``; None (said once) if none."""
        info = self._info
        if info is None:
            self._say_once('info', f"no 3D detections: no camera_info received on "
                           f"'{self._info_sub.topic_name}' yet; 3D boxes need the colour "
                           "camera's intrinsics K: publish its CameraInfo there")
            return None
        try:
            k = Intrinsics.from_k(info.k)
        except IntrinsicsError as exc:
            self._say_once('k', f'no 3D detections: {exc}')
            return None
        if info.width and info.height and (info.height, info.width) != shape:
            sx, sy = shape[1] / info.width, shape[0] / info.height
            k = Intrinsics(k.fx * sx, k.fy * sy, (k.cx + 0.5) * sx - 0.5,
                           (k.cy + 0.5) * sy - 0.5)
        return k

    def _depth_map(self, frame: Any) -> tuple[Any, float] | None:
        """Return the frame's depth map and its factor to metres (None: none for it)."""
        if self._model:
            result = frame.result_of(self._model)
            return None if result is None else (result.depth, 1.0)
        msg = self._depth.match(frame.header.stamp, self.slop)
        if msg is None:
            if not self._depth.heard:
                self._say_once('depth', "no 3D detections: no depth image received on "
                               f"'{self._depth.topic_name}' yet (set depth_topic to the "
                               'aligned depth image topic)')
            return None
        try:
            return depth_view(msg)
        except ImageConversionError as exc:
            self._report_error(f'detections_3d: {exc}')
            return None

    def publish(self, dets: Detections, header: Any, frame: Any, labels: Any = None) -> None:
        """Publish the 3D boxes of one frame's detections (when K and depth are there).

        ``labels``: the instance label image of a segmentation model (1 + detection index),
        whose masks then select each detection's depths.
        """
        shape = (int(frame.image.shape[0]), int(frame.image.shape[1]))
        k = self._intrinsics(shape)
        if k is None:
            return
        depth = self._depth_map(frame)
        if depth is None:
            self.frames_without_depth += 1
            return
        boxes = boxes_3d(dets.boxes, depth[0], k, shape, labels, depth_scale=depth[1])
        self.left_out += len(dets) - len(boxes)
        self.published += 1
        self.state = 'publishing'

        self._pub.publish(detections_3d_to_cdr(dets, boxes, header))

    def diagnostics(self, prefix: str) -> dict[str, str]:
        """Key/values for the node's status."""
        return {f'{prefix}detections_3d': self.state,
                f'{prefix}3D frames published': str(self.published),
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
