"""launch_testing test of ``launch/detect.launch.py`` with a backend the model does not support.

The launch runs a copy of the yolov8n manifest that lists only ``onnx``, with ``backend:=cpu``
and ``strict_backend: true`` from a parameters file, so the autostart configure fails (without
strict_backend the node would reset the backend to onnx and go on; test_node_generic covers
that). The tests check that:

(a) the node logs "backend 'cpu' cannot run 'onnx_only' here (not supported by model
    'onnx_only'); valid: auto, onnx (strict_backend is true)", the launch file logs the failed
    configure (telling the user to check the node log / parameters), the launch keeps running
    (no hang) and the node stays up, answering get_state with unconfigured;
(b) after fixing the parameter (backend onnx) a manual configure succeeds and autostart then
    activates the node (needs the yolov8n weights; skipped without them);
and that the node exits cleanly when the launch shuts down.

How to run: see ``test_launch_detect.py`` (colcon build + source install/setup.bash, then
``python -m pytest test/launch/test_launch_bad_backend.py`` or ``launch_test ...``).
"""

from __future__ import annotations

import logging
import os
import random
import tempfile
import unittest
from pathlib import Path

import pytest
import yaml

from launch_skip import NO_LAUNCH_STACK

try:
    import launch
    import launch_ros  # noqa: F401
    import launch_testing
    import launch_testing.actions
    import launch_testing.asserts
    from launch.actions import IncludeLaunchDescription
    from launch.launch_description_sources import PythonLaunchDescriptionSource
except ImportError:
    pytest.skip(NO_LAUNCH_STACK, allow_module_level=True)

import rclpy  # noqa: E402

from launch_skip import isolate_ros_graph  # noqa: E402
from vision_nodes.tools.client import VisionNodeClient, wait_for  # noqa: E402

LAUNCH_FILE = Path(__file__).resolve().parents[2] / 'launch' / 'detect.launch.py'
NODE = '/vision_node'
DOMAIN_ID = random.SystemRandom().randint(1, 101)
UNSUPPORTED = ("backend 'cpu' cannot run 'onnx_only' here (not supported by model "
               "'onnx_only'); valid: auto, onnx (strict_backend is true)")


def _scenario() -> dict[str, str]:
    """Launch arguments: an onnx-only copy of yolov8n, backend cpu, strict_backend on."""
    folder = Path(tempfile.mkdtemp(prefix='vision_nodes_bad_backend_'))
    source = Path(__file__).resolve().parents[2] / 'config' / 'models' / 'yolov8n.yaml'
    manifest = yaml.safe_load(source.read_text())
    manifest.update(name='onnx_only', backends=['onnx'])
    (folder / 'onnx_only.yaml').write_text(yaml.safe_dump(manifest))
    (folder / 'params.yaml').write_text(yaml.safe_dump(
        {'/**': {'ros__parameters': {'strict_backend': True}}}))
    return {'model': str(folder / 'onnx_only.yaml'), 'backend': 'cpu',
            'params_file': str(folder / 'params.yaml'), 'autostart': 'true'}


def _installed() -> bool:
    from ament_index_python.packages import PackageNotFoundError, get_package_prefix
    try:
        prefix = get_package_prefix('vision_nodes')
    except PackageNotFoundError:
        return False
    return os.access(os.path.join(prefix, 'lib', 'vision_nodes', 'vision_node'), os.X_OK)


SKIP_REASON = None if _installed() else (
    'vision_nodes is not installed in an ament prefix (lib/vision_nodes/vision_node): build '
    'it with colcon and source install/setup.bash')


class _Capture(logging.Handler):
    """Keeps the launch file's LogInfo messages (logger 'launch.user')."""

    def __init__(self):
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


LAUNCH_LOG = _Capture()


@pytest.mark.launch_test
@pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON))
@unittest.skipIf(SKIP_REASON is not None, str(SKIP_REASON))  # for the launch_test runner
def generate_test_description():
    """detect.launch.py with a backend the model does not list, strict_backend, autostart."""
    isolate_ros_graph(DOMAIN_ID)
    logging.getLogger('launch.user').addHandler(LAUNCH_LOG)
    detect = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(str(LAUNCH_FILE)),
        launch_arguments=_scenario().items())
    return launch.LaunchDescription([detect, launch_testing.actions.ReadyToTest()])


def _weights_found() -> bool:
    from ament_index_python.packages import get_package_share_directory
    folders = [os.environ.get('VISION_NODES_MODEL_DIR', ''),
               os.path.join(get_package_share_directory('vision_nodes'), 'config', 'models')]
    return any(f and os.path.isfile(os.path.join(f, 'yolov8n.pt')) for f in folders)


class TestUnsupportedBackend(unittest.TestCase):
    """Run in name order against one launched node."""

    @classmethod
    def setUpClass(cls):
        cls.client = VisionNodeClient(NODE, 'test_launch_bad_backend_client')

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        rclpy.try_shutdown()

    def wait_for(self, predicate, timeout: float, what: str) -> None:
        self.assertTrue(wait_for(predicate, timeout, interval=0.2),
                        f'{what} not within {timeout} s')

    def test_a_failed_configure_is_reported_and_node_stays_up(self, proc_output):
        proc_output.assertWaitFor(UNSUPPORTED, timeout=60)

        def launch_reported():
            return any('FAILED TO CONFIGURE' in m for m in LAUNCH_LOG.messages)

        self.wait_for(launch_reported, 30, "the launch file's failed-configure message")
        report = next(m for m in LAUNCH_LOG.messages if 'FAILED TO CONFIGURE' in m)
        self.assertIn(NODE, report)
        self.assertIn("backend 'cpu'", report)
        self.assertIn('node\'s log', report)
        self.assertIn('check the parameters', report)
        # The launch went on (it logged the failure) and the node is up and unconfigured.
        self.assertEqual(self.client.get_state(), 'unconfigured')

    def test_b_fixed_backend_configures_and_autostart_activates(self):
        if not _weights_found():
            self.skipTest('yolov8n.pt not found: set VISION_NODES_MODEL_DIR')
        self.wait_for(lambda: any('FAILED TO CONFIGURE' in m for m in LAUNCH_LOG.messages),
                      60, 'the failed configure')
        result = self.client.set_parameters(backend='onnx')[0]
        self.assertTrue(result.successful, result.reason)
        self.assertTrue(self.client.change_state('configure', timeout=240))
        # autostart activates after the first configure that succeeds.
        self.wait_for(lambda: self.client.get_state() == 'active', 30, 'active')


@launch_testing.post_shutdown_test()
class TestUnsupportedBackendShutdown(unittest.TestCase):

    def test_node_exits_cleanly(self, proc_info):
        launch_testing.asserts.assertExitCodes(proc_info, allowable_exit_codes=[0])
