"""The launch files' arguments as ``ros2 launch vision_nodes <file> --show-args`` prints them.

Through the real ``ros2`` CLI (the ROS 2 launch stack; the package found in an ament prefix, as
the launch tests find it): every launch file has ``use_sim_time``, ``respawn`` and
``respawn_delay`` besides its own arguments, and each argument shows the default the node really
gets (``backend`` 'auto', ``model`` the launch file's model, ``batch_window`` 5.0...) and a
description. Which arguments count as given (and so beat the parameters file) is recorded
before the declarations apply their defaults (``_note_given``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from launch_skip import NO_LAUNCH_STACK, ros2, skip_reason
from vision_nodes.ros.process.launch_arguments import (DDS_PROFILE_VARIABLE,
                                                       DEFAULT_RESPAWN_DELAY, Output,
                                                       dds_profile_environment)
from vision_nodes.ros.process.launch_description import _note_given
from vision_nodes.ros.params.specs import SPECS

pytest.importorskip('ros2launch', reason=NO_LAUNCH_STACK)
ROOT = Path(__file__).resolve().parents[2]
#: Each launch file and the model it runs by default.
MODELS = {'detect.launch.py': 'yolov8n', 'depth.launch.py': 'depth_anything_v2_small',
          'detect_depth.launch.py': 'yolov8n', 'multi_camera.launch.py': 'yolov8n'}
ARGUMENT = re.compile(r"^    '([a-z_]+)':\n((?:        .*\n)+?)        \(default: '(.*)'\)$",
                      re.MULTILINE)


def show_args(launch_file: str) -> dict[str, tuple[str, str]]:
    """Each argument of ``launch_file``: (description, default), from the real CLI."""
    reason = skip_reason()
    if reason is not None:
        pytest.skip(reason)
    run = ros2('launch', 'vision_nodes', launch_file, '--show-args')
    assert run.returncode == 0, run.stdout + run.stderr
    arguments = {name: (' '.join(text.split()), default)
                 for name, text, default in ARGUMENT.findall(run.stdout)}
    assert len(arguments) == len(re.findall(r"^    '", run.stdout, re.MULTILINE)), run.stdout
    return arguments


def test_the_launch_files_are_all_here():
    """Every launch file of the package is one of those tested below."""
    assert {p.name for p in (ROOT / 'launch').glob('*.launch.py')} == set(MODELS)


@pytest.mark.parametrize('launch_file', sorted(MODELS))
def test_show_args_gives_real_defaults_and_descriptions(launch_file):
    arguments = show_args(launch_file)
    assert arguments['use_sim_time'][1] == 'false'
    assert arguments['respawn'][1] == 'false'
    assert float(arguments['respawn_delay'][1]) == DEFAULT_RESPAWN_DELAY
    assert arguments['dds_profile'][1] == ''
    assert arguments['model'][1] == MODELS[launch_file]
    assert arguments['backend'][1] == 'auto'
    for name in ('image_transport', 'batch_window', 'max_batch'):
        assert arguments[name][1] == str(SPECS[name].default), name
    for name, (description, _) in arguments.items():
        assert len(description) > 10, (name, description)
    assert arguments['backend'][0].startswith(SPECS['backend'].description)
    assert "Not given: the parameters file's value" in arguments['use_sim_time'][0]


def test_only_arguments_set_before_the_declarations_count_as_given():
    """The command line's (and an including file's) values are given; defaults are not."""
    from launch import LaunchContext
    from launch.actions import DeclareLaunchArgument

    context = LaunchContext()
    context.launch_configurations['backend'] = 'auto'  # typed by the user: beats the file
    given: set[str] = set()
    _note_given(context, given)
    DeclareLaunchArgument('model', default_value='yolov8n').visit(context)
    assert given == {'backend'}
    assert context.launch_configurations['model'] == 'yolov8n'


def test_the_depth_outputs_move_as_one_namespace():
    """depth.launch.py's depth_namespace keeps the image and its camera_info siblings."""
    assert 'depth_namespace' in show_args('depth.launch.py')
    assert 'depth_topic' not in show_args('depth.launch.py')
    depth = Output('depth', 'depth outputs', children=('image', 'camera_info'))
    assert depth.remappings('/cam/depth/') == [
        ('depth/image', '/cam/depth/image'), ('depth/camera_info', '/cam/depth/camera_info')]


def test_the_old_depth_topic_argument_is_refused_in_one_line():
    """depth_topic:= (before: the metric image alone) is refused, naming what replaces it."""
    if skip_reason() is not None:
        pytest.skip(skip_reason())
    run = ros2('launch', 'vision_nodes', 'depth.launch.py', 'depth_topic:=/cam/depth')
    assert run.returncode != 0
    lines = [line for line in (run.stdout + run.stderr).splitlines() if 'depth_topic' in line]
    assert len(lines) == 1 and "depth_topic:='/cam/depth' is no longer an argument" in lines[0]
    assert 'give depth_namespace:=<namespace>' in lines[0]


def test_dds_profile_sets_the_node_process_fast_dds_profile(tmp_path, monkeypatch):
    """dds_profile: empty leaves the environment; large_images is the package's file (the
    installed share folder's, as the launch tests install it, else the source tree's, also
    with no ament environment at all); a path must be a readable XML file."""
    assert dds_profile_environment('') == {} and dds_profile_environment('  ') == {}
    (found,) = dds_profile_environment('large_images').values()
    assert Path(found).read_bytes() == (ROOT / 'config/fastdds_large_images.xml').read_bytes()
    monkeypatch.delenv('AMENT_PREFIX_PATH', raising=False)
    assert dds_profile_environment('large_images') == {
        DDS_PROFILE_VARIABLE: str(ROOT / 'config/fastdds_large_images.xml')}
    own = tmp_path / 'profile.xml'
    own.write_text('<profiles xmlns="http://www.eprosima.com"/>')
    assert dds_profile_environment(str(own)) == {DDS_PROFILE_VARIABLE: str(own.resolve())}
    monkeypatch.setenv('HOME', str(tmp_path))
    assert dds_profile_environment('~/profile.xml') == {DDS_PROFILE_VARIABLE: str(own.resolve())}


@pytest.mark.parametrize('case', ['missing', 'folder', 'fifo', 'not_xml', 'huge'])
def test_a_bad_dds_profile_is_refused_in_one_line(tmp_path, case):
    import os

    path = tmp_path / 'profile.xml'
    if case == 'folder':
        path.mkdir()
    elif case == 'fifo':
        os.mkfifo(path)
    elif case == 'not_xml':
        path.write_text('<profiles><participant>')
    elif case == 'huge':
        path.write_bytes(b' ' * (2 << 20))
    with pytest.raises(RuntimeError) as caught:
        dds_profile_environment(str(path))
    text = str(caught.value)
    assert '\n' not in text and text.startswith(f'dds_profile: {path}: '), text
    assert "give 'large_images', or a Fast DDS profile XML file" in text
    if case == 'not_xml':
        assert ': not XML (' in text


def test_a_bad_dds_profile_ends_the_launch_in_one_line(tmp_path):
    """Through the real ``ros2 launch``: refused before the node starts."""
    if skip_reason() is not None:
        pytest.skip(skip_reason())
    missing = tmp_path / 'nothing.xml'
    run = ros2('launch', 'vision_nodes', 'detect.launch.py', f'dds_profile:={missing}')
    assert run.returncode != 0
    lines = [line for line in (run.stdout + run.stderr).splitlines() if 'dds_profile' in line]
    assert len(lines) == 1 and f'dds_profile: {missing}: cannot read' in lines[0], lines


@pytest.mark.parametrize('rmw', ['', 'rmw_fastrtps_cpp', 'rmw_cyclonedds_cpp'])
def test_the_node_action_carries_the_profile_and_says_when_the_rmw_ignores_it(rmw, monkeypatch):
    """The LifecycleNode gets the profile in its additional environment; with another RMW the
    launch says first that the profile changes nothing."""
    from launch import LaunchContext
    from launch.actions import LogInfo
    from launch_ros.actions import LifecycleNode

    from vision_nodes.ros.process.launch_arguments import declare_arguments
    from vision_nodes.ros.process.launch_description import _node_and_lifecycle

    monkeypatch.setenv('RMW_IMPLEMENTATION', rmw)
    outputs = (Output('detections', 'Output topic'),)
    context = LaunchContext()
    context.launch_configurations['dds_profile'] = 'large_images'
    for action in declare_arguments(default_model='yolov8n', default_params_file='',
                                    task='detect', outputs=outputs):
        action.visit(context)
    actions = _node_and_lifecycle(context, {'dds_profile'}, outputs, 'yolov8n', None)
    (node,) = [a for a in actions if isinstance(a, LifecycleNode)]
    ((name, value),) = node.additional_env
    assert ''.join(p.perform(context) for p in name) == DDS_PROFILE_VARIABLE
    assert ''.join(p.perform(context) for p in value).endswith('fastdds_large_images.xml')
    said = [''.join(p.perform(context) for p in a.msg) for a in actions
            if isinstance(a, LogInfo)]
    if rmw == 'rmw_cyclonedds_cpp':
        assert isinstance(actions[0], LogInfo)
        assert 'RMW_IMPLEMENTATION is rmw_cyclonedds_cpp' in said[0]
        assert 'the profile changes nothing' in said[0]
    else:
        assert not any('RMW_IMPLEMENTATION' in text for text in said)
