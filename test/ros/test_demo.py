"""The demo end to end (``python -m vision_nodes.tools.demo``), with a depth model beside it.

A real node process, real DDS; the depth model is a tiny Depth Anything with random weights
(``depth_weights.py``), so the picture it writes says nothing about depth, only that the
demo runs both models in one node and writes the colourised depth beside the detections.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import cv2
import pytest

pytest.importorskip('rclpy', reason='rclpy (ROS 2) is not installed')
pytest.importorskip('transformers', reason='transformers is not installed (depth model)')

from depth_weights import depth_anything_folder, shared_folder, tiny_manifest  # noqa: E402


def test_demo_writes_detections_and_depth_beside_them(model_dir, engine_cache_dir, assets,
                                                      tmp_path, tmp_path_factory):
    weights = depth_anything_folder(shared_folder(tmp_path_factory) / 'da_tiny_metric',
                                    metric=True, max_depth=20)
    manifest = tiny_manifest(weights, tmp_path / 'da_demo.yaml', 'da_demo')
    out = tmp_path / 'out'
    run = subprocess.run(
        [sys.executable, '-m', 'vision_nodes.tools.demo', '--backend', 'onnx',
         '--images', str(assets / 'bus.jpg'), '--out', str(out), '--depth', str(manifest)],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, 'VISION_NODES_MODEL_DIR': str(model_dir),
             'VISION_NODES_CACHE_DIR': str(engine_cache_dir)})
    assert run.returncode == 0, run.stdout + run.stderr
    assert 'backend onnx, precision fp32' in run.stdout
    assert 'bus.jpg:' in run.stdout and ' bus ' in run.stdout
    detections = cv2.imread(str(out / 'bus_detections.png'))
    both = cv2.imread(str(out / 'bus_detections_depth.png'))
    assert detections is not None and both is not None
    assert both.shape == (detections.shape[0], 2 * detections.shape[1], 3)
    assert (both[:, :detections.shape[1]] == detections).all()
    assert Path(out / 'vision_node.log').is_file()


def test_demo_without_depth_weights_skips_depth_and_says_why(model_dir, engine_cache_dir,
                                                             assets, tmp_path):
    if (model_dir / 'depth_anything_v2_small').exists():
        pytest.skip('the default depth model has weights here: the demo runs it')
    run = subprocess.run(
        [sys.executable, '-m', 'vision_nodes.tools.demo', '--backend', 'onnx',
         '--images', str(assets / 'zidane.jpg'), '--out', str(tmp_path)],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, 'VISION_NODES_MODEL_DIR': str(model_dir),
             'VISION_NODES_CACHE_DIR': str(engine_cache_dir)})
    assert run.returncode == 0, run.stdout + run.stderr
    assert 'depth: skipped (depth_anything_v2_small weights not found' in run.stdout
    assert 'zidane.jpg:' in run.stdout and 'person' in run.stdout
    assert not list(tmp_path.glob('*_depth.png'))


def test_demo_track_shows_the_same_ids_on_the_same_scene(model_dir, engine_cache_dir, assets,
                                                         tmp_path):
    """--track: one camera (one frame_id), so the same scene twice keeps its track ids."""
    run = subprocess.run(
        [sys.executable, '-m', 'vision_nodes.tools.demo', '--backend', 'onnx', '--depth',
         'none', '--track', '--images', str(assets / 'bus.jpg'), str(assets / 'bus.jpg'),
         '--out', str(tmp_path)],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, 'VISION_NODES_MODEL_DIR': str(model_dir),
             'VISION_NODES_CACHE_DIR': str(engine_cache_dir)})
    assert run.returncode == 0, run.stdout + run.stderr
    assert 'tracking (bytetrack): the images are frames of one camera' in run.stdout
    frames = run.stdout.split('bus.jpg: ')[1:]
    assert len(frames) == 2
    ids = [sorted(line.split()[0] for line in frame.splitlines()[1:]
                  if line.strip().startswith('#')) for frame in frames]
    assert ids[0] and ids[0] == ids[1] and '#1' in ids[0]
    assert cv2.imread(str(tmp_path / 'bus_detections.png')) is not None


#: What the demo prints for a frame of each task (obb: rotated boxes; classify: classes).
PRINTED = {'segment': ' bus ', 'pose': 'person', 'obb': 'angle=', 'classify': 'top 5 classes'}
WEIGHT_SUFFIX = {'segment': 'seg', 'pose': 'pose', 'obb': 'obb', 'classify': 'cls'}


@pytest.mark.parametrize('task', ['segment', 'pose', 'obb', 'classify'])
def test_demo_task_writes_the_nodes_annotated_picture(model_dir, engine_cache_dir, assets,
                                                      tmp_path, task):
    if not (model_dir / f'yolov8n-{WEIGHT_SUFFIX[task]}.pt').is_file():
        pytest.skip(f'no yolov8n {task} weights in the model folder')
    run = subprocess.run(
        [sys.executable, '-m', 'vision_nodes.tools.demo', '--backend', 'onnx', '--depth',
         'none', '--task', task, '--images', str(assets / 'bus.jpg'), '--out', str(tmp_path)],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, 'VISION_NODES_MODEL_DIR': str(model_dir),
             'VISION_NODES_CACHE_DIR': str(engine_cache_dir)})
    assert run.returncode == 0, run.stdout + run.stderr
    assert PRINTED[task] in run.stdout.split('bus.jpg: ', 1)[1], run.stdout
    picture = cv2.imread(str(tmp_path / f'bus_{task}.png'))
    original = cv2.imread(str(assets / 'bus.jpg'))
    assert picture is not None and picture.shape == original.shape
    assert (picture != original).any()


def test_an_unanswered_frame_says_what_the_node_was_doing():
    """When no answer comes, the demo says whether the node exited, and its last log lines."""
    from vision_nodes.tools.client import NodeProcess, wait_for
    from vision_nodes.tools.demo import _silence

    node = NodeProcess(node_name='9_not_a_node_name')  # rcl refuses it: the process exits
    try:
        assert wait_for(lambda: not node.alive(), 60.0), node.output()
        said = _silence(node)
        assert said.startswith(f'the node exited with code {node.process.returncode}; '
                               f'the last lines of {node.log_path}:'), said
        assert node.output().splitlines()[-1] in said
    finally:
        node.stop()
