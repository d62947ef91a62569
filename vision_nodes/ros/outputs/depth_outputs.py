"""What a depth model publishes (REP 118): ``depth/image`` or ``depth/relative``, and extras.

Every topic is in one namespace, ``depth/``, so the depth image and its ``camera_info`` are
siblings, where image_transport and ``depth_image_proc`` look for them:

* metric models: ``depth/image`` (``32FC1``, metres along the optical axis, NaN where
  invalid);
* relative models: ``depth/relative`` (``32FC1``, unitless: the model's convention), never
  ``depth/image``, so nothing mistakes them for metres;
* ``depth/colored`` (``rgb8``, for people): computed only while someone subscribes;
* with ``publish_camera_info`` (a ROS output switch these outputs declare, :data:`PARAMS`):
  the latest ``camera_info`` (a sibling of the input image topic) republished on
  ``depth/camera_info`` with each depth image's header, so ``depth_image_proc`` can pair
  them into a point cloud.

Every image carries its input image's header. Metric results are metres along the optical axis,
NaN where invalid and +Inf beyond the model's range (REP 118 / REP 117); relative ones are the
model's unitless values. Pixel data is copied once, from the array's memory into the serialised
message (rclpy then neither converts nor serialises the pixels again).
"""

from __future__ import annotations

import array
from typing import Any, Callable, ClassVar, Mapping

import numpy as np
from sensor_msgs.msg import CameraInfo, Image, RegionOfInterest

from ...param_spec import ParamSpec
from ...pipeline import LoadedModel
from ...tasks.depth import DepthParams, DepthResult
from ..inputs.qos import CAMERA_INFO_IN
from ..wire.image_cdr import encode_image
from .detection_outputs import IMAGES

#: The namespace of every depth output, and the names in it (image and camera_info siblings).
NAMESPACE = 'depth'
METRIC, RELATIVE, COLORED, CAMERA_INFO = 'image', 'relative', 'colored', 'camera_info'


#: Republish camera_info with each depth image: a ROS output switch, declared by these
#: outputs as a node parameter (prefixed like the task's when the node runs several models).
PUBLISH_CAMERA_INFO = ParamSpec(
    'publish_camera_info', False,
    'Republish the camera_info that matches each depth image (same stamp and frame) on '
    'depth/camera_info, so depth_image_proc can make a point cloud.', applies='activate')


class DepthOutputs:
    """Publishers of one depth model."""

    #: The ROS output switches these outputs declare (node parameters).
    params: ClassVar[tuple[ParamSpec, ...]] = (PUBLISH_CAMERA_INFO,)

    def __init__(self, node: Any, model: LoadedModel, namespace: str = '',
                 report_error: Callable[[str], None] = lambda text: None) -> None:
        self._node = node
        self._report_error = report_error
        self._task = model.task
        self._namespace = namespace
        image = METRIC if model.task.metric else RELATIVE
        here = f'{namespace}{NAMESPACE}/'
        self._depth, self._colored, self._info_out = node.endpoints.publishers([
            (Image, here + image, IMAGES),
            (Image, here + COLORED, IMAGES),
            (CameraInfo, here + CAMERA_INFO, IMAGES)])
        self._info_in = None
        #: The camera_info topic republished: the node's ``camera_info``, or in a multi-camera
        #: node the camera's own (the sibling of its image topic, set by ``CameraOutputs``).
        self.camera_info = 'camera_info'
        self._latest_info: CameraInfo | None = None
        self._params: DepthParams = DepthParams()

    @property
    def topics(self) -> list[str]:
        """Resolved names of the topics published (the depth image first)."""
        return [self._depth.topic_name, self._colored.topic_name, self._info_out.topic_name]

    def wanted(self) -> bool:
        """Whether anything subscribes to the depth image or its coloured picture."""
        return (self._depth.get_subscription_count() > 0
                or self._colored.get_subscription_count() > 0)

    def activate(self, params: DepthParams, switches: Mapping[str, Any]) -> None:
        """Subscribe to camera_info when it is to be republished (``publish_camera_info``)."""
        self._params = params
        if switches[PUBLISH_CAMERA_INFO.name] and self._info_in is None:
            self._info_in = self._node.endpoints.subscription(
                CameraInfo, self.camera_info, self._on_camera_info, CAMERA_INFO_IN)

    def deactivate(self) -> None:
        """Drop the camera_info subscription."""
        if self._info_in is not None:
            self._node.endpoints.destroy(self._info_in)
            self._info_in = None
        self._latest_info = None

    def params_changed(self, old: DepthParams, new: DepthParams) -> None:
        """Colour settings apply to the next frame."""
        self._params = new

    def update_switches(self, switches: Mapping[str, Any]) -> None:
        """Nothing live: ``publish_camera_info`` applies at activate."""

    def _on_camera_info(self, msg: CameraInfo) -> None:
        self._latest_info = msg

    def publish(self, result: DepthResult, header: Any, frame: Any = None) -> None:
        """Publish one frame's depth image, and the extras someone listens to."""
        self._depth.publish(depth_to_cdr(result, header))
        if self._colored.get_subscription_count() > 0:
            rgb = self._task.colorize(result, self._params)
            self._colored.publish(colored_to_cdr(rgb, header))
        info = self._latest_info
        if self._info_in is not None and info is not None:
            try:
                self._info_out.publish(camera_info_for(info, header, result.shape))
            except ValueError as exc:
                self._report_error(f'camera_info not republished: {exc}')

    def destroy(self) -> None:
        """Destroy the publishers and the camera_info subscription."""
        self.deactivate()
        for pub in (self._depth, self._colored, self._info_out):
            self._node.endpoints.destroy(pub)


#: Encodings of the published images.
DEPTH_ENCODING = '32FC1'
COLORED_ENCODING = 'rgb8'


def depth_pixels(result: DepthResult) -> np.ndarray:
    """Return the depth map as the C-contiguous float32 (H, W) array the image carries."""
    depth = np.ascontiguousarray(result.depth, dtype=np.float32)
    if depth.ndim != 2:
        raise ValueError(f'a depth map is (height, width), got shape {depth.shape}')
    return depth


def colored_pixels(rgb: np.ndarray) -> np.ndarray:
    """Return a colourised depth map as the C-contiguous uint8 (H, W, 3) array it carries."""
    rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
    if rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(f'a colourised depth image is (height, width, 3), got {rgb.shape}')
    return rgb


def depth_to_cdr(result: DepthResult, header) -> bytes:
    """Serialise the ``32FC1`` Image of a depth map, with the input image's ``header``."""
    return encode_image(depth_pixels(result), DEPTH_ENCODING, header)


def colored_to_cdr(rgb: np.ndarray, header) -> bytes:
    """Serialise the ``rgb8`` Image of a colourised depth map (:func:`tasks.depth.colorize`)."""
    return encode_image(colored_pixels(rgb), COLORED_ENCODING, header)


def described_shape(info: CameraInfo) -> tuple[int, int]:
    """(height, width) of the images ``info`` describes: its ROI if set, over its binning."""
    height = info.roi.height or info.height
    width = info.roi.width or info.width
    return height // max(1, info.binning_y), width // max(1, info.binning_x)


def camera_info_for(info: CameraInfo, header, shape: tuple[int, int] | None = None
                    ) -> CameraInfo:
    """Return a copy of ``info`` carrying ``header`` (the depth image's stamp and frame).

    ``depth_image_proc`` pairs a depth image with the CameraInfo of the same stamp to make a
    point cloud. With ``shape`` (the depth map's height, width), a CameraInfo for images of
    another size (after its ROI and binning) is refused with a ValueError saying both, rather
    than republished to give a wrong cloud; an uncalibrated one (size 0) is passed on.
    """
    if shape is not None and (info.height or info.width):
        expected = described_shape(info)
        if expected != (int(shape[0]), int(shape[1])):
            raise ValueError(f'camera_info describes {expected[1]}x{expected[0]} images but '
                             f'the depth image is {shape[1]}x{shape[0]}')
    out = CameraInfo()
    out.header = header
    out.height, out.width = info.height, info.width
    out.distortion_model = info.distortion_model
    out.d = array.array('d', info.d)
    out.k, out.r, out.p = np.array(info.k), np.array(info.r), np.array(info.p)
    out.binning_x, out.binning_y = info.binning_x, info.binning_y
    roi = info.roi
    out.roi = RegionOfInterest(x_offset=roi.x_offset, y_offset=roi.y_offset,
                               height=roi.height, width=roi.width, do_rectify=roi.do_rectify)
    return out
