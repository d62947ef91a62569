"""Names of a multi-camera node: image topics, and the namespace each camera publishes in."""

from __future__ import annotations

import pytest

pytest.importorskip('rclpy', reason='rclpy (ROS 2) is not installed')

from vision_nodes.ros.inputs.camera_names import (camera_sibling, check_names,  # noqa: E402
                                                  output_namespaces, topic_namespace)
from vision_nodes.ros.params.specs import validate  # noqa: E402


@pytest.mark.parametrize('topic,space', [
    ('/front/image_raw', '/front/'), ('/robot/front/image', '/robot/front/'),
    ('front/image_raw', 'front/'), ('/image', ''), ('image', ''), ('/front/image_raw/', '/front/'),
])
def test_topic_namespace(topic, space):
    assert topic_namespace(topic) == space


def test_each_camera_gets_its_topics_namespace_or_the_override():
    topics = ['/front/image_raw', '/rear/image_raw']
    assert output_namespaces(topics, []) == ['/front/', '/rear/']
    assert output_namespaces(topics, ['/a', '/b/']) == ['/a/', '/b/']


@pytest.mark.parametrize('topics,overrides,words', [
    (['/cam/left', '/cam/right'], [], ["'/cam/left' and '/cam/right'", "'/cam/'",
                                       'set output_namespaces']),
    (['/image'], [], ["'/image' has no namespace", 'output_namespaces']),
    (['/a/image', '/b/image'], ['/x'], ['output_namespaces has 1 entries but image_topics has 2',
                                        'one namespace per camera']),
    (['/a/image', '/b/image'], ['/x', '/x/'], ['both publish under', "'/x/'"]),
])
def test_namespaces_that_would_mix_cameras_are_refused_in_one_line(topics, overrides, words):
    with pytest.raises(ValueError) as info:
        output_namespaces(topics, overrides)
    text = str(info.value)
    assert '\n' not in text
    for word in words:
        assert word in text, text


@pytest.mark.parametrize('value,words', [
    (['/a/image', '/a/image'], ["lists '/a/image' twice"]),
    (['/a/image', ' '], ['empty entry']),
    (['/a/bad name'], ["'/a/bad name' is not a valid ROS name"]),
    (['/a/{nope}/image'], ["'/a/{nope}/image' is not a valid ROS name (unknown substitution"]),
])
def test_bad_topic_lists_are_refused_by_the_parameter_check(value, words):
    reason = validate('image_topics', value)
    assert reason is not None and '\n' not in reason
    for word in words:
        assert word in reason, reason
    assert check_names('image_topics', ['/a/image', '/b/image']) is None


def test_a_cameras_depth_topic_is_read_beside_its_image_and_one_for_all_is_refused():
    """Relative names go in the camera's namespace; on a single-camera node ('') any name is
    used as given; an absolute or private name with several cameras is one line naming the fix."""
    assert camera_sibling('/front/', 'depth_registered/image_rect', 'depth_topic') == \
        '/front/depth_registered/image_rect'
    assert camera_sibling('', '/depth', 'depth_topic') == '/depth'
    for name in ('/depth', '~/depth'):
        with pytest.raises(ValueError) as info:
            camera_sibling('/front/', name, 'depth_topic')
        text = str(info.value)
        assert '\n' not in text and f"depth_topic '{name}'" in text and 'relative name' in text
