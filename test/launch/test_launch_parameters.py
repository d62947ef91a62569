"""Which value wins when a launch file, a parameters file and launch arguments all set one.

:func:`vision_nodes.ros.process.launch_description.node_parameters` builds the node's
parameters: the user's file (one ``--params-file``) and a dict of overrides, which the launch
passes as ``-p`` rules
(:func:`~vision_nodes.ros.process.launch_description.override_arguments`), so no file is
written. These tests need neither ``launch`` nor ``launch_ros``: they hand the entries
to a real ``VisionNode`` the same way and read back the values rclpy gives it, for a
parameters file keyed ``/**`` (as config/detect.yaml) and one keyed by the node's name.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import rclpy
import yaml

from vision_nodes.ros.process.launch_arguments import DEFAULT_BACKEND, OVERRIDABLE
from vision_nodes.ros.process.launch_description import node_parameters, override_arguments
from vision_nodes.ros.node import VisionNode

NO_ARGUMENTS = {name: '' for name in OVERRIDABLE}
NODE = 'launch_parameters_probe'


def _effective(entries: list, tmp_path: Path) -> dict[str, object]:
    """Start a VisionNode with ``entries`` as launch_ros passes them; return its parameters."""
    args = ['--ros-args']
    for entry in entries:  # as the launch passes them: files, then -p rules
        args += override_arguments(entry) if isinstance(entry, dict) else ['--params-file', entry]
    context = rclpy.Context()
    rclpy.init(args=args, context=context)
    try:
        node = VisionNode(NODE, context=context)
        try:
            # confidence_threshold belongs to a detection model's task: declared when the
            # model is one (yolov8n), absent for another task.
            return {name: node.get_parameter_or(name).value
                    for name in (*OVERRIDABLE, 'confidence_threshold')
                    if node.has_parameter(name)}
        finally:
            node.destroy_node()
    finally:
        rclpy.shutdown(context=context)


@pytest.fixture(params=['/**', f'/{NODE}'])
def params_file(request, tmp_path: Path) -> str:
    """A user's parameters file that sets backend, model_dir and a threshold, not model."""
    path = tmp_path / 'my_params.yaml'
    path.write_text(yaml.safe_dump({request.param: {'ros__parameters': {
        'backend': 'cpu', 'model_dir': '/from/file', 'confidence_threshold': 0.6}}}))
    return str(path)


def test_launch_defaults_apply_without_file_or_arguments(tmp_path):
    values = _effective(node_parameters('depth_model', '', NO_ARGUMENTS), tmp_path)
    assert values['model'] == 'depth_model'
    assert values['backend'] == DEFAULT_BACKEND


def test_no_parameters_file_is_written(tmp_path, params_file):
    """The only file the node is given is the user's: defaults and arguments are -p rules."""
    arguments = dict(NO_ARGUMENTS, models='[a, b]', model_dir='/x')
    entries = node_parameters('depth_model', params_file, arguments, ['c'], node=f'/{NODE}')
    assert [e for e in entries if not isinstance(e, dict)] == [params_file]
    assert entries[-1] == {'model': 'depth_model', 'models': ['a', 'b'], 'model_dir': '/x'}


def test_file_for_another_node_leaves_the_launch_defaults(tmp_path):
    path = tmp_path / 'other.yaml'
    path.write_text(yaml.safe_dump({'/other_node': {'ros__parameters': {'backend': 'cpu'}}}))
    values = _effective(node_parameters('depth_model', str(path), NO_ARGUMENTS,
                                        node=f'/{NODE}'), tmp_path)
    assert values['backend'] == DEFAULT_BACKEND and values['model'] == 'depth_model'


def test_string_arguments_stay_strings(tmp_path):
    """A value YAML would read as a number or boolean reaches the node as the string given."""
    assert override_arguments({'model_dir': '1', 'model': 'true', 'models': ['a']}) == [
        '-p', 'model_dir:="1"', '-p', 'model:="true"', '-p', 'models:=["a"]']
    values = _effective(node_parameters('yolov8n', '', dict(NO_ARGUMENTS, model_dir='1')),
                        tmp_path)
    assert values['model_dir'] == '1'


def test_parameters_file_beats_launch_defaults(tmp_path, params_file):
    values = _effective(node_parameters('yolov8n', params_file, NO_ARGUMENTS), tmp_path)
    assert values['backend'] == 'cpu'  # not the launch file's 'onnx'
    assert values['model'] == 'yolov8n'  # the file does not set it: the launch default
    assert values['model_dir'] == '/from/file'
    assert values['confidence_threshold'] == pytest.approx(0.6)


def test_given_arguments_beat_parameters_file(tmp_path, params_file):
    arguments = dict(NO_ARGUMENTS, backend='onnx', model_dir='/from/argument')
    values = _effective(node_parameters('yolov8n', params_file, arguments), tmp_path)
    assert values['backend'] == 'onnx'
    assert values['model_dir'] == '/from/argument'
    assert values['engine_cache_dir'] == ''  # empty argument: not passed at all
    assert values['confidence_threshold'] == pytest.approx(0.6)


def test_missing_parameters_file_is_an_error_naming_it(tmp_path):
    missing = str(tmp_path / 'nope.yaml')
    with pytest.raises(RuntimeError, match='nope.yaml'):
        node_parameters('yolov8n', missing, NO_ARGUMENTS)


def test_launch_arguments_describe_the_parameters_they_set():
    """One source: an argument's description and choices are its node parameter's spec."""
    from vision_nodes.ros.process.launch_arguments import _from_spec
    from vision_nodes.ros.params.specs import SPECS

    for name in OVERRIDABLE:
        kwargs = _from_spec(name, SPECS[name].default)
        assert kwargs['description'].startswith(SPECS[name].description), name
        assert kwargs.get('choices', [''])[1:] == [c for c in SPECS[name].choices if c], name
        default = SPECS[name].default
        assert kwargs['default_value'] == (','.join(default) if isinstance(default, list)
                                           else str(default)), name


def test_use_sim_time_reaches_the_node_as_a_boolean(tmp_path, params_file):
    """use_sim_time:=true given beats the file; a word that is not true/false is one line."""
    arguments = dict(NO_ARGUMENTS, use_sim_time='true')
    entries = node_parameters('yolov8n', params_file, arguments)
    assert entries[-1]['use_sim_time'] is True
    assert override_arguments({'use_sim_time': True}) == ['-p', 'use_sim_time:=true']
    with pytest.raises(RuntimeError, match=r"^use_sim_time:='yes' is not true or false$"):
        node_parameters('yolov8n', '', dict(NO_ARGUMENTS, use_sim_time='yes'))


def test_camera_arguments_reach_the_node_typed(tmp_path):
    """image_topics/output_namespaces are lists (``a,b`` or ``[a, b]``), batch_window a
    number and max_batch an integer; a word where a number goes is one clear error."""
    arguments = dict(NO_ARGUMENTS, image_topics='/front/image_raw,/rear/image_raw',
                     output_namespaces='[/f, /r]', batch_window='2', max_batch='3')
    values = _effective(node_parameters('yolov8n', '', arguments), tmp_path)
    assert list(values['image_topics']) == ['/front/image_raw', '/rear/image_raw']
    assert list(values['output_namespaces']) == ['/f', '/r']
    assert values['batch_window'] == 2.0 and values['max_batch'] == 3
    with pytest.raises(RuntimeError, match=r"max_batch:='two' is not an integer"):
        node_parameters('yolov8n', '', dict(NO_ARGUMENTS, max_batch='two'))
