"""OpenVINO's streams' requests, lent to threads: every frame its own result, nobody stuck."""

from __future__ import annotations

import threading

import numpy as np
import pytest

ov = pytest.importorskip('openvino', reason='OpenVINO is not installed')

from vision_nodes.runners.openvino_streams import StreamRequests  # noqa: E402


@pytest.fixture(scope='module')
def requests() -> StreamRequests:
    """A real compiled model on two CPU streams: (1, 3, 8, 8) -> its input times two."""
    import openvino.opset13 as ops

    image = ops.parameter([1, 3, 8, 8], np.float32)
    model = ov.Model([ops.multiply(image, ops.constant(np.float32(2.0)))], [image])
    compiled = ov.Core().compile_model(model, 'CPU', {'NUM_STREAMS': 2,
                                                      'PERFORMANCE_HINT': 'THROUGHPUT'})
    return StreamRequests(compiled, 2)


def _frames(count: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).random((count, 3, 8, 8), dtype=np.float32)


@pytest.mark.parametrize('count', [1, 2, 5])
def test_each_frame_gets_its_own_result_in_order(requests, count):
    tensor = _frames(count, count)
    (out,) = requests.run(tensor)
    assert out.shape == tensor.shape
    np.testing.assert_array_equal(out, tensor * 2)


def test_threads_running_batches_at_once_all_finish_with_their_own_results(requests):
    """More threads than requests, each with batches larger than the pool: a thread that
    holds a request never waits for another, so no two threads wait on each other."""
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            for round_ in range(10):
                tensor = _frames(1 + (seed + round_) % 4, seed * 100 + round_)
                np.testing.assert_array_equal(requests.run(tensor)[0], tensor * 2)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not any(thread.is_alive() for thread in threads), 'a thread is stuck'
    assert not errors, errors


def test_a_failed_start_gives_every_request_back_idle(requests):
    """A frame the model refuses: one error, and the pool still runs every stream after."""
    with pytest.raises(RuntimeError):
        requests.run(np.zeros((2, 3, 4, 4), np.float32))
    tensor = _frames(2, 7)
    np.testing.assert_array_equal(requests.run(tensor)[0], tensor * 2)
