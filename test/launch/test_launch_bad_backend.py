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
import tempfile
import unittest
from pathlib import Path

import launch_testing
import yaml

from launch_helpers import NODE, ROOT, ExitsCleanly, NodeTest, launch_test, node_launch
from launch_skip import skip_reason

UNSUPPORTED = ("backend 'cpu' cannot run 'onnx_only' here (not supported by model "
               "'onnx_only'); valid: auto, onnx (strict_backend is true)")


def _scenario() -> dict[str, str]:
    """Launch arguments: an onnx-only copy of yolov8n, backend cpu, strict_backend on."""
    folder = Path(tempfile.mkdtemp(prefix='vision_nodes_bad_backend_'))
    manifest = yaml.safe_load((ROOT / 'config' / 'models' / 'yolov8n.yaml').read_text())
    manifest.update(name='onnx_only', backends=['onnx'])
    (folder / 'onnx_only.yaml').write_text(yaml.safe_dump(manifest))
    (folder / 'params.yaml').write_text(yaml.safe_dump(
        {'/**': {'ros__parameters': {'strict_backend': True}}}))
    return {'model': str(folder / 'onnx_only.yaml'), 'backend': 'cpu',
            'params_file': str(folder / 'params.yaml'), 'autostart': 'true'}


class _Capture(logging.Handler):
    """Keeps the launch file's LogInfo messages (logger 'launch.user')."""

    def __init__(self):
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


LAUNCH_LOG = _Capture()


@launch_test(skip_reason(weights=()))
def generate_test_description():
    """detect.launch.py with a backend the model does not list, strict_backend, autostart."""
    logging.getLogger('launch.user').addHandler(LAUNCH_LOG)
    return node_launch('detect.launch.py', **_scenario())


class TestUnsupportedBackend(NodeTest):
    """Run in name order against one launched node."""

    IMAGE_TOPIC = None

    def test_a_failed_configure_is_reported_and_node_stays_up(self, proc_output):
        proc_output.assertWaitFor(UNSUPPORTED, timeout=60)

        def launch_reported():
            return any('FAILED TO CONFIGURE' in m for m in LAUNCH_LOG.messages)

        self.wait(launch_reported, 30, "the launch file's failed-configure message", 0.2)
        report = next(m for m in LAUNCH_LOG.messages if 'FAILED TO CONFIGURE' in m)
        self.assertIn(NODE, report)
        self.assertIn("backend 'cpu'", report)
        self.assertIn('node\'s log', report)
        self.assertIn('check the parameters', report)
        # The launch went on (it logged the failure) and the node is up and unconfigured.
        self.assertEqual(self.client.get_state(), 'unconfigured')

    def test_b_fixed_backend_configures_and_autostart_activates(self):
        if skip_reason() is not None:
            self.skipTest(skip_reason())
        self.wait(lambda: any('FAILED TO CONFIGURE' in m for m in LAUNCH_LOG.messages),
                  60, 'the failed configure', 0.2)
        result = self.client.set_parameters(backend='onnx')[0]
        self.assertTrue(result.successful, result.reason)
        self.assertTrue(self.client.change_state('configure', timeout=240))
        # autostart activates after the first configure that succeeds.
        self.wait(lambda: self.client.get_state() == 'active', 30, 'active', 0.2)


@launch_testing.post_shutdown_test()
class TestUnsupportedBackendShutdown(ExitsCleanly, unittest.TestCase):
    """After the launch: the node exited cleanly."""
