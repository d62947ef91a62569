"""An output that raises costs its frame only, on one camera and on several (#37 finding 2).

A tracker with ``gmc_method: bogus`` raised inside the outputs' publish, outside the frame
path's ``try``: the inference thread died and the node, still ``active``, answered nothing
again. Here a model's outputs raise on their first frame (as that tracker did) in a real
rclpy node's frame path and in the multi-camera batcher: the frame is dropped, one line says
why, the diagnostics count it, and the next frame is published.
"""

from __future__ import annotations

import types

import numpy as np
import pytest

from node_harness import node_in_own_context
from vision_nodes.ros.inputs.batcher import FrameBatcher
from vision_nodes.ros.process.diagnostics import NodeFacts, status_values
from vision_nodes.ros.inputs.frame_path import FramePath, ServedModel
from vision_nodes.ros.inputs.conversion import numpy_to_image
from vision_nodes.ros.process.log_limiter import LogLimiter
from vision_nodes.stats import HealthLimits
from vision_nodes.tools.client import wait_for

WHY = 'ValueError: Unknown GMC method: bogus'


class Pipeline:
    """Stands for a loaded model: every frame's result is its image's shape."""

    runner = types.SimpleNamespace(concurrent_frames=1)

    def process(self, image, encoding, params):
        return image.shape

    def process_batch(self, frames, params):
        return [image.shape for image, _ in frames]


class FailingOnce:
    """Outputs whose first publish raises what Ultralytics raised for a bogus GMC method."""

    def __init__(self) -> None:
        self.published: list = []
        self.calls = 0

    def wanted(self) -> bool:
        return True

    def publish(self, result, header, frame=None) -> None:
        self.calls += 1
        if self.calls == 1:
            raise ValueError('Unknown GMC method: bogus')
        self.published.append((header.frame_id, result))


@pytest.fixture(scope='module')
def node():
    with node_in_own_context('output_failures_test') as node:
        yield node


def _image(frame_id: str):
    msg = numpy_to_image(np.zeros((8, 8, 3), np.uint8), 'bgr8')
    msg.header.frame_id = frame_id
    return msg


def _diagnostics(path: FramePath) -> dict[str, str]:
    return dict(status_values(path.stats.snapshot(), NodeFacts('/n'), HealthLimits(), 'active'))


def test_the_frame_path_drops_the_frame_and_goes_on(node):
    lines: list[str] = []
    outputs = FailingOnce()
    path = FramePath(node, LogLimiter(lines.append), lazy=lambda: False)
    path.load([ServedModel('det', Pipeline(), types.SimpleNamespace(current=None), outputs)])
    path.start()
    try:
        path.on_image(_image('first'))
        assert wait_for(lambda: _diagnostics(path)['errors'] == '1', 10.0), _diagnostics(path)
        path.on_image(_image('second'))
        assert wait_for(lambda: outputs.published, 10.0), (lines, path._thread.is_alive())
        assert outputs.published == [('second', (8, 8, 3))]
        values = _diagnostics(path)
        assert (values['frames processed'], values['errors']) == ('1', '1')
        line = f"model 'det': outputs failed on a frame (dropped): {WHY}"
        assert values['last error'] == line and lines == [line]
    finally:
        path.stop()


def test_the_batcher_drops_the_frame_and_goes_on(node):
    lines: list[str] = []
    cameras = [FailingOnce(), FailingOnce()]
    frames = FramePath(node, LogLimiter(lines.append), lazy=lambda: False)
    frames.load([ServedModel('det', Pipeline(), types.SimpleNamespace(current=None),
                             types.SimpleNamespace(cameras=cameras))])
    param = {'max_batch': 0, 'batch_window': 0.0}.get
    batcher = FrameBatcher(node, frames, ['/a/image', '/b/image'], param, frames.frame_error)
    batcher.start()
    try:
        batcher.cameras[0].on_image(_image('a1'))
        assert wait_for(lambda: _diagnostics(frames)['errors'] == '1', 10.0), lines
        for sent in ('a2', 'a3'):
            batcher.cameras[0].on_image(_image(sent))
            assert wait_for(lambda: cameras[0].published[-1:] == [(sent, (8, 8, 3))], 10.0), \
                (lines, [t.is_alive() for t in batcher._threads])
        assert _diagnostics(batcher.cameras[0])['errors'] == '1'
        values = _diagnostics(frames)
        assert (values['frames processed'], values['errors']) == ('2', '1')
        assert lines == [f"camera '/a/image': model 'det': outputs failed on a frame "
                         f'(dropped): {WHY}']
    finally:
        batcher.stop()


def test_anything_a_frame_raises_costs_that_frame_only(node):
    """Not only the outputs: whatever raises on the inference thread (here a message the
    converter cannot even read) drops its frame with one line, and the thread goes on."""
    lines: list[str] = []
    outputs = FailingOnce()
    outputs.calls = 1  # publishes from the first frame on
    path = FramePath(node, LogLimiter(lines.append), lazy=lambda: False)
    path.load([ServedModel('det', Pipeline(), types.SimpleNamespace(current=None), outputs)])
    path.start()
    try:
        path.on_image(types.SimpleNamespace(header=_image('odd').header))
        assert wait_for(lambda: _diagnostics(path)['errors'] == '1', 10.0), lines
        assert len(lines) == 1 and lines[0].startswith('frame dropped: AttributeError: ')
        path.on_image(_image('next'))
        assert wait_for(lambda: outputs.published == [('next', (8, 8, 3))], 10.0), lines
    finally:
        path.stop()
