"""PyTorch on a GPU: u8 frames converted on the device, detections decoded there, CUDA graphs.

There is no GPU here. The device code is plain torch, so it runs on the CPU (the runner's
``device_io_types`` and ``graph_device_types`` get 'cpu' added, as the compile tests do) and
is checked against the host path: the same network input bit for bit, the same detections.
Only the CUDA graph API itself is faked (``test/fake_cuda_graphs.py``: capture records the
operations, replay re-runs them on the captured tensors).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip('torch', reason='PyTorch is not installed')
pytest.importorskip('torchvision', reason='torchvision is not installed')

from fake_cuda_graphs import FakeCudaGraphs  # noqa: E402
from ultralytics_reference import mask_iou, result_masks, whole_masks  # noqa: E402
from vision_nodes.manifest import Preprocessing  # noqa: E402
from vision_nodes.tasks import resolve_manifest  # noqa: E402
from vision_nodes.pipeline import build_pipeline  # noqa: E402
from vision_nodes.runners.torch_device import DeviceInput, DeviceOutput  # noqa: E402
from vision_nodes.runners.torch_graphs import GraphReplay  # noqa: E402
from vision_nodes.runners.torch_runner import TorchRunner  # noqa: E402
from vision_nodes.tasks.detect import (  # noqa: E402
    MAX_NMS_CANDIDATES, DetectionParams, decode, decode_frames, decode_instances)
from vision_nodes.tasks.preprocess import prepare, prepare_u8  # noqa: E402

CPU = torch.device('cpu')
PARAMS = DetectionParams(0.25, 0.45, 300)


def _frame(encoding: str, shape=(75, 130)) -> np.ndarray:
    rng = np.random.default_rng(7)
    channels = {'mono8': 1, 'rgba8': 4, 'bgra8': 4}.get(encoding, 3)
    image = rng.integers(0, 256, shape + (channels,), dtype=np.uint8)
    return image[:, :, 0] if channels == 1 else image


@pytest.mark.parametrize('encoding', ['bgr8', 'rgb8', 'mono8', 'bgra8'])
@pytest.mark.parametrize('prep', [
    Preprocessing(),
    Preprocessing(color_order='bgr', pad_value=0),
    Preprocessing(letterbox=False, scale=1 / 255, mean=(0.485, 0.456, 0.406),
                  std=(0.229, 0.224, 0.225)),
])
def test_u8_converted_on_the_device_equals_the_host_tensor(encoding, prep):
    """prepare_u8 + DeviceInput.convert gives prepare's float tensor, bit for bit."""
    image = _frame(encoding)
    want, want_meta = prepare(image, encoding, (64, 96), prep)
    u8, meta = prepare_u8(image, encoding, (64, 96), prep)
    assert u8.dtype == np.uint8 and u8.shape == (1, 64, 96, 3) and meta == want_meta
    device = DeviceInput(CPU, torch.float32, prep)
    got = device.convert(device.stage(u8)).numpy()
    assert got.shape == want.shape and got.flags.c_contiguous
    np.testing.assert_array_equal(got, want)
    assert DeviceInput.network_shape(u8) == DeviceInput.network_shape(want) == (64, 96)


def test_prepare_u8_hands_a_filling_bgr_resize_without_copying_the_frame():
    """A bgr frame resized to fill the input is handed as resized; the frame itself never."""
    image = _frame('bgr8', (128, 96))
    u8, _ = prepare_u8(image, 'bgr8', (64, 48), Preprocessing())
    assert not np.shares_memory(u8, image)
    same, _ = prepare_u8(image, 'bgr8', (128, 96), Preprocessing())
    assert not np.shares_memory(same, image)
    np.testing.assert_array_equal(same[0], image)


def _yolo_like_output(rng, anchors=8400, classes=80, candidates=4000) -> np.ndarray:
    """(1, 4 + classes, anchors): overlapping boxes, ``candidates`` of them above 0.25."""
    out = np.zeros((1, 4 + classes, anchors), np.float32)
    centres = rng.uniform(50, 590, (2, anchors))
    out[0, 0:2] = np.round(centres / 8) * 8  # clustered: many overlaps for NMS
    out[0, 2:4] = rng.uniform(10, 120, (2, anchors))
    out[0, 4:] = rng.uniform(0, 0.2, (classes, anchors))
    live = rng.choice(anchors, candidates, replace=False)
    out[0, 4 + rng.integers(0, 5, candidates), live] = rng.uniform(0.26, 1, candidates)
    return out


@pytest.mark.parametrize('candidates', [0, 30, MAX_NMS_CANDIDATES + 1000])
def test_detections_decoded_on_the_device_equal_the_host_decode(candidates):
    """Confidence filter, top-k and class-separated NMS on the device: the host's result."""
    output = _yolo_like_output(np.random.default_rng(candidates), candidates=candidates)
    for params in (PARAMS, DetectionParams(0.5, 0.7, 20)):
        host = decode(output, params)
        dev = decode(DeviceOutput(torch.from_numpy(output)), params)
        assert len(host) == len(dev) and (len(host) > 0) == (candidates > 0)
        np.testing.assert_array_equal(dev.class_ids, host.class_ids)
        np.testing.assert_array_equal(dev.scores, host.scores)
        np.testing.assert_array_equal(dev.boxes, host.boxes)
        assert dev.boxes.dtype == np.float32 and dev.class_ids.dtype == np.int64


def test_a_batch_decoded_on_the_device_equals_each_frame_decoded_alone():
    """Several cameras' frames in one output: one pass over the batch, each frame's result
    as the host decodes that frame alone (none, a few and more than the top-k keeps)."""
    rng = np.random.default_rng(7)
    frames = [_yolo_like_output(rng, candidates=n) for n in (30, 0, MAX_NMS_CANDIDATES + 500)]
    batch = DeviceOutput(torch.from_numpy(np.concatenate(frames)))
    for params in (PARAMS, DetectionParams(0.5, 0.7, 20)):
        found = [dets for dets, _ in decode_frames(batch, params)]
        assert len(found) == len(frames)
        for dets, frame in zip(found, frames):
            host = decode(frame, params)
            np.testing.assert_array_equal(dets.class_ids, host.class_ids)
            np.testing.assert_array_equal(dets.scores, host.scores)
            np.testing.assert_array_equal(dets.boxes, host.boxes)
        assert len(found[1]) == 0 and len(found[0]) > 0


def test_device_output_reads_back_as_an_array():
    tensor = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    out = DeviceOutput(tensor)
    assert out.shape == (2, 3, 4) and np.shape(out) == (2, 3, 4)
    np.testing.assert_array_equal(np.asarray(out[1:2]), tensor[1:2].numpy())


@pytest.fixture
def device_path_on_cpu(monkeypatch, model_dir):
    """Let the runner convert, decode and replay graphs on the CPU, as it does on a GPU.

    Every test that uses it runs the real shared weights (``model_dir`` skips without them).
    """
    fake = FakeCudaGraphs()
    monkeypatch.setattr(TorchRunner, 'device_io_types', ('cuda', 'cpu'))
    monkeypatch.setattr(TorchRunner, 'graph_device_types', ('cuda', 'cpu'))
    monkeypatch.setattr(TorchRunner, '_graph_api', lambda self: fake)
    return fake


@pytest.fixture(scope='module')
def host_model(engine_cache_dir, model_dir):
    model = build_pipeline(resolve_manifest('yolov8n'), 'cpu', cache_dir=engine_cache_dir)
    yield model
    model.close()


def _same(found, want):
    assert len(found) == len(want) > 0
    np.testing.assert_array_equal(found.class_ids, want.class_ids)
    np.testing.assert_allclose(found.boxes, want.boxes, atol=1e-3)
    np.testing.assert_allclose(found.scores, want.scores, atol=1e-5)


@pytest.mark.parametrize('graphs', [False, True])
def test_device_path_gives_the_host_paths_detections(device_path_on_cpu, host_model, bus_bgr,
                                                     assets, engine_cache_dir, graphs):
    """u8 up, convert and decode on the device (graphs replayed or not): same detections."""
    import cv2

    lines: list[str] = []
    model = build_pipeline(resolve_manifest('yolov8n'), 'cpu', cache_dir=engine_cache_dir,
                           cuda_graphs=graphs, log=lines.append)
    try:
        assert model.runner.takes_u8 and model.runner.device_outputs
        info = model.runner.describe()
        assert info['input'] == 'u8 image, converted on the device'
        assert info['cuda_graphs'] is graphs
        zidane = cv2.imread(str(assets / 'zidane.jpg'))
        for image in (bus_bgr, zidane, bus_bgr):  # a shape change and back
            _same(model.process(image, 'bgr8', PARAMS),
                  host_model.process(image, 'bgr8', PARAMS))
        if graphs:
            # Captured at load (float warm-up) and at each new shape; replayed per frame.
            assert device_path_on_cpu.captures == 4 and device_path_on_cpu.replays >= 5
            assert model.runner._graphs.captured == 1
        else:
            assert device_path_on_cpu.captures == 0
        assert not any('warning' in line for line in lines), lines
    finally:
        model.close()


def test_device_path_decodes_a_batch_at_once(device_path_on_cpu, host_model, bus_bgr,
                                             engine_cache_dir, monkeypatch):
    """Cameras batched on the device path: the frames go into the runner's own input buffer
    and are decoded in one go (no frame-by-frame postprocess), each as the host finds it."""
    model = build_pipeline(resolve_manifest('yolov8n'), 'cpu', cache_dir=engine_cache_dir,
                           max_batch=3)
    try:
        frames = [bus_bgr, np.ascontiguousarray(bus_bgr[:, ::-1]), bus_bgr]
        buffers, infer = [], model.runner.infer

        def spy(tensor):
            buffers.append(tensor)
            return infer(tensor)
        monkeypatch.setattr(model.runner, 'infer', spy)
        monkeypatch.setattr(model.task, 'postprocess', None)  # must not be called
        found = model.process_batch([(f, 'bgr8') for f in frames], PARAMS)
        assert len(buffers) == 1 and buffers[0].shape[0] == 3
        assert buffers[0].dtype == np.uint8  # the u8 images, converted on the device
        for frame, dets in zip(frames, found):
            _same(dets, host_model.process(frame, 'bgr8', PARAMS))
    finally:
        model.close()


def test_pose_takes_u8_but_decodes_on_the_host(device_path_on_cpu, engine_cache_dir,
                                               bus_bgr):
    """Keypoints are read on the host: the output comes back as an array (graphs or not), and
    the results equal the host path's."""
    results = []
    for io in (False, True):
        model = build_pipeline(resolve_manifest('yolov8n_pose'), 'cpu',
                               cache_dir=engine_cache_dir, device_io=io, cuda_graphs=io)
        try:
            assert model.runner.takes_u8 is io and not model.runner.device_outputs
            results.append(model.process(bus_bgr, 'bgr8', PARAMS))
            outputs = model.runner.infer(model.task.preprocess(bus_bgr, 'bgr8')[0])
            assert len(outputs) == 1 and isinstance(outputs[0], np.ndarray)
        finally:
            model.close()
    host, device = results
    _same(device, host)
    np.testing.assert_allclose(device.keypoints, host.keypoints, atol=1e-3)


@pytest.mark.parametrize('graphs', [False, True])
def test_segment_decodes_and_makes_masks_on_the_device(device_path_on_cpu, engine_cache_dir,
                                                       bus_bgr, assets, graphs):
    """Segmentation on the device path: its outputs stay there, the detections are the host
    path's and every mask matches the host's (IoU >= 0.99: both sample bilinearly, the host
    through OpenCV's 1/32-pixel positions), on two frame shapes and a batch of two."""
    import cv2

    frames = [bus_bgr, cv2.imread(str(assets / 'zidane.jpg'))]
    host = build_pipeline(resolve_manifest('yolov8n_seg'), 'cpu', cache_dir=engine_cache_dir,
                          device_io=False, cuda_graphs=False)
    model = build_pipeline(resolve_manifest('yolov8n_seg'), 'cpu', cache_dir=engine_cache_dir,
                           cuda_graphs=graphs)
    try:
        assert model.runner.takes_u8 and model.runner.device_outputs
        outputs = model.runner.infer(model.task.preprocess(bus_bgr, 'bgr8')[0])
        assert len(outputs) == 2 and all(isinstance(o, DeviceOutput) for o in outputs)
        wanted = [host.process(frame, 'bgr8', PARAMS) for frame in frames]
        found = [model.process(frame, 'bgr8', PARAMS) for frame in frames]
        found_batch = model.process_batch([(bus_bgr, 'bgr8'), (bus_bgr, 'bgr8')], PARAMS)
    finally:
        model.close()
        host.close()
    for got, want in zip(found + found_batch, wanted + [wanted[0]] * 2):
        _same(got, want)
        # The device's masks are whole-image ones (windows: the image), the host's at
        # their windows' size: over the image, the same.
        assert got.shape == want.shape and len(got.masks) == len(want.masks)
        assert all(m.dtype == bool and m.shape == got.shape for m in got.masks)
        ious = [mask_iou(a, b) for a, b in zip(result_masks(got), result_masks(want))]
        assert min(ious) >= 0.99, ious


def test_device_masks_equal_the_host_masks_at_the_edges_and_drop_empty_ones(monkeypatch):
    """Synthetic prototypes and boxes: inside, across the letterbox's border, at the frame's
    edges, one with all-negative logits (left out on both paths) and more boxes than a chunk:
    the device's masks match the host's, and chunks (given, or sized to a pixel budget) do
    not change them."""
    from vision_nodes.runners import torch_device
    from vision_nodes.tasks.preprocess import LetterboxMeta
    from vision_nodes.tasks.segment import NetworkMeta, instance_masks

    rng = np.random.default_rng(3)
    protos = rng.normal(0, 1, (32, 80, 120)).astype(np.float32)
    protos = cv2_blur(protos)
    count = 20
    coefficients = rng.normal(0, 1, (count, 32)).astype(np.float32)
    coefficients[5] = 0  # logits 0 everywhere: not above 0, so an empty mask
    corners = rng.uniform((0, 0), (440, 290), (count, 2))
    boxes = np.concatenate([corners, corners + rng.uniform(8, 200, (count, 2))], axis=1)
    boxes[0] = (-5, -5, 100, 90)  # over the top-left edge and the letterbox's border
    boxes[1] = (400, 250, 480.5, 330)  # over the right edge
    boxes = boxes.astype(np.float32)
    # A 270 x 450 source letterboxed into 320 x 480 at gain 480 / 450: 288 rows of image,
    # 16 rows of padding above and below.
    gain = 480 / 450
    meta = NetworkMeta(LetterboxMeta((270, 450), (gain, gain), (0.0, 16.0)), (320, 480))
    assert meta.content() == (0, 16, 480, 288)
    host, host_kept, windows = instance_masks(coefficients, protos, boxes, meta)
    host = whole_masks(host, windows, meta.letterbox.source_shape)
    out = DeviceOutput(torch.from_numpy(protos[None]))
    args = (DeviceOutput(torch.from_numpy(coefficients)), boxes, meta.shape, meta.content(),
            meta.letterbox.source_shape)
    device, kept = out.instance_masks(*args)
    np.testing.assert_array_equal(kept, host_kept)
    assert 5 not in kept and len(kept) >= count - 4, kept
    assert device.shape == host.shape == (len(kept), 270, 450)
    ious = [mask_iou(a, b) for a, b in zip(device, host)]
    assert min(ious) >= 0.97 and np.mean(ious) >= 0.99, ious
    small, small_kept = out.instance_masks(*args, chunk=3)
    np.testing.assert_array_equal(small, device)
    np.testing.assert_array_equal(small_kept, kept)
    monkeypatch.setattr(torch_device, 'MASK_CHUNK_PIXELS', 2 * 320 * 480)  # 2 at a time
    budget, budget_kept = out.instance_masks(*args)
    np.testing.assert_array_equal(budget, device)
    np.testing.assert_array_equal(budget_kept, kept)


def test_a_frame_without_detections_gives_no_masks_on_the_device():
    """Nothing above the threshold: no detections, no coefficients, and (0, H, W) masks."""
    rng = np.random.default_rng(5)
    pred = DeviceOutput(torch.from_numpy(rng.uniform(0, 0.2, (1, 4 + 80 + 32, 300))
                                         .astype(np.float32)))
    dets, coefficients = decode_instances(pred, PARAMS, 80, False)
    assert dets.boxes.shape == (0, 4) and dets.scores.shape == (0,)
    assert dets.class_ids.dtype == np.int64 and coefficients.shape == (0, 32)
    protos = DeviceOutput(torch.zeros((1, 32, 16, 20)))
    masks, kept = protos.instance_masks(coefficients, dets.boxes, (64, 80), (0, 4, 80, 56),
                                        (70, 100))
    assert masks.shape == (0, 70, 100) and masks.dtype == bool and kept.shape == (0,)


def cv2_blur(planes: np.ndarray) -> np.ndarray:
    """Smooth random prototypes, so that masks are blobs (as a network's are), not noise."""
    import cv2

    return np.stack([cv2.GaussianBlur(p, (0, 0), 3) for p in planes]) * 3


def test_instances_decoded_on_the_device_equal_the_host_decode():
    """The detections and each one's extra rows (coefficients), top-k included."""
    rng = np.random.default_rng(11)
    for candidates in (0, 40, MAX_NMS_CANDIDATES + 200):
        output = _yolo_like_output(rng, classes=80, candidates=candidates)
        extra = rng.normal(0, 1, (1, 32, output.shape[2])).astype(np.float32)
        output = np.concatenate([output, extra], axis=1)
        want, want_extra = decode_instances(output, PARAMS, 80, False)
        found, got_extra = decode_instances(DeviceOutput(torch.from_numpy(output)), PARAMS, 80,
                                            False)
        assert isinstance(got_extra, DeviceOutput)  # the coefficients stay on the device
        assert len(found) == len(want) and (len(want) > 0) == (candidates > 0)
        np.testing.assert_array_equal(found.boxes, want.boxes)
        np.testing.assert_array_equal(found.scores, want.scores)
        np.testing.assert_array_equal(found.class_ids, want.class_ids)
        np.testing.assert_array_equal(np.asarray(got_extra), want_extra)


def test_device_io_off_keeps_the_host_path(device_path_on_cpu, engine_cache_dir, bus_bgr):
    model = build_pipeline(resolve_manifest('yolov8n'), 'cpu', cache_dir=engine_cache_dir,
                           device_io=False, cuda_graphs=False)
    try:
        assert not model.runner.takes_u8 and not model.runner.device_outputs
        assert isinstance(model.runner.infer(model.task.preprocess(bus_bgr, 'bgr8')[0])[0],
                          np.ndarray)
    finally:
        model.close()


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x)).mean(dim=(2, 3))


def test_replay_reads_each_new_input():
    """Captured once per input key; each replay computes the new frame, as eager does."""
    net, fake, lines = _Net().eval(), FakeCudaGraphs(), []
    graphs = GraphReplay(net, CPU, fake, lines.append, 'net')
    rng = np.random.default_rng(1)
    with torch.inference_mode():
        for _ in range(3):
            x = torch.from_numpy(rng.standard_normal((1, 3, 8, 8)).astype(np.float32))
            torch.testing.assert_close(graphs.run(x, (8, 8)), net(x), rtol=0, atol=0)
        assert fake.captures == 1 and fake.replays == 3 and graphs.captured == 1
        graphs.run(torch.zeros(1, 3, 16, 8), (16, 8))  # another shape: the old graph goes
        assert fake.captures == 2 and graphs.captured == 1
    assert lines == []
    # PyTorch's default ('global') fails other threads' CUDA calls during a capture: another
    # model's inference, or the precision check's fp32 twin loading beside it (seen on an
    # H200). Each capture is this thread's alone, and holds the lock that keeps device-wide
    # calls (a synchronize, ``empty_cache``) of other threads away from it.
    assert fake.capture_modes == ['thread_local', 'thread_local']
    assert fake.locked_captures == 2


def test_failed_capture_runs_eagerly_with_one_warning(device_path_on_cpu, engine_cache_dir,
                                                      host_model, bus_bgr):
    device_path_on_cpu.fail_capture = True
    lines: list[str] = []
    model = build_pipeline(resolve_manifest('yolov8n'), 'cpu', cache_dir=engine_cache_dir,
                           log=lines.append)
    try:
        for _ in range(2):
            _same(model.process(bus_bgr, 'bgr8', PARAMS),
                  host_model.process(bus_bgr, 'bgr8', PARAMS))
        warnings = [line for line in lines if 'CUDA graph' in line]
        assert len(warnings) == 1 and 'running it eagerly' in warnings[0], lines
        assert model.runner.describe()['cuda_graphs'] is False
    finally:
        model.close()
