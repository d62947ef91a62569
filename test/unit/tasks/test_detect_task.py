"""Tests for the detection task: letterbox, tensor preparation, decoding and exact NMS."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torchvision

from vision_nodes.images import ImageConversionError
from vision_nodes.ros.inputs.conversion import image_to_numpy, numpy_to_image
from vision_nodes.manifest import Preprocessing
from vision_nodes.tasks.detect import DetectionParams, DetectionTask, decode
from vision_nodes.tasks.nms import nms
from vision_nodes.tasks.preprocess import LetterboxMeta, channel_map, prepare, prepare_u8

from model_manifests import model_manifest
from reference_images import letterbox, to_tensor

RED_BGR = (0, 0, 255)
BLUE_BGR = (255, 0, 0)


def _square_image() -> np.ndarray:
    """100 x 200 (h x w) blue BGR image with a red square at rows 25..74, cols 50..149."""
    img = np.empty((100, 200, 3), np.uint8)
    img[...] = BLUE_BGR
    img[25:75, 50:150] = RED_BGR
    return img


def test_letterbox_landscape_into_square() -> None:
    canvas, meta = letterbox(_square_image(), (64, 64), pad_value=114)
    # gain = min(64 / 100, 64 / 200) = 0.32; resized to 64 x 32 (w x h); dh = 16.
    assert meta.source_shape == (100, 200)
    assert meta.gain == pytest.approx((0.32, 0.32))
    assert meta.pad == (0.0, 16.0)
    expected = np.full((64, 64, 3), 114, np.uint8)
    expected[16:48] = BLUE_BGR
    # The square's rows 25..74 map to 8..23 (+16 pad) and cols 50..149 to 16..47.
    expected[24:40, 16:48] = RED_BGR
    assert canvas.shape == (64, 64, 3)
    assert canvas.dtype == np.uint8
    np.testing.assert_array_equal(canvas, expected)


def test_letterbox_odd_padding_and_fill_value() -> None:
    img = np.full((33, 100, 3), 7, np.uint8)
    canvas, meta = letterbox(img, (64, 64), pad_value=0)
    # gain 0.64 -> 64 x 21 (w x h); dh = 21.5 -> top round(21.4) = 21, bottom 22.
    assert meta.pad == (0.0, 21.0)
    assert (canvas[:21] == 0).all()
    assert (canvas[21:42] == 7).all()
    assert (canvas[42:] == 0).all()


def test_letterbox_portrait_no_resize_is_exact() -> None:
    rng = np.random.default_rng(3)
    img = rng.integers(0, 256, (64, 32, 3), dtype=np.uint8)
    canvas, meta = letterbox(img, (64, 64), pad_value=200)
    # gain = min(1, 2) = 1: copied unchanged, dw = 16 -> left round(15.9) = 16.
    assert meta.gain == (1.0, 1.0)
    assert meta.pad == (16.0, 0.0)
    np.testing.assert_array_equal(canvas[:, 16:48], img)
    assert (canvas[:, :16] == 200).all() and (canvas[:, 48:] == 200).all()


def test_letterbox_mono() -> None:
    img = np.full((20, 40), 9, np.uint8)
    canvas, meta = letterbox(img, (32, 32))
    # gain 0.8 -> 32 x 16; top = round(7.9) = 8.
    assert canvas.shape == (32, 32, 1)
    assert meta.pad == (0.0, 8.0)
    assert (canvas[8:24] == 9).all() and (canvas[:8] == 114).all() and (canvas[24:] == 114).all()


def test_letterbox_disabled_stretches() -> None:
    img = np.full((100, 200, 3), 50, np.uint8)
    canvas, meta = letterbox(img, (64, 32), enabled=False)
    assert canvas.shape == (64, 32, 3)
    assert (canvas == 50).all()
    assert meta.gain == (32 / 200, 64 / 100)
    assert meta.pad == (0.0, 0.0)


def test_to_source_maps_back_and_clips() -> None:
    meta = LetterboxMeta(source_shape=(100, 200), gain=(0.32, 0.32), pad=(0.0, 16.0))
    boxes = np.array([[16, 24, 48, 40], [-10, 0, 70, 70]], np.float32)
    out = meta.to_source(boxes)
    assert out is boxes  # in place
    # (16 - 0) / .32 = 50, (24 - 16) / .32 = 25, 48 / .32 = 150, (40 - 16) / .32 = 75.
    # Second box: x1 -31.25 -> 0, y1 -50 -> 0, x2 218.75 -> 200, y2 168.75 -> 100.
    np.testing.assert_allclose(out, [[50, 25, 150, 75], [0, 0, 200, 100]], rtol=1e-6)


def test_to_source_separate_gains() -> None:
    meta = LetterboxMeta(source_shape=(100, 200), gain=(0.5, 2.0), pad=(4.0, 0.0))
    out = meta.to_source(np.array([[14, 10, 24, 30]], np.float64))
    np.testing.assert_allclose(out, [[20, 5, 40, 15]])


@pytest.mark.parametrize('encoding,pixel,order,channel', [
    ('bgr8', (0, 0, 255), 'rgb', 0),
    ('bgr8', (0, 0, 255), 'bgr', 2),
    ('rgb8', (255, 0, 0), 'rgb', 0),
    ('rgb8', (255, 0, 0), 'bgr', 2),
    ('8UC3', (0, 0, 255), 'rgb', 0),
    ('rgba8', (255, 0, 0, 0), 'rgb', 0),
    ('bgra8', (0, 0, 255, 0), 'rgb', 0),
    ('bgra8', (0, 0, 255, 0), 'bgr', 2),
])
def test_red_pixel_lands_in_the_red_channel(encoding: str, pixel: tuple[int, ...], order: str,
                                            channel: int) -> None:
    img = np.zeros((64, 64, len(pixel)), np.uint8)
    img[10, 20] = pixel
    tensor, _ = prepare(img, encoding, (64, 64), Preprocessing(color_order=order))
    expected = np.zeros((1, 3, 64, 64), np.float32)
    expected[0, channel, 10, 20] = 1.0
    np.testing.assert_allclose(tensor, expected, rtol=1e-6)


def test_mono_feeds_all_three_channels() -> None:
    assert channel_map('mono8', 'rgb') == (0, 0, 0)
    img = np.zeros((32, 32), np.uint8)
    img[5, 6] = 51
    tensor, _ = prepare(img, 'mono8', (32, 32), Preprocessing())
    np.testing.assert_allclose(tensor[0, :, 5, 6], [0.2, 0.2, 0.2], rtol=1e-6)
    assert tensor.sum() == pytest.approx(0.6, rel=1e-6)


def test_tensor_layout() -> None:
    img = np.zeros((100, 200, 3), np.uint8)
    tensor, _ = prepare(img, 'bgr8', (64, 96), Preprocessing())
    assert tensor.shape == (1, 3, 64, 96)
    assert tensor.dtype == np.float32
    assert tensor.flags.c_contiguous


def test_scale_mean_std() -> None:
    rng = np.random.default_rng(5)
    img = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    prep = Preprocessing(color_order='rgb', scale=1 / 255, mean=mean, std=std)
    tensor, _ = prepare(img, 'bgr8', (32, 32), prep)
    rgb = img[:, :, ::-1].astype(np.float64)
    expected = ((rgb / 255 - np.array(mean)) / np.array(std)).transpose(2, 0, 1)[None]
    np.testing.assert_allclose(tensor, expected, rtol=1e-5, atol=1e-5)


def test_scale_only() -> None:
    img = np.full((32, 32, 3), 100, np.uint8)
    tensor, _ = prepare(img, 'rgb8', (32, 32), Preprocessing(scale=0.5))
    assert (tensor == 50.0).all()


def test_padded_message_prepares_like_packed_copy() -> None:
    src = np.random.default_rng(9).integers(0, 256, (50, 70, 3), dtype=np.uint8)
    packed = numpy_to_image(src, 'bgr8')
    padded = numpy_to_image(np.zeros((50, 75, 3), np.uint8), 'bgr8')
    rows = np.frombuffer(padded.data, np.uint8).reshape(50, 225).copy()
    rows[:, :210] = src.reshape(50, 210)
    rows[:, 210:] = 77  # garbage padding
    padded.width, padded.data = 70, rows.tobytes()
    view = image_to_numpy(padded)
    assert not view.flags.c_contiguous
    prep = Preprocessing()
    expected, _ = prepare(image_to_numpy(packed), 'bgr8', (64, 64), prep)
    actual, _ = prepare(view, 'bgr8', (64, 64), prep)
    np.testing.assert_array_equal(actual, expected)


PREPARE_CASES = [
    ((810, 1080, 3), (640, 640), 'bgr8', Preprocessing()),           # landscape: rows padded
    ((1080, 810, 3), (640, 640), 'bgr8', Preprocessing()),           # portrait: columns padded
    ((481, 639, 3), (320, 320), 'rgb8', Preprocessing(pad_value=0)),  # odd padding
    ((64, 48, 3), (64, 64), 'bgr8', Preprocessing()),                # no resize, only padding
    ((64, 64, 3), (64, 64), 'bgr8', Preprocessing()),                # neither
    ((100, 50, 3), (64, 96), 'bgr8', Preprocessing(letterbox=False)),  # stretched
    ((90, 120), (64, 64), 'mono8', Preprocessing()),
    ((90, 120, 4), (64, 64), 'bgra8', Preprocessing(color_order='bgr')),
    ((70, 130, 3), (64, 64), 'rgb8', Preprocessing(
        scale=1 / 255, mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225), pad_value=3)),
    ((810, 1080, 3), (640, 480), 'bgr8', Preprocessing()),           # rect: fills the input
]


@pytest.mark.parametrize('shape, size, encoding, prep', PREPARE_CASES)
def test_prepare_equals_tensor_of_letterboxed_canvas(shape, size, encoding, prep) -> None:
    """The per-frame path (no 8-bit canvas) gives exactly the canvas path's tensor."""
    img = np.random.default_rng(sum(shape)).integers(0, 256, shape, dtype=np.uint8)
    canvas, meta = letterbox(img, size, prep.pad_value, prep.letterbox)
    if canvas.ndim == 2:
        canvas = canvas[:, :, None]
    expected = to_tensor(canvas, channel_map(encoding, prep.color_order), prep)
    actual, actual_meta = prepare(img, encoding, size, prep)
    assert actual_meta == meta
    assert actual.flags.c_contiguous and actual.shape == (1, 3) + size
    np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize('shape, size, encoding, prep', PREPARE_CASES)
def test_u8_input_is_the_letterboxed_bgr_image_the_float_path_converts(
        shape, size, encoding, prep) -> None:
    """prepare_u8 hands the letterboxed 8-bit image in bgr order: converted as the runtime
    converts it, it is exactly prepare's tensor; the task hands it when u8_input is set."""
    img = np.random.default_rng(sum(shape)).integers(0, 256, shape, dtype=np.uint8)
    image, meta = prepare_u8(img, encoding, size, prep)
    want, want_meta = prepare(img, encoding, size, prep)
    assert image.dtype == np.uint8 and image.shape == (1,) + size + (3,) and meta == want_meta
    np.testing.assert_array_equal(to_tensor(image[0], channel_map('bgr8', prep.color_order),
                                            prep), want)
    task = DetectionTask(model_manifest(input_size=64))
    frame = np.zeros((48, 64, 3), np.uint8)
    assert not task.u8_input and task.preprocess(frame, 'bgr8', size)[0].dtype == np.float32
    task.u8_input = True
    assert task.preprocess(frame, 'bgr8', size)[0].dtype == np.uint8


def test_prepare_rejects_non_colour() -> None:
    with pytest.raises(ImageConversionError, match='8-bit'):
        prepare(np.zeros((8, 8, 3), np.uint16), 'bgr8', (32, 32), Preprocessing())
    with pytest.raises(ImageConversionError, match="encoding '16UC1' cannot feed"):
        prepare(np.zeros((8, 8), np.uint8), '16UC1', (32, 32), Preprocessing())


def _synthetic_output() -> np.ndarray:
    """(1, 4 + 3, 6) YOLOv8-style output built by hand."""
    anchors = [
        # (cx, cy, w, h), (score class 0, 1, 2)
        ((50, 50, 20, 10), (0.9, 0.6, 0.0)),    # kept: class 0
        ((52, 50, 20, 10), (0.8, 0.0, 0.1)),    # class 0, IoU 0.818 with the first
        ((52, 50, 20, 10), (0.0, 0.7, 0.0)),    # same box, class 1: kept
        ((200, 100, 40, 40), (0.0, 0.0, 0.25)),  # exactly at the threshold: dropped
        ((200, 100, 40, 40), (0.0, 0.0, 0.26)),  # just above: kept
        ((10, 10, 4, 4), (0.1, 0.1, 0.1)),      # below
    ]
    out = np.zeros((1, 7, len(anchors)), np.float32)
    for a, (box, scores) in enumerate(anchors):
        out[0, :4, a] = box
        out[0, 4:, a] = scores
    return out


def test_decode_synthetic() -> None:
    dets = decode(_synthetic_output(), DetectionParams(confidence=0.25, iou=0.45))
    np.testing.assert_allclose(dets.boxes, [[40, 45, 60, 55], [42, 45, 62, 55],
                                            [180, 80, 220, 120]])
    np.testing.assert_allclose(dets.scores, [0.9, 0.7, 0.26], rtol=1e-6)
    np.testing.assert_array_equal(dets.class_ids, [0, 1, 2])
    assert dets.boxes.dtype == np.float32 and dets.class_ids.dtype == np.int64
    assert len(dets) == 3


def test_decode_iou_threshold_and_max_detections() -> None:
    loose = decode(_synthetic_output(), DetectionParams(confidence=0.25, iou=0.9))
    np.testing.assert_allclose(loose.scores, [0.9, 0.8, 0.7, 0.26], rtol=1e-6)
    np.testing.assert_array_equal(loose.class_ids, [0, 0, 1, 2])
    cut = decode(_synthetic_output(), DetectionParams(confidence=0.25, iou=0.45,
                                                      max_detections=2))
    np.testing.assert_allclose(cut.scores, [0.9, 0.7], rtol=1e-6)
    high = decode(_synthetic_output(), DetectionParams(confidence=0.85))
    np.testing.assert_array_equal(high.class_ids, [0])


def test_decode_2d_output_and_extra_channels() -> None:
    out = _synthetic_output()[0]
    extra = np.full((2, out.shape[1]), 5.0, np.float32)  # e.g. mask coefficients
    dets = decode(np.concatenate([out, extra]), DetectionParams(), num_classes=3)
    np.testing.assert_array_equal(dets.class_ids, [0, 1, 2])


def test_decode_empty() -> None:
    out = np.zeros((1, 84, 100), np.float32)
    dets = decode(out, DetectionParams())
    assert len(dets) == 0
    assert dets.boxes.shape == (0, 4)
    with pytest.raises(ValueError, match='no class scores'):
        decode(np.zeros((1, 4, 10), np.float32), DetectionParams())


@pytest.mark.parametrize('seed', [0, 1, 2])
def test_decode_matches_torchvision_batched_nms(seed: int) -> None:
    rng = np.random.default_rng(seed)
    nc, anchors = 5, 800
    out = np.empty((1, 4 + nc, anchors), np.float32)
    out[0, 0:2] = rng.uniform(0, 320, (2, anchors))
    out[0, 2:4] = rng.uniform(10, 120, (2, anchors))
    out[0, 4:] = rng.uniform(0, 1, (nc, anchors)) ** 3
    params = DetectionParams(confidence=0.2, iou=0.5, max_detections=50)
    dets = decode(out, params)

    pred = torch.from_numpy(out[0])
    scores, classes = pred[4:].max(dim=0)
    mask = scores > params.confidence
    boxes = torchvision.ops.box_convert(pred[:4, mask].T, 'cxcywh', 'xyxy')
    keep = torchvision.ops.batched_nms(boxes, scores[mask], classes[mask], params.iou)
    keep = keep[:params.max_detections]
    assert len(dets) == params.max_detections
    np.testing.assert_allclose(dets.boxes, boxes[keep].numpy(), rtol=1e-6, atol=1e-4)
    np.testing.assert_array_equal(dets.scores, scores[mask][keep].numpy())
    np.testing.assert_array_equal(dets.class_ids, classes[mask][keep].numpy())


def test_postprocess_maps_to_source_pixels() -> None:
    task = DetectionTask(model_manifest(input_size=64))
    tensor, meta = task.preprocess(_square_image(), 'bgr8')
    assert tensor.shape == (1, 3, 64, 64)
    out = np.zeros((1, 5, 1), np.float32)
    out[0, :, 0] = (32, 32, 32, 16, 0.9)  # the red square in network pixels
    dets = task.postprocess([out], meta, DetectionParams())
    np.testing.assert_allclose(dets.boxes, [[50, 25, 150, 75]], rtol=1e-5)


def _random_boxes(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    xy = rng.uniform(0, 200, (n, 2))
    wh = rng.uniform(5, 80, (n, 2))
    boxes = np.concatenate([xy, xy + wh], axis=1).astype(np.float32)
    scores = ((rng.permutation(n) + 1) / n).astype(np.float32)  # distinct: no tie ordering
    return boxes, scores


@pytest.mark.parametrize('iou', [0.3, 0.5, 0.7])
@pytest.mark.parametrize('seed', [0, 1, 2, 3, 4])
def test_nms_matches_torchvision(seed: int, iou: float) -> None:
    boxes, scores = _random_boxes(np.random.default_rng(seed), 300)
    keep = nms(boxes, scores, iou)
    ref = torchvision.ops.nms(torch.from_numpy(boxes), torch.from_numpy(scores), iou)
    assert keep.dtype == np.int64
    assert 0 < len(keep) < 300
    np.testing.assert_array_equal(keep, ref.numpy())


def test_nms_matches_torchvision_large() -> None:
    boxes, scores = _random_boxes(np.random.default_rng(42), 2000)
    keep = nms(boxes, scores, 0.45)
    ref = torchvision.ops.nms(torch.from_numpy(boxes), torch.from_numpy(scores), 0.45)
    np.testing.assert_array_equal(keep, ref.numpy())


@pytest.mark.parametrize('chunk', [1, 7, 64])
def test_chunked_nms_is_exact_and_stops_early(chunk: int) -> None:
    """Score-ordered chunks (any size) give torchvision's result; max_keep cuts it exactly."""
    boxes, scores = _random_boxes(np.random.default_rng(7), 700)
    ref = torchvision.ops.nms(torch.from_numpy(boxes), torch.from_numpy(scores), 0.5).numpy()
    np.testing.assert_array_equal(nms(boxes, scores, 0.5, chunk=chunk), ref)
    np.testing.assert_array_equal(nms(boxes, scores, 0.5, max_keep=5, chunk=chunk), ref[:5])


def test_decode_of_a_candidate_flood_respects_max_detections() -> None:
    """Thousands of low-confidence candidates: exactly max_detections come out, best first."""
    pred = np.random.default_rng(3).random((1, 84, 8400)).astype(np.float32) * 0.3
    pred[:, :4] *= 2000
    dets = decode(pred, DetectionParams(confidence=0.01, iou=0.45, max_detections=50))
    assert len(dets) == 50
    assert np.all(np.diff(dets.scores) <= 0)


def test_nms_chain_is_greedy() -> None:
    # Seven 10x10 boxes, each shifted 5 px: neighbours have IoU 1/3, others 0.
    # Greedy keeps 0, 2, 4, 6 (a suppressed box suppresses nothing).
    boxes = np.array([[5 * i, 0, 5 * i + 10, 10] for i in range(7)], np.float32)
    scores = np.linspace(0.9, 0.3, 7).astype(np.float32)
    np.testing.assert_array_equal(nms(boxes, scores, 0.3), [0, 2, 4, 6])
    np.testing.assert_array_equal(nms(boxes, scores, 0.34), np.arange(7))
    # Reversed scores: order follows the score.
    np.testing.assert_array_equal(nms(boxes, scores[::-1].copy(), 0.3), [6, 4, 2, 0])


def test_nms_empty() -> None:
    keep = nms(np.zeros((0, 4), np.float32), np.zeros(0, np.float32), 0.5)
    assert keep.shape == (0,)
    assert keep.dtype == np.int64
