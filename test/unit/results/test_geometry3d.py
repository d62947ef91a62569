"""3D boxes from depth and K (vision_nodes/geometry3d.py) against analytic values.

A synthetic scene rendered with a known pinhole K: a wall far away and boxes in front of it
(fronto-parallel faces, and one slanted), so each object's centre, size and depth extent are
known exactly; results must be within 5 cm.
"""

from __future__ import annotations

import numpy as np
import pytest

from vision_nodes.geometry3d import Intrinsics, IntrinsicsError, _percentiles, boxes_3d

H, W = 480, 640
K = Intrinsics(fx=525.0, fy=520.0, cx=319.5, cy=239.5)


def project(x: float, y: float, z: float) -> tuple[float, float]:
    """Pixel-centre coordinates of a 3D point."""
    return K.fx * x / z + K.cx, K.fy * y / z + K.cy


def scene(objects):
    """Depth map (wall at 8 m) with each object's face painted; its 2D box in edge coords."""
    depth = np.full((H, W), 8.0, np.float32)
    boxes = []
    for (x, y, z, sx, sy, slope) in objects:
        u1, v1 = project(x - sx / 2, y - sy / 2, z)
        u2, v2 = project(x + sx / 2, y + sy / 2, z)
        box = np.array([u1 + 0.5, v1 + 0.5, u2 + 0.5, v2 + 0.5])  # pixel edges
        c0, r0, c1, r1 = (int(round(b)) for b in box)
        cols = np.arange(c0, c1)
        # depth varying linearly left to right: z - slope/2 .. z + slope/2
        ramp = z + slope * ((cols - c0) / max(1, c1 - c0 - 1) - 0.5)
        depth[r0:r1, c0:c1] = ramp[None, :]
        boxes.append(box)
    return depth, np.array(boxes, np.float32)


OBJECTS = [(0.0, 0.0, 2.0, 0.6, 0.9, 0.0), (-1.0, 0.3, 3.5, 0.5, 0.5, 0.0),
           (0.5, -0.4, 1.5, 0.3, 0.4, 0.4)]


def test_centres_and_sizes_within_5_cm():
    depth, boxes = scene(OBJECTS)
    out = boxes_3d(boxes, depth, K, (H, W))
    assert out.index.tolist() == [0, 1, 2]
    for (x, y, z, sx, sy, slope), centre, size in zip(OBJECTS, out.centers, out.sizes):
        assert centre == pytest.approx([x, y, z], abs=0.05)
        # the core half of a ramp spans half of it: 10..90 % of that
        assert size == pytest.approx([sx, sy, slope * 0.5 * 0.8], abs=0.05)


def test_holes_are_ignored_and_too_little_depth_is_left_out():
    depth, boxes = scene(OBJECTS)
    x1, y1, x2, y2 = boxes[0].astype(int)
    depth[y1:y2:2, x1:x2] = np.nan  # half the rows: no return (NaN)
    depth[y1 + 1:y2:4, x1:x2] = 0.0  # a quarter more: no return (0)
    x1, y1, x2, y2 = boxes[1].astype(int)
    depth[y1 - 2:y2 + 2, x1 - 2:x2 + 2] = np.nan  # nothing at all
    out = boxes_3d(boxes, depth, K, (H, W))
    assert out.index.tolist() == [0, 2]
    assert out.centers[0] == pytest.approx([0.0, 0.0, 2.0], abs=0.05)


def test_a_mask_selects_the_object_pixels():
    depth, boxes = scene(OBJECTS[:1])
    # The box is twice as wide as the object: its core half sees the wall on one side.
    wide = boxes.copy()
    wide[0, 2] += wide[0, 2] - wide[0, 0]
    labels = np.zeros((H, W), np.uint16)
    x1, y1, x2, y2 = boxes[0].astype(int)
    labels[y1:y2, x1:x2] = 1
    with_mask = boxes_3d(wide, depth, K, (H, W), labels)
    assert with_mask.centers[0][2] == pytest.approx(2.0, abs=0.01)
    assert with_mask.sizes[0][2] == pytest.approx(0.0, abs=0.01)


def test_depth_of_another_resolution_is_sampled_proportionally():
    depth, boxes = scene(OBJECTS)
    half = depth[::2, ::2]
    out = boxes_3d(boxes, half, K, (H, W))
    for (x, y, z, *_), centre in zip(OBJECTS, out.centers):
        assert centre == pytest.approx([x, y, z], abs=0.05)


def test_boxes_outside_the_image_and_no_detections():
    depth, _ = scene([])
    out = boxes_3d(np.array([[700, 500, 800, 600], [-50, -50, -10, -10]], np.float32), depth,
                   K, (H, W))
    assert len(out) == 0 and out.centers.shape == (0, 3)
    assert len(boxes_3d(np.zeros((0, 4)), depth, K, (H, W))) == 0


@pytest.mark.parametrize('k, words', [([0.0] * 9, 'K all zero'), ([1.0] * 8, '9 finite'),
                                      ([500, 0, 1, 0, float('nan'), 1, 0, 0, 1], '9 finite')])
def test_unusable_intrinsics_are_refused_in_one_line(k, words):
    with pytest.raises(IntrinsicsError, match=words):
        Intrinsics.from_k(k)


def _k(fx: float, fy: float, cx: float, cy: float) -> list[float]:
    return [fx, 0.0, cx, 0.0, fy, cy, 0.0, 0.0, 1.0]


def test_a_camera_info_of_the_images_aspect_ratio_is_rescaled_another_refused():
    """640x480 K for 1280x960 images is doubled (pixel-centre principal point); for 810x1080
    images (x1.27, x2.25) it is refused in one line naming both sizes, not stretched."""
    k = _k(525.0, 520.0, 319.5, 239.5)
    doubled = Intrinsics.for_image(k, (640, 480), (960, 1280))
    assert (doubled.fx, doubled.fy, doubled.cx, doubled.cy) == (1050.0, 1040.0, 639.5, 479.5)
    assert Intrinsics.for_image(k, (640, 480), (480, 640)) == Intrinsics(525.0, 520.0, 319.5,
                                                                         239.5)
    assert Intrinsics.for_image(k, (0, 0), (480, 640)).fx == 525.0  # size unknown: as it is
    # Sizes rounded to whole pixels keep their aspect ratio: 1280x720 shown at 853x480.
    wide = Intrinsics.for_image(_k(900.0, 900.0, 639.5, 359.5), (1280, 720), (480, 853))
    assert wide.fx == pytest.approx(900.0 * 853 / 1280) and wide.fy == pytest.approx(600.0)
    for size, shape in [((640, 480), (1080, 810)), ((1920, 1080), (1088, 1920))]:
        with pytest.raises(IntrinsicsError) as info:
            Intrinsics.for_image(k, size, shape)
        text = str(info.value)
        assert '\n' not in text and 'another aspect ratio' in text and info.value.rule == 'aspect'
        assert f'{size[0]}x{size[1]}' in text and f'{shape[1]}x{shape[0]}' in text


@pytest.mark.parametrize('k, words', [
    (_k(5e-324, 5e-324, 319.5, 239.5), 'fx 4.94066e-324'),  # a denormal: inf boxes before
    (_k(0.1, 0.1, 319.5, 239.5), 'outside [0.64, 6.4e+06]'),
    (_k(1e9, 1e9, 319.5, 239.5), 'outside [0.64, 6.4e+06]'),
    (_k(525.0, 5e-300, 319.5, 239.5), 'fy 5e-300'),
    (_k(525.0, 520.0, 700.0, 239.5), 'principal point (cx 700'),
    (_k(525.0, 520.0, 319.5, -3.0), 'principal point'),
])
def test_focal_lengths_out_of_range_and_a_principal_point_outside_are_refused(k, words):
    with pytest.raises(IntrinsicsError) as info:
        Intrinsics.for_image(k, (640, 480), (H, W))
    assert words in str(info.value) and '\n' not in str(info.value)
    assert info.value.rule == ('principal point' if 'principal' in words else 'focal')


def test_3d_boxes_are_finite_even_with_a_denormal_focal_length():
    """boxes_3d given K as it is (unchecked) leaves out what would not be finite."""
    depth, boxes = scene(OBJECTS)
    out = boxes_3d(boxes, depth, Intrinsics(5e-324, 5e-324, 319.5, 239.5), (H, W))
    assert np.isfinite(out.centers).all() and np.isfinite(out.sizes).all()
    assert out.centers.shape == (len(out), 3) and out.sizes.shape == (len(out), 3)
    near = boxes_3d(boxes, depth, Intrinsics(0.64, 0.64, 0.0, 0.0), (H, W))  # the lowest
    assert len(near) == len(OBJECTS) and np.isfinite(near.centers).all()


@pytest.mark.parametrize('dtype', [np.float32, np.uint16])  # 32FC1 metres, 16UC1 mm
@pytest.mark.parametrize('n', [1, 2, 3, 10, 101, 4096, 9000])
def test_percentiles_by_one_sort_equal_numpys(n, dtype):
    values = np.random.default_rng(n).uniform(300, 9000, n).astype(dtype)
    qs = (10.0, 50.0, 90.0)
    np.testing.assert_allclose(_percentiles(values, qs),
                               np.percentile(values.astype(np.float64), qs), rtol=1e-12)


@pytest.mark.parametrize('with_mask', [False, True])
def test_a_large_box_is_read_on_a_grid_with_the_whole_regions_statistics(with_mask):
    # A 1080p depth map of noisy depths around 4 m with holes; one box covers most of it.
    rng = np.random.default_rng(7)
    depth = rng.normal(4.0, 0.5, (1080, 1920)).astype(np.float32)
    depth[rng.random(depth.shape) < 0.2] = np.nan
    box = np.array([[100.0, 50.0, 1800.0, 1030.0]])
    labels = np.zeros(depth.shape, np.uint16)
    labels[50:1030, 100:1800] = 1
    k = Intrinsics(1000.0, 1000.0, 959.5, 539.5)
    got = boxes_3d(box, depth, k, depth.shape, labels=labels if with_mask else None)
    y0, y1, x0, x1 = (50, 1030, 100, 1800) if with_mask else (295, 785, 525, 1375)
    region = depth[y0:y1, x0:x1]
    region = region[np.isfinite(region)].astype(np.float64)
    assert got.index.tolist() == [0]
    # An even sample of >= 4096 depths: its median and 10-90 % range within a few standard
    # errors of the whole region's, far inside the 5 cm the 3D boxes are held to.
    assert got.centers[0, 2] == pytest.approx(np.median(region), abs=0.04)
    low, high = np.percentile(region, (10, 90))
    assert got.sizes[0, 2] == pytest.approx(high - low, abs=0.05)


def test_a_mask_one_pixel_wide_in_a_large_box_is_read_whole():
    # A cable: a 1-px column at 2 m in front of a 6 m wall; its box is large, its mask thin.
    depth = np.full((1080, 1920), 6.0, np.float32)
    labels = np.zeros(depth.shape, np.uint16)
    depth[100:1000, 777] = 2.0
    labels[100:1000, 777] = 1
    box = np.array([[200.0, 100.0, 1700.0, 1000.0]])
    got = boxes_3d(box, depth, Intrinsics(1000.0, 1000.0, 959.5, 539.5), depth.shape,
                   labels=labels)
    assert got.index.tolist() == [0]
    assert got.centers[0, 2] == pytest.approx(2.0)
