"""An aligned depth image topic, paired with colour frames by stamp (``depth_source: topic``).

REP 118 depth images: ``32FC1`` in metres or ``16UC1`` in millimetres, NaN or 0 where the
sensor has no return. The newest few are kept; a colour frame takes, of those that have
arrived, the one whose stamp is nearest its own (the caller holds it to ``depth_slop``). It
never waits for one still on its way: the frame's 2D results would wait with it, and a depth
camera that stops would hold every frame for ``depth_slop`` (``message_filters`` is not
available everywhere the node runs, and one pairing rule for one pair of topics needs no more
than this). The subscription's QoS is chosen at activation
as the image's ``qos_reliability: auto`` chooses it (reliable unless a publisher present then
is best effort). The subscription is raw, read in place like the image's
(:mod:`..wire.cdr_reader`): the depth pixels stay in the bytes rclpy took, and bytes that are
not a well-formed ``Image`` are refused in one (throttled) log line.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

import numpy as np
from sensor_msgs.msg import Image

from ...images import ImageConversionError
from ...limits import MAX_IMAGE_BYTES, MAX_IMAGE_PIXELS
from ..wire.cdr_reader import CdrError, read_image
from .qos import choose_qos

#: Depth images kept for pairing (a few frames of a 30 Hz camera).
KEEP = 8
#: Queue depth of the depth subscription.
DEPTH_QUEUE = 2
#: Bytes per pixel and the factor to metres of each accepted encoding.
DEPTH_ENCODINGS = {'32FC1': ('f4', 1.0), '16UC1': ('u2', 1e-3), 'mono16': ('u2', 1e-3)}


def stamp_ns(stamp: Any) -> int:
    """Return a ``builtin_interfaces/Time`` as integer nanoseconds."""
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def depth_view(msg: Any) -> tuple[np.ndarray, float]:
    """Return (a view on a depth Image's pixels, the factor to metres); nothing is copied.

    NaN, inf or 0 mean no return. Raises ImageConversionError in one line for another
    encoding or inconsistent sizes.
    """
    kind = DEPTH_ENCODINGS.get(msg.encoding)
    if kind is None:
        raise ImageConversionError(
            f"depth image encoding '{msg.encoding[:40]}' is not 32FC1 (metres) or 16UC1 "
            '(millimetres): publish an aligned depth image in one of them (REP 118)')
    height, width, step = int(msg.height), int(msg.width), int(msg.step)
    dtype = np.dtype(kind[0]).newbyteorder('>' if msg.is_bigendian else '<')
    data = memoryview(msg.data).cast('B')
    if height * width > MAX_IMAGE_PIXELS or height * step > MAX_IMAGE_BYTES:
        raise ImageConversionError(f'depth image of {width}x{height} is larger than accepted')
    if step < width * dtype.itemsize or step % dtype.itemsize or len(data) < height * step \
            or not height or not width:
        raise ImageConversionError(
            f'depth image is inconsistent: {width}x{height}, step {step}, {len(data)} bytes')
    raw = np.frombuffer(data, dtype=np.uint8, count=height * step)
    pixels = np.lib.stride_tricks.as_strided(raw.view(dtype), (height, width),
                                             (step, dtype.itemsize), writeable=False)
    return pixels, kind[1]


class DepthTopic:
    """The subscription to the depth topic and the newest depth images, by stamp."""

    def __init__(self, node: Any, topic: str) -> None:
        self._node = node
        self._images: deque = deque(maxlen=KEEP)
        self._lock = threading.Lock()
        #: The topic as resolved (for messages).
        self.topic_name = node.resolve_topic_name(topic)
        # Reliable unless a publisher there is best effort (depth images are large: a
        # best-effort subscription loses the ones a dropped fragment breaks).
        choice = choose_qos(node.get_publishers_info_by_topic(self.topic_name), DEPTH_QUEUE,
                            self.topic_name)
        node.get_logger().info(f'depth_topic: {choice.reason}')
        self._sub = node.endpoints.subscription(Image, topic, self._on_depth, choice.profile,
                                                label='depth_topic', raw=True)
        #: Whether any depth image arrived since activation.
        self.heard = False

    def _on_depth(self, data: bytes) -> None:
        try:
            msg = read_image(data)
        except CdrError as exc:
            self._node.get_logger().error(f'depth_topic: skipping depth image: {exc}',
                                          throttle_duration_sec=5.0)
            return
        with self._lock:
            self._images.append((stamp_ns(msg.header.stamp), msg))
            self.heard = True

    def nearest(self, stamp: Any) -> tuple[Any, float] | None:
        """Return the depth image nearest ``stamp`` of those that have arrived (None: none).

        With it, its stamp minus ``stamp`` in seconds. Never waits.
        """
        target = stamp_ns(stamp)
        with self._lock:
            best = min(self._images, key=lambda item: abs(item[0] - target), default=None)
        return None if best is None else (best[1], (best[0] - target) / 1e9)

    def destroy(self) -> None:
        """Destroy the subscription."""
        self._node.endpoints.destroy(self._sub)
