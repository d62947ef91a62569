"""Shared fixtures: isolated ROS domain, weights, images, a session-wide engine cache."""

from __future__ import annotations

import fcntl
import os
import random
import sys
import tempfile
from pathlib import Path

# Two test processes share the machine's cores (pytest-xdist: scripts/dev test), and so do the
# nodes they start. OpenMP threads (PyTorch's) that spin while waiting for work take the
# other process's core: test_torch_device.py run twice at once took 77 s each, 22 s with
# passive waiting (15 s alone); test_batch.py 22 s and 12 s. Set before anything loads
# OpenMP; children inherit it. The package itself leaves this setting to its user.
os.environ.setdefault('OMP_WAIT_POLICY', 'PASSIVE')

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from vision_nodes.manifest import use_default_model_dir  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# Test files live in test/unit/<room>/, test/ros/ and test/launch/; the helpers they share
# (node_harness, fake_tensorrt, ...) stay here, importable from every folder.
sys.path.insert(0, str(ROOT / 'test'))
from launch_skip import NO_LAUNCH_STACK, launch_stack_missing  # noqa: E402

#: Domains a session holds: its own and the next ones, for its pytest-xdist workers.
DOMAIN_BLOCK = 4
#: The lock files of the domains this session holds, open until it exits.
_HELD_DOMAINS: list = []


def _claim_domains() -> int:
    """Return the first of :data:`DOMAIN_BLOCK` DDS domains no other test session here holds.

    Each domain is held by a lock file (``flock``, released when the process ends), so two
    suites run at once on one machine never share a domain; the search starts at a random one.
    Where the locks cannot be taken (a folder of another user's), a random domain, as before.
    """
    start = random.Random(os.getpid()).randint(1, 80)
    folder = Path(tempfile.gettempdir()) / 'vision_nodes_test_domains'
    try:
        folder.mkdir(exist_ok=True)
        for offset in range(80):
            first = 1 + (start - 1 + offset) % 80
            held = []
            for domain in range(first, first + DOMAIN_BLOCK):
                handle = open(folder / f'{domain}.lock', 'w')
                held.append(handle)
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    break
            else:
                _HELD_DOMAINS.extend(held)
                return first
            for handle in held:
                handle.close()
    except OSError:
        pass
    return start


# Each test session gets its own DDS domain and stays on this machine, so parallel sessions
# (or other ROS processes) never see each other's topics. Under pytest-xdist each worker
# (gw0, gw1, ...) inherits the session's domain from the controller and takes the next ones,
# so the workers' nodes never hear each other either.
if 'ROS_DOMAIN_ID' not in os.environ:
    os.environ['ROS_DOMAIN_ID'] = str(_claim_domains())
_WORKER = os.environ.get('PYTEST_XDIST_WORKER', '')
if _WORKER.startswith('gw') and _WORKER[2:].isdigit():
    os.environ['ROS_DOMAIN_ID'] = str(
        (int(os.environ['ROS_DOMAIN_ID']) + 1 + int(_WORKER[2:])) % 101)
os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
os.environ.setdefault('YOLO_OFFLINE', '1')
os.environ.setdefault('YOLO_AUTOINSTALL', 'False')
os.environ.setdefault('YOLO_CONFIG_DIR', str(ROOT / '.cache' / 'ultralytics'))
use_default_model_dir()


def _venv_on_ament_prefix_path() -> None:
    """Put this venv's ament index last on ``AMENT_PREFIX_PATH``, as sourcing ROS would.

    scripts/setup_env.sh links the editable package into the venv (scripts/ament_prefix.py) and
    installs the launch stack there; the launch tests, ``ros2`` and launch_ros find them
    through the index. A sourced workspace's prefixes stay first.
    """
    if not (Path(sys.prefix) / 'share' / 'ament_index' / 'resource_index').is_dir():
        return
    paths = [p for p in os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep) if p]
    if sys.prefix not in paths:
        os.environ['AMENT_PREFIX_PATH'] = os.pathsep.join([*paths, sys.prefix])


_venv_on_ament_prefix_path()


if launch_stack_missing():
    class _NeedsTheLaunchStack(pytest.Module):
        """A launch_testing file that is not imported: it skips, saying why."""

        def _getobj(self):
            pytest.skip(NO_LAUNCH_STACK, allow_module_level=True)

    def pytest_pycollect_makemodule(module_path, parent):
        """Make each launch_testing file of test/launch skip, saying where the stack is.

        Each file's own guard is for the ``launch_test`` runner.
        """
        if module_path.parent.name == 'launch' and \
                'launch_testing' in module_path.read_text(errors='replace'):
            return _NeedsTheLaunchStack.from_parent(parent, path=module_path)
        return None


def _model_dir() -> Path | None:
    value = os.environ.get('VISION_NODES_MODEL_DIR')
    return Path(value) if value else None


@pytest.fixture(scope='session')
def model_dir() -> Path:
    """Folder with yolov8n.pt (../shared/models); tests that need real weights skip without."""
    folder = _model_dir()
    if folder is None or not (folder / 'yolov8n.pt').is_file():
        pytest.skip('real YOLOv8n weights not found: set VISION_NODES_MODEL_DIR to a folder '
                    'holding yolov8n.pt (../shared/models in this project)')
    return folder


@pytest.fixture(scope='session')
def engine_cache_dir(tmp_path_factory) -> Path:
    """One engine cache for the whole session, so the ONNX export happens once."""
    path = tmp_path_factory.mktemp('engine_cache')
    os.environ['VISION_NODES_CACHE_DIR'] = str(path)
    return path


@pytest.fixture(scope='session')
def assets() -> Path:
    """Return the folder of sample images bundled inside the ultralytics package."""
    ultralytics = pytest.importorskip('ultralytics', reason='ultralytics (bundled images)')
    return Path(ultralytics.__file__).parent / 'assets'


@pytest.fixture(scope='session')
def bus_bgr(assets) -> np.ndarray:
    """bus.jpg as a BGR uint8 array (810 x 1080)."""
    import cv2

    image = cv2.imread(str(assets / 'bus.jpg'))
    assert image is not None
    return image


@pytest.fixture(scope='session')
def calibration_dir(tmp_path_factory, assets) -> Path:
    """Make a small int8 calibration folder: bus.jpg and zidane.jpg, flipped, cropped (8)."""
    import cv2

    folder = tmp_path_factory.mktemp('calibration')
    for name in ('bus', 'zidane'):
        image = cv2.imread(str(assets / f'{name}.jpg'))
        height, width = image.shape[:2]
        variants = {'': image, '_flip': image[:, ::-1], '_top': image[:height * 3 // 4],
                    '_right': image[:, width // 4:]}
        for suffix, variant in variants.items():
            assert cv2.imwrite(str(folder / f'{name}{suffix}.jpg'), variant)
    return folder
