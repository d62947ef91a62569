"""The ROS 2 launch stack in the venv, and the venv as an ament prefix (issue #33, item 6).

scripts/setup_env.sh installs launch, launch_ros, launch_testing, ros2cli and
composition_interfaces from ``../shared/ros2-launch-stack`` when that folder is beside the
checkout (scripts/install_launch_stack.sh), and links the editable package into the venv's
ament index (scripts/ament_prefix.py), so that the launch tests and ``ros2 launch`` run in CI.
Without the folder every launch_testing file skips, saying where the stack comes from.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
STACK = ROOT.parent / 'shared' / 'ros2-launch-stack'
VENV = Path(os.environ.get('VISION_NODES_VENV', ROOT / '.venv')).resolve()
sys.path.insert(0, str(ROOT / 'scripts'))
import ament_prefix  # noqa: E402

sys.path.insert(0, str(ROOT / 'test'))
from launch_skip import NO_LAUNCH_STACK  # noqa: E402

#: Makes the launch stack unimportable, then runs pytest on the arguments (its plugins off).
WITHOUT_THE_STACK = '''
import sys
class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in {'launch', 'launch_ros', 'launch_testing', 'launch_testing_ros'}:
            raise ModuleNotFoundError(name)
sys.meta_path.insert(0, Hide())
import pytest
sys.exit(pytest.main(['-p', 'no:launch_testing', '-p', 'no:launch_ros', '-p', 'no:cacheprovider',
                      '-q', '-rs', *sys.argv[1:]]))
'''


def _in_the_setup_venv() -> None:
    if Path(sys.prefix).resolve() != VENV:
        pytest.skip(f'not running in the venv scripts/setup_env.sh makes ({VENV})')


def _needs_the_stack_folder() -> None:
    if not STACK.is_dir():
        pytest.skip(f'no {STACK}: set-up does not install the launch stack without it')


def test_the_stack_is_installed_where_its_folder_is():
    """With the folder beside the checkout, set-up made every piece of the stack importable."""
    _needs_the_stack_folder()
    _in_the_setup_venv()
    import composition_interfaces.srv  # noqa: F401 - launch_ros imports it at once
    import launch_ros.actions  # noqa: F401
    import launch_testing.actions  # noqa: F401
    import ros2launch  # noqa: F401
    import ros2lifecycle  # noqa: F401
    import ros2param  # noqa: F401

    assert (VENV / 'bin' / 'ros2').is_file() and (VENV / 'bin' / 'launch_test').is_file()


def test_a_second_install_changes_nothing():
    """The stack's stamp makes a re-run a no-op (set-up stays fast)."""
    _needs_the_stack_folder()
    _in_the_setup_venv()
    run = subprocess.run([str(ROOT / 'scripts' / 'install_launch_stack.sh'), str(VENV),
                          str(STACK)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == f'launch stack: up to date in {VENV}'


def test_the_venv_is_an_ament_prefix_of_the_checkout(monkeypatch):
    """vision_nodes is found in the venv's index; its executable and launch files are there."""
    _in_the_setup_venv()
    from ament_index_python.packages import get_package_prefix, get_package_share_directory

    monkeypatch.setenv('AMENT_PREFIX_PATH', str(VENV))
    assert Path(get_package_prefix('vision_nodes')).resolve() == VENV
    assert os.access(VENV / 'lib' / 'vision_nodes' / 'vision_node', os.X_OK)
    share = Path(get_package_share_directory('vision_nodes'))
    for launch_file in (ROOT / 'launch').glob('*.launch.py'):
        assert (share / 'launch' / launch_file.name).resolve() == launch_file


def test_ament_prefix_links_each_data_file_and_executable(tmp_path):
    """Every data file of setup.py and console script is linked; stale links go, others stay."""
    venv = tmp_path / 'venv'
    assert ament_prefix.link(venv) > 0
    assert (venv / 'share' / 'vision_nodes' / 'package.xml').resolve() == ROOT / 'package.xml'
    assert (venv / 'share' / 'ament_index' / 'resource_index' / 'packages' / 'vision_nodes'
            ).resolve() == ROOT / 'resource' / 'vision_nodes'
    assert (venv / 'share' / 'vision_nodes' / 'config' / 'models' / 'yolov8n.yaml').is_file()
    assert os.readlink(venv / 'lib' / 'vision_nodes' / 'vision_node') == \
        str(venv / 'bin' / 'vision_node')
    assert ament_prefix.link(venv) == 0  # nothing to do the second time
    launch = venv / 'share' / 'vision_nodes' / 'launch'
    (launch / 'gone.launch.py').symlink_to(ROOT / 'launch' / 'gone.launch.py')
    (launch / 'users_own.launch.py').write_text('')
    assert ament_prefix.link(venv) == 1
    assert not (launch / 'gone.launch.py').is_symlink()
    assert (launch / 'users_own.launch.py').is_file()


def test_without_the_stack_every_launch_test_skips_naming_the_folder():
    """A user's clone (no ../shared/ros2-launch-stack): skips, each saying where it comes from."""
    files = sorted(str(p) for p in (ROOT / 'test' / 'launch').glob('test_*.py')
                   if 'launch_testing' in p.read_text())
    run = subprocess.run([sys.executable, '-c', WITHOUT_THE_STACK, *files], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 5, run.stdout[-3000:]  # 5: every file skipped, no test ran
    skipped = re.findall(r'^SKIPPED \[(\d+)\] [^:]+:\d+: (.*)$', run.stdout, re.MULTILINE)
    assert skipped and {reason for _, reason in skipped} == {NO_LAUNCH_STACK}, run.stdout
    assert sum(int(count) for count, _ in skipped) == len(files)
    assert '../shared/ros2-launch-stack' in NO_LAUNCH_STACK
