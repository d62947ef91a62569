"""A node that cannot start with its arguments says why in one line and exits with code 2.

Each case starts ``python -m vision_nodes.ros.node --ros-args ...`` (as ``ros2 run`` and
launch do) with one argument rcl, rmw or the node's own parameters-file check refuses, and
asserts: exit code 2, exactly one line of output, on stderr, ``vision_node: '<argument>':
<what is wrong>; <rule>``, no traceback, and a parameters file that is a FIFO or a device never
read. A good start still runs and stops with code 0 on SIGINT and SIGTERM.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

from vision_nodes.limits import MAX_PARAMS_FILE_BYTES
from vision_nodes.ros.process.launch_arguments import OVERRIDABLE
from vision_nodes.ros.process.launch_description import node_parameters
from vision_nodes.tools.client import NodeProcess, VisionNodeClient

#: A process that refuses its arguments exits long before this.
DEADLINE_S = 60.0


def _file(name: str, text: str) -> Callable[[Path], str]:
    def make(folder: Path) -> str:
        path = folder / name
        path.write_text(text)
        return str(path)
    return make


def _bytes(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


def _fifo(folder: Path) -> str:
    path = folder / 'params.fifo'
    os.mkfifo(path)
    return str(path)


def _too_large(folder: Path) -> str:
    path = folder / 'large.yaml'
    path.write_text('/**:\n  ros__parameters:\n    a: 1\n' + '#' * MAX_PARAMS_FILE_BYTES)
    return str(path)


#: id: (parameters file maker or None, the ROS arguments with {file} for its path, the
#: argument the line must name, a piece of what it must say is wrong).
CASES = {
    'params_not_yaml': (_file('broken.yaml', 'a: [1, 2\n'), ['--params-file', '{file}'],
                        '--params-file {file}', 'not valid YAML'),
    'params_missing': (lambda folder: str(folder / 'missing.yaml'),
                       ['--params-file', '{file}'], '--params-file {file}',
                       'cannot read the parameters file'),
    'params_not_text': (lambda folder: _bytes(folder / 'latin1.yaml', b'a: "\xff"\n'),
                        ['--params-file', '{file}'], '--params-file {file}', 'not text'),
    'params_not_ros': (_file('plain.yaml', 'just: a mapping\n'), ['--params-file', '{file}'],
                       '--params-file {file}', 'not a ROS 2 parameters file'),
    'params_scalar': (_file('scalar.yaml', 'hello\n'), ['--params-file', '{file}'],
                      '--params-file {file}', 'its top level is a single value'),
    'params_fifo': (_fifo, ['--params-file', '{file}'], '--params-file {file}', 'a FIFO'),
    'params_dev_zero': (None, ['--params-file', '/dev/zero'], '--params-file /dev/zero',
                        'a character device'),
    'params_directory': (lambda folder: str(folder), ['--params-file', '{file}'],
                         '--params-file {file}', 'a folder'),
    'params_too_large': (_too_large, ['--params-file', '{file}'], '--params-file {file}',
                         f'at most {MAX_PARAMS_FILE_BYTES} are accepted'),
    'remap_to_slash': (None, ['-r', 'image:=/'], '-r image:=/', 'forward slash'),
    'remap_with_space': (None, ['-r', 'image:=bad name'], '-r image:=bad name',
                         'must not contain characters'),
    'remap_bad_namespace': (None, ['-r', '__ns:=/bad-ns!'], '-r __ns:=/bad-ns!',
                            'namespace must not contain'),
    'remap_bad_node_name': (None, ['-r', '__node:=bad-name'], '-r __node:=bad-name',
                            'node name must not contain'),
    'remap_without_value': (None, ['-r'], '-r', 'no value follows it'),
    'override_bad_yaml': (None, ['-p', 'model:=[1,2'], '-p model:=[1,2', 'not valid YAML'),
    'override_without_assignment': (None, ['-p', 'model'], '-p model', "no ':='"),
    'unknown_flag': (None, ['--bogus'], '--bogus', 'unknown ROS argument'),
    'bad_log_level': (None, ['--log-level', 'loud'], '--log-level loud',
                      'not a valid log level'),
    # One character past the longest full name (service names must fit rmw's limit) ...
    'namespace_too_long': (None, ['-r', '__ns:=/' + 'a' * 209], '-r __ns:=/' + 'a' * 209,
                           'too long'),
    # ... and past rmw's own node-name limit.
    'node_name_too_long': (None, ['-r', '__node:=' + 'n' * 300], '-r __node:=' + 'n' * 300,
                           'too long'),
}


def _run(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-m', module, *args], capture_output=True,
                          text=True, timeout=DEADLINE_S, env=os.environ.copy())


def _the_line(result: subprocess.CompletedProcess, prog: str, argument: str) -> str:
    """Assert one line on stderr, nothing on stdout, exit code 2; return the line."""
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert 'Traceback' not in output, output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.stdout.strip() == '' and len(lines) == 1, output
    # The argument as given, cut where a long one is clipped.
    assert lines[0].startswith(f"{prog}: '{argument[:60]}"), lines[0]
    return lines[0]


@pytest.mark.parametrize('case', CASES, ids=list(CASES))
def test_refused_argument_is_one_line_and_exit_code_2(case, tmp_path):
    make, args, argument, problem = CASES[case]
    path = make(tmp_path) if make else ''
    result = _run('vision_nodes.ros.node', '--ros-args',
                  *(arg.format(file=path) for arg in args))
    line = _the_line(result, 'vision_node', argument.format(file=path))
    assert problem in line, line
    assert len(line) < 600, line


def test_name_length_limit_is_the_one_the_message_gives():
    """The longest full node name the message allows (221 characters) starts and answers."""
    namespace = '/' + 'a' * 208
    assert len(f'{namespace}/vision_node') == 221
    result = _run('vision_nodes.ros.node', '--ros-args', '-r', f'__ns:={namespace}a')
    assert 'at most 221 characters' in _the_line(result, 'vision_node', f'-r __ns:={namespace}')
    node = NodeProcess({}, namespace=namespace)
    client = VisionNodeClient(f'{namespace}/vision_node', 'startup_limit_client')
    try:
        client.wait_for_node(30.0)
        assert node.alive(), node.output()
    finally:
        client.close()
        code = node.stop()
    assert code == 0, node.output()


@pytest.mark.parametrize('sig', [signal.SIGINT, signal.SIGTERM], ids=['SIGINT', 'SIGTERM'])
def test_good_start_runs_and_stops_with_code_0(sig):
    """A normal start answers its lifecycle services; a signal ends it with code 0.

    With ``--log-level debug`` rcl prints its own lines while the node is created: they are
    held during the start and passed on once it succeeds.
    """
    name = f'startup_ok_{sig.name.lower()}'
    node = NodeProcess({}, node_name=name, log_level='debug')
    client = VisionNodeClient(f'/{name}', f'{name}_client')
    try:
        client.wait_for_node(30.0)
        assert client.get_state() == 'unconfigured'
        assert node.alive(), node.output()
    finally:
        client.close()
        code = node.stop(sig)
    output = node.output()
    assert code == 0, output
    assert 'Traceback' not in output and 'vision_node:' not in output, output
    assert '[rcl]: Initializing node' in output, output[-2000:]


def test_image_publisher_refuses_the_same_way(tmp_path):
    """The camera tool starts ROS through the same helper."""
    import cv2
    import numpy as np

    image = tmp_path / 'frame.png'
    assert cv2.imwrite(str(image), np.zeros((8, 8, 3), np.uint8))
    result = _run('vision_nodes.tools.image_publisher', str(image), '--seconds', '1',
                  '--ros-args', '-r', 'image:=/')
    assert 'forward slash' in _the_line(result, 'image_publisher', '-r image:=/')


def test_launch_checks_the_parameters_file_the_same_way(tmp_path):
    """The launch files refuse a parameters file the node would refuse, before starting it."""
    with pytest.raises(RuntimeError, match=r"params_file '.*params\.fifo': the parameters file "
                                           r'must be a regular file; this is a FIFO'):
        node_parameters('yolov8n', _fifo(tmp_path), {name: '' for name in OVERRIDABLE})
