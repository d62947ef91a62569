"""Start ``vision_node`` under launch_testing and talk to it: what the launch tests share.

A test/launch module's ``generate_test_description`` includes one of the package's launch files
(:func:`launch_description`, or :func:`node_launch` under :func:`launch_test`); its cases
derive from :class:`NodeTest` (a client, bus.jpg, waits) and its post-shutdown check from
:class:`ExitsCleanly`.

The client of each module is its own (:class:`LaunchClient`). launch_testing runs a module's
cases on a thread that it does not stop when the launch ends early (the node exited), and a
pytest worker runs its launch modules one after another in one process; their clients shared
rclpy's default context, so a module whose node had stopped ran on beside the next one: its
``rclpy.try_shutdown()`` destroyed the next module's client ('destruction was requested') and
its requests reached the next module's node (same name, same domain); fresh-clone CI lost
900 s so. Now each client has a context of its own in the launch's DDS domain, the launch
closes it when it shuts down, and the waits fail as soon as the launch has stopped.

Not a test module; the launch test modules import it (it needs the ROS 2 launch stack).
"""

from __future__ import annotations

import threading
import time
import unittest
from pathlib import Path
from typing import Any, Callable

import pytest

from launch_skip import NO_LAUNCH_STACK, isolate_ros_graph

try:
    import launch
    import launch_ros  # noqa: F401
    import launch_testing.actions
    import launch_testing.asserts
    from launch.actions import IncludeLaunchDescription, RegisterEventHandler
    from launch.event_handlers import OnShutdown
    from launch.launch_description_sources import PythonLaunchDescriptionSource
except ImportError:
    pytest.skip(NO_LAUNCH_STACK, allow_module_level=True)

import rclpy  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402

from vision_nodes.tools.client import MessageQueue, VisionNodeClient  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
#: The node every launch file starts (its default node_name, no namespace).
NODE = '/vision_node'
#: The clients of the running launch, closed when it shuts down (:func:`node_launch`).
_OPEN: list[LaunchClient] = []


def launch_test(skip_reason: str | None) -> Callable:
    """Mark ``generate_test_description`` for launch_testing; skip it (saying why) if told."""
    def decorate(generate: Callable) -> Callable:
        generate = unittest.skipIf(skip_reason is not None, str(skip_reason))(generate)
        generate = pytest.mark.skipif(skip_reason is not None, reason=str(skip_reason))(generate)
        return pytest.mark.launch_test(generate)
    return decorate


def node_launch(launch_file: str, **arguments: str) -> launch.LaunchDescription:
    """Include ``launch/<launch_file>`` with ``arguments``; ready to test once it started.

    The node runs in this process's DDS domain (:func:`launch_skip.isolate_ros_graph`), the one
    :class:`NodeTest`'s client joins. The client is closed when the launch shuts down, so a
    test thread that outlives its launch reaches neither the next module's node nor its client.
    """
    isolate_ros_graph()
    included = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(str(ROOT / 'launch' / launch_file)),
        launch_arguments=arguments.items())
    return launch.LaunchDescription([
        RegisterEventHandler(OnShutdown(on_shutdown=_close_clients)), included,
        launch_testing.actions.ReadyToTest()])


def launch_description(launch_file: str, skip_reason: str | None, **arguments: str
                       ) -> Callable[[], launch.LaunchDescription]:
    """Return a module's ``generate_test_description``: :func:`node_launch` of these."""
    @launch_test(skip_reason)
    def generate_test_description() -> launch.LaunchDescription:
        return node_launch(launch_file, **arguments)

    return generate_test_description


def _close_clients(_event, _context) -> None:
    """Close the clients of the launch that is shutting down."""
    while _OPEN:
        _OPEN.pop().close()


def bus_bgr():
    """Return bus.jpg (bundled with ultralytics) as a BGR uint8 array."""
    import cv2
    import ultralytics

    path = Path(ultralytics.__file__).parent / 'assets' / 'bus.jpg'
    bgr = cv2.imread(str(path))
    assert bgr is not None, f'cannot read {path}'
    return bgr


def bus_image() -> Image:
    """Return bus.jpg as a bgr8 sensor_msgs/Image."""
    from vision_nodes.ros.inputs.conversion import numpy_to_image

    return numpy_to_image(bus_bgr(), 'bgr8')


class LaunchClient(VisionNodeClient):
    """A :class:`VisionNodeClient` in an rclpy context of its own, in DDS domain ``domain_id``.

    :meth:`close` shuts that context down, and nothing else; the running launch closes it too
    when it shuts down (whichever comes first).
    """

    def __init__(self, target: str, name: str, domain_id: int) -> None:
        self._closing = threading.Lock()
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        super().__init__(target, name, self.context)
        _OPEN.append(self)

    def close(self) -> None:
        """Stop spinning, destroy the client node, shut the context down (once)."""
        with self._closing:
            if self.context.ok():
                super().close()
                self.context.try_shutdown()


class NodeTest(unittest.TestCase):
    """Test cases against the launched node, run in name order through one client.

    The client (``cls.client``, named after the module) is made before the first case and
    closed after the last; ``cls.image`` (bus.jpg) goes out on ``IMAGE_TOPIC`` through
    :meth:`publish`. Waits give up at once when the launch has stopped.
    """

    #: How long the first configure may take (it may export the model to ONNX).
    ACTIVE_TIMEOUT = 240.0
    #: Where :meth:`publish` sends bus.jpg (relative to the node); None: no image publisher.
    IMAGE_TOPIC: str | None = 'image'
    #: The node's outputs the cases read: attribute -> (message type, topic, QoS); each
    #: becomes a :class:`MessageQueue` at ``cls.<attribute>``, subscribed before the first case.
    OUTPUTS: dict[str, tuple[Any, str, Any]] = {}

    @classmethod
    def setUpClass(cls) -> None:
        """Connect a client of this module's own to the launched node; subscribe OUTPUTS."""
        cls.client = LaunchClient(NODE, f'{cls.__module__}_client', isolate_ros_graph())
        cls.seq = 0
        if cls.IMAGE_TOPIC is not None:
            cls.image = bus_image()
            cls.image_pub = cls.client.publisher(Image, cls.IMAGE_TOPIC, 10)
        for attribute, (msg_type, topic, qos) in cls.OUTPUTS.items():
            setattr(cls, attribute, cls.client.subscribe(msg_type, topic, qos))

    @classmethod
    def tearDownClass(cls) -> None:
        """Close the client and its context."""
        cls.client.close()

    def setUp(self, launch_service) -> None:
        """Keep the running launch (launch_testing passes it) to see when it stops."""
        self._launch_service = launch_service

    def wait(self, predicate: Callable[[], Any], timeout: float, what: str,
             interval: float = 0.5) -> None:
        """Poll ``predicate`` until true; fail after ``timeout`` s or once the launch stopped."""
        deadline = time.monotonic() + timeout
        while True:
            self.assert_launch_running(what)
            if predicate():
                return
            if time.monotonic() >= deadline:
                self.fail(f'{what} not within {timeout} s')
            time.sleep(interval)

    def assert_launch_running(self, what: str) -> None:
        """Fail at once, saying so, when the launch has stopped (its node exited)."""
        if self._launch_service.context.is_shutdown:
            self.fail(f'{what}: the launch has stopped (its node exited)')

    def wait_until_active(self, timeout: float | None = None, answer_within: float = 30.0
                          ) -> None:
        """Wait until the node answers get_state with 'active' (it may be configuring)."""
        def active() -> bool:
            try:  # services answer during the first configure's export too
                return self.client.get_state(timeout=answer_within) == 'active'
            except TimeoutError:
                return False

        self.wait(active, timeout or self.ACTIVE_TIMEOUT, 'node active')

    def publish(self) -> int:
        """Publish bus.jpg with the next sequence number (frame_id ``seq<N>``); return N."""
        type(self).seq += 1
        self.image.header.frame_id = f'seq{self.seq}'
        self.image.header.stamp = self.client.node.get_clock().now().to_msg()
        self.image_pub.publish(self.image)
        return self.seq

    def answer_to_frame(self, queue: MessageQueue, timeout: float = 120.0) -> Any:
        """Publish bus.jpg until ``queue`` answers one frame (its frame_id); return the answer."""
        return self.answers_to_frame({'': queue}, timeout)['']

    def answers_to_frame(self, queues: dict[str, MessageQueue], timeout: float = 120.0,
                         wait: float = 1.0) -> dict[str, Any]:
        """Publish bus.jpg until every queue answered one frame; return the answers by key.

        Each frame gets ``wait`` seconds per queue; an answer to an older frame is dropped.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            frame = f'seq{self.publish()}'
            got = {key: queue.get(wait, lambda m: m.header.frame_id == frame)
                   for key, queue in queues.items()}
            if all(msg is not None for msg in got.values()):
                return got
            self.assert_launch_running(f'answers to bus.jpg on {sorted(queues)}')
        self.fail(f'no complete answer within {timeout} s')


class ExitsCleanly:
    """The post-shutdown check of a launch test module (mixed into its TestCase)."""

    def test_node_exits_cleanly(self, proc_info):
        launch_testing.asserts.assertExitCodes(proc_info, allowable_exit_codes=[0])
