"""A colcon workspace built as the README says (issue #33, item 1).

A fresh workspace whose ``src/`` holds this working tree (its tracked and not-ignored files,
as a clone would) gets the README's commands, run as written: the message package linked
beside the clone, then ``python3 -m colcon build`` with colcon from the registry against the
venv's ROS (the PyPI wheels stand in for ``/opt/ros``; the one venv-only setting, the wheels'
CMake include fix-up, comes through a colcon defaults file, so the command line stays the
README's). Then: both packages are in ``install/``, catkin_pkg (what ``rosdep install
--from-paths src`` reads) finds both, the messages import from the installed workspace with its
``setup.bash`` sourced, and the installed demo configures a pose model (whose keypoints need
``vision_nodes_msgs``) and runs it on bus.jpg. About 40 s on this 2-core machine, most of it
the message package's CMake build.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytest.importorskip('rclpy', reason='rclpy (ROS 2) is not installed')
pytest.importorskip('colcon_core', reason='colcon is not installed (requirements/test.txt)')
catkin_packages = pytest.importorskip('catkin_pkg.packages', reason='catkin_pkg (rosdep)')

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / 'README.md'
#: The README's workspace commands, in order: in ``src/`` after the clone, then in the root.
LINK = 'ln -s vision_nodes/interfaces/vision_nodes_msgs vision_nodes_msgs'
BUILD = 'python3 -m colcon build --packages-up-to vision_nodes'
SOURCE = 'source install/setup.bash'
PACKAGES = {'vision_nodes', 'vision_nodes_msgs'}


def _readme_ros_block() -> str:
    """The first shell block of the README's "Running with ROS 2" section."""
    text = README.read_text()
    section = text[text.index('## Running with ROS 2'):]
    return section[section.index('```bash'):section.index('```', section.index('```bash') + 7)]


def test_the_readme_gives_these_commands():
    """The commands this test runs are the README's, in its order."""
    block = _readme_ros_block()
    lines = [line.split('#')[0].strip() for line in block.splitlines()]
    at = [lines.index(command) for command in (LINK, BUILD, SOURCE)]
    assert at == sorted(at), block


def _copy_working_tree(dest: Path) -> None:
    """Copy what a clone of this working tree holds (tracked + untracked, not ignored)."""
    names = subprocess.run(['git', 'ls-files', '--cached', '--others', '--exclude-standard',
                            '-z'], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, names.decode().split('\0')):
        source = ROOT / name
        if source.is_file() and not source.is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)


def _build_env(ws: Path) -> dict[str, str]:
    """The environment ``source /opt/ros/<distro>/setup.bash`` gives, with the venv's ROS."""
    import numpy

    venv = Path(sys.prefix)
    defaults = ws / 'venv_ros_defaults.yaml'
    cmake_args = [f'-DPython3_EXECUTABLE={sys.executable}', '-DBUILD_TESTING=OFF',
                  f'-DCMAKE_PROJECT_INCLUDE={ROOT / "scripts" / "wheel_include_redirect.cmake"}',
                  f'-DVISION_MSGS_PYTHON_INCLUDE_DIR={sysconfig.get_paths()["include"]}',
                  f'-DVISION_MSGS_NUMPY_INCLUDE_DIR={numpy.get_include()}']
    defaults.write_text(json.dumps({'build': {'cmake-args': cmake_args}}))  # JSON is YAML
    return {**os.environ, 'PATH': f'{venv / "bin"}:{os.environ.get("PATH", "")}',
            'AMENT_PREFIX_PATH': str(venv), 'CMAKE_PREFIX_PATH': str(venv),
            'COLCON_HOME': str(ws / '.colcon'), 'COLCON_DEFAULTS_FILE': str(defaults)}


def _bash(command: str, cwd: Path, env: dict[str, str], timeout: float = 600):
    return subprocess.run(['bash', '-c', command], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope='module')
def workspace(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A workspace built with the README's commands; its root and the build environment."""
    if not (ROOT / '.git').exists():
        pytest.skip('not a git checkout: the workspace copies what git ls-files names')
    for tool in ('cmake', 'gcc', 'g++'):
        if shutil.which(tool) is None:
            pytest.skip(f'{tool} is not installed (the message package is a CMake build)')
    ws = tmp_path_factory.mktemp('ros2_ws')
    _copy_working_tree(ws / 'src' / 'vision_nodes')
    env = _build_env(ws)
    link = _bash(LINK, ws / 'src', env)
    assert link.returncode == 0, link.stderr
    build = _bash(BUILD, ws, env)
    assert build.returncode == 0, (build.stdout + build.stderr)[-4000:]
    return ws, env


def test_both_packages_are_found_and_installed(workspace):
    """colcon built both; catkin_pkg, which rosdep's --from-paths reads, finds both."""
    ws, _ = workspace
    for name in PACKAGES:
        assert (ws / 'install' / name / 'share' / name / 'package.xml').is_file(), name
    found = catkin_packages.find_packages(str(ws / 'src'))
    assert {package.name for package in found.values()} == PACKAGES


def test_the_messages_import_from_the_installed_workspace(workspace, tmp_path):
    """With install/setup.bash sourced, both packages come from install/ and work."""
    ws, env = workspace
    code = ('import json, vision_nodes, vision_nodes_msgs.msg as m\n'
            'from rclpy.serialization import deserialize_message, serialize_message\n'
            'from ament_index_python.packages import get_package_share_directory as share\n'
            'k = m.Keypoints2DArray(); k.poses.append(m.Keypoints2D(id="3"))\n'
            'back = deserialize_message(serialize_message(k), m.Keypoints2DArray)\n'
            'print(json.dumps([vision_nodes.__file__, m.__file__, back.poses[0].id,\n'
            '                  share("vision_nodes"), share("vision_nodes_msgs")]))\n')
    # Outside the checkout, so nothing but the workspace can provide vision_nodes.
    run = _bash(f'source {ws}/install/setup.bash && python3 -c \'{code}\'', tmp_path, env)
    assert run.returncode == 0, run.stderr[-3000:]
    node, msgs, ident, node_share, msgs_share = json.loads(run.stdout.splitlines()[-1])
    install = str(ws / 'install')
    assert node.startswith(install) and msgs.startswith(install), (node, msgs)
    assert ident == '3'
    assert node_share.startswith(install) and msgs_share.startswith(install)


def test_a_pose_model_configures_and_runs_from_the_workspace(
        workspace, model_dir, engine_cache_dir, assets, tmp_path):
    """The installed demo: configure a pose model on ONNX Runtime, one frame's answer."""
    if not (model_dir / 'yolov8n-pose.pt').is_file():
        pytest.skip(f'no yolov8n-pose.pt in {model_dir}')
    ws, env = workspace
    demo = ws / 'install' / 'vision_nodes' / 'lib' / 'vision_nodes' / 'vision_nodes_demo'
    run = _bash(f'source {ws}/install/setup.bash && {demo} --task pose --backend onnx '
                f'--depth none --model-dir {model_dir} --images {assets / "bus.jpg"} '
                f'--out {tmp_path / "out"}', tmp_path,
                env | {'VISION_NODES_CACHE_DIR': str(engine_cache_dir)})
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    assert 'configuring yolov8n_pose' in run.stdout
    assert 'backend onnx, precision fp32' in run.stdout
    assert 'bus.jpg:' in run.stdout and ' person ' in run.stdout
    assert (tmp_path / 'out' / 'bus_pose.png').is_file()  # drawn from the keypoints
