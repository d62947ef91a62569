"""What the launch_testing tests of vision_nodes share.

Why one cannot run here (None: it can), the ROS graph of its own each test runs in, and the
real ``ros2`` command.

Not a test module: the launch tests that start ``vision_node`` import it.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import time

#: Why a launch test cannot run without the ROS 2 launch stack (on no package registry).
NO_LAUNCH_STACK = (
    'launch_testing is not installed: the ROS 2 launch stack is on no package registry; '
    'scripts/setup_env.sh installs it from ../shared/ros2-launch-stack when that folder is '
    'beside the checkout (as in CI), or source a ROS 2 install that has it')


def launch_stack_missing() -> bool:
    """Whether launch_testing cannot be imported (the launch stack is not installed)."""
    try:
        import launch_testing  # noqa: F401
    except ImportError:
        return True
    return False


def skip_reason(weights: tuple[str, ...] = ('yolov8n.pt',)) -> str | None:
    """Return why not: the package must be in an ament prefix, each of ``weights`` findable.

    Weights are looked for in ``VISION_NODES_MODEL_DIR`` and the package's config/models.
    """
    from ament_index_python.packages import PackageNotFoundError, get_package_prefix
    try:
        prefix = get_package_prefix('vision_nodes')
    except PackageNotFoundError:
        prefix = None
    if prefix is None or not os.access(
            os.path.join(prefix, 'lib', 'vision_nodes', 'vision_node'), os.X_OK):
        return ('vision_nodes is not installed in an ament prefix (lib/vision_nodes/'
                'vision_node): build it with colcon and source install/setup.bash')
    folders = [os.environ.get('VISION_NODES_MODEL_DIR', ''),
               os.path.join(prefix, 'share', 'vision_nodes', 'config', 'models')]
    for name in weights:
        if not any(f and os.path.isfile(os.path.join(f, name)) for f in folders):
            return f'{name} not found: set VISION_NODES_MODEL_DIR to a folder holding it'
    return None


def isolate_ros_graph() -> int:
    """Return the DDS domain of the launched node and this test process; discovery on localhost.

    Under the project's pytest it is the worker's own domain (test/conftest.py): the launch
    modules of a worker run in one process, one after another, and their ``ros2`` command lines
    inherit its environment. Otherwise (the ``launch_test`` runner) a random one.
    """
    os.environ.setdefault('ROS_DOMAIN_ID', str(random.SystemRandom().randint(1, 101)))
    os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
    os.environ.setdefault('YOLO_OFFLINE', '1')
    os.environ.setdefault('YOLO_CONFIG_DIR', '/tmp/vision_nodes_test_yolo')
    return int(os.environ['ROS_DOMAIN_ID'])


def ros2(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
    """Run the real ``ros2`` command (this interpreter's, else PATH's) in this environment.

    A verb that talks to a node (``param``, ``lifecycle``) runs without the ROS 2 daemon, which
    would outlive the test, and is run again while the node is not discovered yet ('Node not
    found'), until ``timeout``.
    """
    exe = os.path.join(sys.prefix, 'bin', 'ros2')
    exe = exe if os.access(exe, os.X_OK) else shutil.which('ros2') or 'ros2'
    command = [exe, *args]
    if args[0] in ('param', 'lifecycle', 'node', 'service', 'topic'):
        command += ['--no-daemon']
    deadline = time.monotonic() + timeout
    while True:
        run = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        if 'Node not found' not in run.stdout + run.stderr or time.monotonic() > deadline:
            return run
