"""Batches: several frames in one run give each frame the results it gets alone.

Every runner takes batches of up to ``max_batch`` frames (the export's batch axis, OpenVINO's
batch dimension, TensorRT's optimisation profile; the fake engine stands in for TensorRT):
``LoadedModel.process_batch`` groups frames by network shape, so cameras of one aspect ratio
share a run and other sizes run on their own, and every result equals ``process`` on its frame.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip('torch', reason='PyTorch is not installed (the reference)')
pytest.importorskip('onnxruntime', reason='ONNX Runtime is not installed')

import cv2  # noqa: E402

from detection_match import assert_same_detections  # noqa: E402
from vision_nodes.artifacts.onnx_export import onnx_cache_fields  # noqa: E402
from vision_nodes.artifacts.types import model_profile  # noqa: E402
from vision_nodes.tasks import resolve_manifest  # noqa: E402
from vision_nodes.pipeline import build_pipeline  # noqa: E402
from vision_nodes.runners.onnx_runner import OnnxRunner  # noqa: E402
from vision_nodes.tasks.detect import DetectionParams  # noqa: E402

PARAMS = DetectionParams(0.25, 0.45, 300)
BACKENDS = ['cpu', 'onnx', 'openvino']


@pytest.fixture(scope='module')
def frames(assets) -> list[tuple[np.ndarray, str]]:
    bus, zidane = (cv2.imread(str(assets / n)) for n in ('bus.jpg', 'zidane.jpg'))
    flipped = np.ascontiguousarray(bus[:, ::-1])
    # Two of bus's shape, one 16:9, then bus again: two runs of two shapes, order kept.
    return [(bus, 'bgr8'), (zidane, 'bgr8'), (flipped, 'bgr8'), (bus, 'bgr8')]


@pytest.fixture(scope='module', params=BACKENDS)
def batched(request, model_dir, engine_cache_dir):
    if request.param == 'openvino':
        pytest.importorskip('openvino', reason='OpenVINO is not installed')
    model = build_pipeline(resolve_manifest('yolov8n'), request.param, model_dir=str(model_dir),
                           cache_dir=engine_cache_dir, precision='fp32', max_batch=3)
    yield model
    model.close()


def test_runner_takes_the_batch(batched):
    assert batched.runner.max_batch == 3
    assert batched.manifest.max_batch == 3


def test_batch_results_equal_single_frame_results(batched, frames):
    calls = []
    infer = batched.runner.infer
    batched.runner.infer = lambda tensor: calls.append(tensor.shape[0]) or infer(tensor)
    try:
        together = batched.process_batch(frames, PARAMS)
    finally:
        batched.runner.infer = infer
    assert sorted(calls) == [1, 3]  # bus x3 in one run (the flip has its shape), zidane alone
    for (image, encoding), result in zip(frames, together):
        alone = batched.process(image, encoding, PARAMS)
        assert len(result) > 0
        assert_same_detections(result, alone, min_score=0.3, min_iou=0.95)


def test_batches_are_cut_at_max_batch(batched, frames):
    bus = frames[0]
    calls = []
    infer = batched.runner.infer
    batched.runner.infer = lambda tensor: calls.append(tensor.shape[0]) or infer(tensor)
    try:
        results = batched.process_batch([bus] * 5, PARAMS)
    finally:
        batched.runner.infer = infer
    assert calls == [3, 2] and len(results) == 5


def test_onnx_cpu_sessions_plan_no_memory_pattern(batched):
    """ONNX Runtime on the CPU allocates per tensor: a planned block per input shape is no
    faster there, and a batch of several frames would keep it (about 70 MiB for four)."""
    if not isinstance(batched.runner, OnnxRunner):
        pytest.skip('ONNX Runtime sessions only')
    options = batched.runner._session.get_session_options()
    assert options.enable_mem_pattern is False
    assert options.enable_cpu_mem_arena is True


def test_openvino_on_a_cpu_runs_frames_on_streams_side_by_side(batched, frames):
    """OpenVINO on a CPU: one compiled model on one stream per core (up to the batch) whose
    requests run a batch's frames, and frames of threads calling at once, side by side."""
    if batched.runner.describe()['backend'] != 'openvino':
        pytest.skip('OpenVINO only')
    from vision_nodes.parallel import map_frames
    from vision_nodes.platform.cpu import cpu_info
    from vision_nodes.runners.openvino_streams import StreamRequests

    plan = batched.runner.plan
    assert plan.streams == min(3, cpu_info().logical_cores)
    assert plan.properties(None)['NUM_STREAMS'] == 1
    assert batched.runner.concurrent_frames == plan.streams
    if plan.streams > 1:
        assert plan.properties(None, plan.streams)['NUM_STREAMS'] == plan.streams
        bus = frames[0]
        together = batched.process_batch([bus] * 3, PARAMS)
        compiled = list(batched.runner._compiled.values())
        assert compiled and all(isinstance(entry[1], StreamRequests) for entry in compiled)
        alone = batched.process(*bus, PARAMS)
        at_once = map_frames(lambda frame: batched.process(*frame, PARAMS), [bus] * 4)
        for result in together + at_once:
            assert_same_detections(result, alone, min_score=0.3, min_iou=0.99)


def test_each_frames_pre_and_post_processing_run_on_the_frame_pool(batched, frames):
    """A batch's frames are prepared and decoded on the pool's threads (side by side where
    the machine has cores for it), not one after the other on the caller's; results are the
    same as one by one."""
    import threading

    from vision_nodes.parallel import workers

    if workers() < 2:
        pytest.skip('one core: the frames run on the calling thread')
    task, seen = batched.task, []
    pre, post = task.preprocess, task.postprocess

    def spy(run):
        return lambda *a: seen.append(threading.current_thread().name) or run(*a)
    task.preprocess, task.postprocess = spy(pre), spy(post)
    try:
        together = batched.process_batch([frames[0]] * 3, PARAMS)
    finally:
        del task.preprocess, task.postprocess
    assert len(seen) == 6 and all(name.startswith('frames') for name in seen), seen
    alone = batched.process(*frames[0], PARAMS)
    for result in together:
        assert_same_detections(result, alone, min_score=0.3, min_iou=0.95)


def test_batch_range_is_in_the_cache_keys(model_dir):
    single = resolve_manifest('yolov8n')
    from dataclasses import replace

    four = replace(single, max_batch=4)
    weights = single.weights_path(str(model_dir))
    assert 'batch' not in onnx_cache_fields(single, weights, 'fp32')  # single keeps its key
    assert onnx_cache_fields(four, weights, 'fp32')['batch'] == 'dynamic'
    assert model_profile(single)[2][0] == 1
    assert [s[0] for s in model_profile(four)] == [1, 4, 4]
