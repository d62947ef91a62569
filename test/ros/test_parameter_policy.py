"""The node's parameter policy in-process (no model loaded): manifest defaults and the user.

A manifest's ``thresholds`` are the defaults of its model's parameters; a value the user gave
(start-up override, ``ros2 param set``) is kept when the manifests change; one rule says when
a change may apply, for the node's parameters and the tasks' alike.
"""

from __future__ import annotations

import pytest

rclpy = pytest.importorskip('rclpy', reason='rclpy (ROS 2) is not installed')
pytest.importorskip('vision_msgs.msg', reason='vision_msgs is not built (scripts/setup_env.sh)')

from rclpy.parameter import Parameter  # noqa: E402

from node_harness import manifest_copy, own_context  # noqa: E402
from vision_nodes.ros.node import VisionNode  # noqa: E402
from vision_nodes.ros.params.specs import SPECS  # noqa: E402
from vision_nodes.ros.params.policy import output_switches, when_refused  # noqa: E402
from vision_nodes.tasks import param_defaults, resolve_manifest, task_class  # noqa: E402


@pytest.fixture
def context():
    with own_context() as ctx:
        yield ctx


@pytest.fixture
def manifests(tmp_path):
    return {'strict': manifest_copy(tmp_path, 'strict', thresholds={'confidence': 0.6}),
            'high': manifest_copy(tmp_path, 'high', thresholds={'confidence': 0.88,
                                                                'max_detections': 7}),
            'plain': manifest_copy(tmp_path, 'plain')}


def _values(node, *names):
    return {name: node.get_parameter(name).value for name in names}


def test_task_defaults_read_the_manifest_thresholds(manifests):
    defaults = param_defaults(resolve_manifest(manifests['high']))
    thresholds = ('confidence_threshold', 'iou_threshold', 'max_detections')
    assert {name: defaults[name] for name in thresholds} == {
        'confidence_threshold': 0.88, 'iou_threshold': 0.45, 'max_detections': 7}
    assert {name: value for name, value in defaults.items() if name not in thresholds} == {
        spec.name: spec.default for spec in task_class('detect').params
        if spec.name not in thresholds}
    assert param_defaults(resolve_manifest('depth_anything_v2_small')) == {
        spec.name: spec.default for spec in task_class('depth').params}


def test_manifest_defaults_follow_the_model_and_the_users_values_stay(context, manifests):
    """Declared at start-up with the manifest's values; a new model's manifest gives its own
    defaults; a value the user set survives the change of model."""
    node = VisionNode('policy', context=context,
                      parameter_overrides=[Parameter('model', value=manifests['strict'])])
    try:
        policy = node.parameters
        assert _values(node, 'confidence_threshold') == {'confidence_threshold': 0.6}
        assert policy.model('', 'detect').current.confidence == 0.6
        assert node.set_parameters([Parameter('model', value=manifests['high'])])[0].successful
        policy.declare_models(policy.manifests())
        assert _values(node, 'confidence_threshold', 'max_detections') == {
            'confidence_threshold': 0.88, 'max_detections': 7}
        assert policy.model('', 'detect').current.confidence == 0.88
        assert node.set_parameters([Parameter('max_detections', value=20)])[0].successful
        assert node.set_parameters([Parameter('model', value=manifests['plain'])])[0].successful
        policy.declare_models(policy.manifests())
        assert _values(node, 'confidence_threshold', 'max_detections') == {
            'confidence_threshold': 0.25, 'max_detections': 20}
    finally:
        node.destroy_node()


def test_start_up_value_wins_over_the_manifest(context, manifests):
    node = VisionNode('policy_set', context=context, parameter_overrides=[
        Parameter('model', value=manifests['strict']),
        Parameter('confidence_threshold', value=0.3)])
    try:
        assert _values(node, 'confidence_threshold') == {'confidence_threshold': 0.3}
        node.set_parameters([Parameter('model', value=manifests['high'])])
        node.parameters.declare_models(node.parameters.manifests())
        assert _values(node, 'confidence_threshold', 'max_detections') == {
            'confidence_threshold': 0.3, 'max_detections': 7}
        assert node.parameters.model('', 'detect').current.confidence == 0.3
    finally:
        node.destroy_node()


def test_outputs_declare_their_own_ros_switches():
    """publish_camera_info is the depth outputs' switch, 3D, markers and annotated the
    detection outputs' (segment and pose inherit them), not settings of the ROS-free tasks;
    the typed switches have the specs' defaults."""
    from dataclasses import asdict

    from vision_nodes.ros.outputs.detection_switches import DetectionSwitches
    from vision_nodes.tasks.depth import DepthTask

    assert [s.name for s in output_switches('depth')] == ['publish_camera_info']
    assert 'publish_camera_info' not in {s.name for s in DepthTask.params}
    switches = ['depth_source', 'depth_topic', 'depth_slop', 'publish_markers',
                'publish_annotated']
    for task in ('detect', 'segment', 'pose'):
        assert [s.name for s in output_switches(task)] == switches
        assert not set(switches) & {s.name for s in task_class(task).params}
    assert asdict(DetectionSwitches()) == {s.name: s.default for s in output_switches('detect')}
    assert DetectionSwitches.of({'depth_slop': 0.2, 'confidence_threshold': 0.5}) == \
        DetectionSwitches(depth_slop=0.2)


def test_several_models_prefix_the_outputs_switches(context, manifests):
    """With two models each declares its switches under its name; a set reaches that model's
    switch values only (what its outputs get at activate and on a live change)."""
    node = VisionNode('policy_switches', context=context, parameter_overrides=[
        Parameter('models', value=[manifests['strict'], manifests['plain']]),
        Parameter('strict.depth_slop', value=0.3)])
    try:
        policy = node.parameters
        assert not node.has_parameter('depth_slop')
        assert _values(node, 'strict.depth_slop', 'plain.depth_slop') == {
            'strict.depth_slop': 0.3, 'plain.depth_slop': 0.05}
        told = []
        policy.model('plain', 'detect').switch_listener = told.append
        assert node.set_parameters([Parameter('plain.depth_slop', value=0.5)])[0].successful
        assert node.set_parameters([Parameter('plain.confidence_threshold', value=0.5)])[0] \
            .successful
        assert [t['depth_slop'] for t in told] == [0.5]
        assert policy.model('strict', 'detect').switches['depth_slop'] == 0.3
        refused = node.set_parameters([Parameter('plain.depth_slop', value=11.0)])[0]
        assert not refused.successful and 'plain.depth_slop out of range' in refused.reason
    finally:
        node.destroy_node()


def test_one_rule_says_when_a_change_applies():
    """The node's image_transport and a depth model's publish_camera_info both apply at
    activate: refused while active with the same steps, taken while inactive."""
    camera_info = next(s for s in output_switches('depth') if s.name == 'publish_camera_info')
    for spec, name in ((SPECS['image_transport'], 'image_transport'),
                       (camera_info, 'depth.publish_camera_info')):
        refused = when_refused(spec, name, 'active', '/vn')
        assert refused.startswith(f'{name} applies when the node activates: run '
                                  '`ros2 lifecycle set /vn deactivate`'), refused
        assert when_refused(spec, name, 'inactive', '/vn') is None
    locked = when_refused(SPECS['backend'], 'backend', 'inactive', '/vn')
    assert locked.startswith("backend is locked while the node is configured (state "
                             "'inactive')"), locked


def test_a_huge_tracker_setting_is_refused_at_start_up_and_when_set(context, tmp_path):
    """#37 finding 1: a track_buffer of 10**29 raised TypeError inside the check, which ended
    the process at start-up and in the parameter service; it is one refusal line in both."""
    path = tmp_path / 'huge.yaml'
    path.write_text(f'track_buffer: {10 ** 29}\n')
    # The value may be clipped: the line is bounded, and the file's path takes its share.
    rule = 'track_buffer must be an integer in [1, 3600], got 1000000000'
    node = VisionNode('policy_tracker', context=context, parameter_overrides=[
        Parameter('tracker', value='bytetrack'), Parameter('tracker_config', value=str(path))])
    try:
        error = node.parameters.errors['tracker_config']
        assert rule in error and '\n' not in error, error
        assert node.get_parameter('tracker_config').value == ''
        result = node.set_parameters([Parameter('tracker_config', value=str(path))])[0]
        assert not result.successful and rule in result.reason, result.reason
    finally:
        node.destroy_node()
