"""config/vision_nodes.rviz shows what the node publishes for RViz (issue #33, item 9)."""

from __future__ import annotations

import runpy
from pathlib import Path
from unittest import mock

import yaml

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / 'config' / 'vision_nodes.rviz'


def _displays() -> dict[str, str]:
    """Each display's topic and its class."""
    manager = yaml.safe_load(CONFIG.read_text())['Visualization Manager']
    return {d['Topic']['Value']: d['Class'] for d in manager['Displays'] if 'Topic' in d}


def test_the_image_the_annotated_image_and_the_markers_are_shown():
    assert _displays() == {'/image': 'rviz_default_plugins/Image',
                           '/annotated': 'rviz_default_plugins/Image',
                           '/markers': 'rviz_default_plugins/MarkerArray'}
    manager = yaml.safe_load(CONFIG.read_text())['Visualization Manager']
    assert manager['Global Options']['Fixed Frame']


def test_its_topics_are_the_node_outputs_and_it_is_installed():
    """The names the outputs publish on, and setup.py installs the file into share/."""
    outputs = ROOT / 'vision_nodes' / 'ros' / 'outputs'
    assert "f'{namespace}markers'" in (outputs / 'detection3d_outputs.py').read_text()
    assert "f'{self._namespace}annotated'" in (outputs / 'detection_outputs.py').read_text()
    with mock.patch('setuptools.setup') as setup:
        runpy.run_path(str(ROOT / 'setup.py'), run_name='__main__')
    data = dict(setup.call_args.kwargs['data_files'])
    assert 'config/vision_nodes.rviz' in data['share/vision_nodes/config']


def test_the_docs_name_the_rviz_plugin_for_detection3d():
    text = (ROOT / 'docs' / 'tracking-3d.md').read_text()
    assert 'vision_msgs_rviz_plugins' in text and 'config/vision_nodes.rviz' in text
