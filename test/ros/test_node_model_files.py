"""Hostile model folders through a real node: configure fails in one line, the node stays up.

A node process (rclpy, DDS) is configured in turn with model folders whose ``config.json`` is
a FIFO, a link to ``/dev/zero``, a config naming a backbone to download, and one describing a
model far larger than its weights; the Hub is not set offline in its environment. Each
configure fails at once with one log line saying what is wrong, the node answers
``get_state`` after each, its memory does not grow, and a good model configures after them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

rclpy = pytest.importorskip('rclpy', reason='rclpy (ROS 2) is not installed')
pytest.importorskip('vision_msgs.msg', reason='vision_msgs is not built (scripts/setup_env.sh)')
pytest.importorskip('transformers', reason='transformers is not installed')

from depth_weights import depth_anything_folder, shared_folder, tiny_manifest  # noqa: E402
from hostile_files import SPECIAL_FILES, model_folder, replace_file  # noqa: E402
from node_harness import Harness  # noqa: E402

#: Most a failed configure may add to the node's resident memory.
MAX_RSS_GROWTH_MB = 200


def _rss_mb(pid: int) -> float:
    for line in Path(f'/proc/{pid}/status').read_text().splitlines():
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) / 1024
    raise AssertionError('no VmRSS')


@pytest.fixture(scope='module')
def manifests(tmp_path_factory) -> dict[str, str]:
    tiny = depth_anything_folder(shared_folder(tmp_path_factory) / 'da_tiny_relative')
    root = tmp_path_factory.mktemp('hostile_node_models')
    config = json.loads((tiny / 'config.json').read_text())
    folders = {
        'good': model_folder(root / 'good', tiny),
        'fifo': model_folder(root / 'fifo', tiny),
        'dev_zero': model_folder(root / 'dev_zero', tiny),
        'backbone': model_folder(root / 'backbone', tiny, {
            **{k: v for k, v in config.items() if k != 'backbone_config'},
            'backbone': 'facebook/dinov2-small'}),
        'huge': model_folder(root / 'huge', tiny, {**config, 'backbone_config': {
            **config['backbone_config'], 'hidden_size': 24576}}),
    }
    for name in ('fifo', 'dev_zero'):
        replace_file(folders[name] / 'config.json', SPECIAL_FILES[name])
    return {name: tiny_manifest(folder, root / f'{name}.yaml', f'da_{name}', 'relative')
            for name, folder in folders.items()}


def _configure_fails(h: Harness, model: str, reason: str) -> None:
    """Configure with ``model`` fails; its log line is one line holding ``reason``."""
    c = h.client
    assert all(r.successful for r in c.set_parameters(model=model))
    assert not c.change_state('configure', timeout=120)
    assert h.node.wait_for_output(reason, 30.0), h.node.output()[-3000:]
    lines = [line for line in h.node.output().splitlines() if reason in line]
    assert len(lines) == 1 and 'configure failed: ' in lines[0], lines
    assert c.get_state() == 'unconfigured'


def test_hostile_model_folders_fail_configure_and_the_node_stays_up(
        manifests, engine_cache_dir):
    h = Harness({'engine_cache_dir': str(engine_cache_dir), 'backend': 'cpu',
                 'model': manifests['good']}, 'vn_hostile_files',
                env={'HF_HUB_OFFLINE': '0', 'TRANSFORMERS_OFFLINE': '0'})
    try:
        c = h.client
        # A good model first: the libraries are loaded, so what follows measures only the
        # hostile folders.
        assert c.change_state('configure', timeout=600) and c.change_state('cleanup')
        baseline = _rss_mb(h.node.process.pid)
        _configure_fails(h, manifests['fifo'], 'config.json must be a regular file; this is a '
                         'FIFO')
        _configure_fails(h, manifests['dev_zero'], 'config.json must be a regular file; this '
                         'is a character device')
        _configure_fails(h, manifests['backbone'], "`backbone` is 'facebook/dinov2-small', "
                         'which transformers would fetch from the network')
        _configure_fails(h, manifests['huge'], 'parameters; at most')
        assert _rss_mb(h.node.process.pid) - baseline < MAX_RSS_GROWTH_MB
        assert all(r.successful for r in c.set_parameters(model=manifests['good']))
        assert c.change_state('configure', timeout=600)
        assert c.get_state() == 'inactive'
        assert h.node.alive()
    finally:
        h.close()
    assert 'Traceback' not in h.node.output()
