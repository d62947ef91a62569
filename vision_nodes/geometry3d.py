"""3D boxes from 2D detections, an aligned depth map and the camera's intrinsics. ROS-free.

For each detection the depth is a robust statistic of the valid depths (finite, > 0) inside
its instance mask when there is one, else inside the central part of its box (the box's
middle half each way, which holds the object rather than what lies around it): their
median (over an even sample of a large region's depths). The centre is the box centre
back-projected at that depth with K (a pinhole camera: lens distortion is ignored, so use
rectified images or accept the error near the edges); the width and height are the box's,
back-projected at that depth; the depth extent is the range between the 10th and the 90th
percentile of the valid depths. Coordinates are the camera's
optical frame (x right, y down, z forward), in metres. A detection with too few valid depths
is left out (and counted by the caller). K is read from camera_info checked for the image
(:meth:`Intrinsics.for_image`: a camera_info of another size rescaled only when it has the
image's aspect ratio, focal lengths in a range where back-projection stays finite, the
principal point inside the image), and a box that is still not finite is left out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: The central part of a box whose depths are used without a mask (fraction of each side).
CORE_FRACTION = 0.5
#: A detection needs at least this many valid depth pixels, and this share of its region.
MIN_VALID_PIXELS = 4
MIN_VALID_SHARE = 0.1
#: Percentiles whose distance is the depth extent.
EXTENT_PERCENTILES = (10.0, 90.0)
#: The statistics of a large region are taken over an even sample of at least this many of
#: its depths (a box's core: a grid of its pixels; a mask: its valid depths): they hardly
#: move, and the cost stays flat whatever the size of the box.
MAX_SAMPLES = 4096
#: Focal lengths accepted, in multiples of the image's larger side: below, the field of view
#: is all but 180 degrees, which a pinhole K cannot describe, and back-projection overflows
#: as f -> 0 (a denormal fx gave infinite boxes); above, it is thousandths of a degree.
FOCAL_RANGE = (1e-3, 1e4)


class IntrinsicsError(ValueError):
    """A camera matrix 3D boxes cannot be computed with (one line).

    ``rule`` names the rule it breaks ('k', 'aspect', 'focal', 'principal point'), so a caller
    can say each once, whatever numbers the line quotes.
    """

    def __init__(self, text: str, rule: str = 'k') -> None:
        super().__init__(text)
        self.rule = rule


@dataclass(frozen=True)
class Intrinsics:
    """Pinhole intrinsics of the colour image, in its pixels (``K`` of CameraInfo)."""

    fx: float
    fy: float
    cx: float
    cy: float

    @classmethod
    def from_k(cls, k: np.ndarray | list) -> 'Intrinsics':
        """Read a row-major 3x3 ``K``; refuse one without positive finite focal lengths."""
        values = np.asarray(k, dtype=np.float64).reshape(-1)
        if values.shape[0] != 9 or not np.all(np.isfinite(values)):
            raise IntrinsicsError('camera_info K is not 9 finite numbers')
        if values[0] <= 0 or values[4] <= 0:
            raise IntrinsicsError('camera_info K has no focal length (fx, fy must be > 0; an '
                                  'uncalibrated camera sends K all zero): calibrate the camera '
                                  'or publish its intrinsics on camera_info')
        return cls(float(values[0]), float(values[4]), float(values[2]), float(values[5]))

    @classmethod
    def for_image(cls, k: np.ndarray | list, info_size: tuple[int, int],
                  image_shape: tuple[int, int]) -> 'Intrinsics':
        """K of a camera_info of ``info_size`` (width, height; 0 = unknown) for an image.

        ``image_shape`` is the image's (height, width). A camera_info of another size with the
        image's aspect ratio (to within the rounding of either size) is rescaled to it; one of
        another aspect ratio is refused, as stretching K unevenly would put every 3D box in
        the wrong place. The result must have focal lengths within :data:`FOCAL_RANGE` and its
        principal point inside the image (:meth:`check_for`). Raises IntrinsicsError in one
        line.
        """
        intrinsics = cls.from_k(k)
        width, height = (int(v) for v in info_size)
        rows, cols = (int(v) for v in image_shape)
        if width and height and (height, width) != (rows, cols):
            sx, sy = cols / width, rows / height
            if abs(sx / sy - 1) > 0.5 * (1 / width + 1 / height + 1 / cols + 1 / rows):
                raise IntrinsicsError(
                    f'camera_info is {width}x{height} but the image is {cols}x{rows}, another '
                    f'aspect ratio ({width / height:.4g} against {cols / rows:.4g}): its K '
                    'cannot be rescaled to the image; publish the camera_info of these images',
                    'aspect')
            intrinsics = cls(intrinsics.fx * sx, intrinsics.fy * sy,
                             (intrinsics.cx + 0.5) * sx - 0.5, (intrinsics.cy + 0.5) * sy - 0.5)
        intrinsics.check_for((rows, cols))
        return intrinsics

    def check_for(self, image_shape: tuple[int, int]) -> None:
        """Refuse (IntrinsicsError, one line) a K whose 3D boxes on this image would be wrong.

        The focal lengths must be within :data:`FOCAL_RANGE` times the image's larger side
        (so the back-projection of every pixel is finite), the principal point inside the
        image (pixel-centre coordinates: -0.5 to width - 0.5).
        """
        rows, cols = image_shape
        side = max(rows, cols)
        low, high = FOCAL_RANGE[0] * side, FOCAL_RANGE[1] * side
        if not (low <= self.fx <= high and low <= self.fy <= high):
            raise IntrinsicsError(
                f'camera_info K has fx {self.fx:.6g}, fy {self.fy:.6g} (image pixels), outside '
                f'[{low:.6g}, {high:.6g}] ({FOCAL_RANGE[0]:g} to {FOCAL_RANGE[1]:g} times the '
                f"image's larger side, {side} px), where 3D boxes would not be finite or "
                "right: publish the camera's calibrated K", 'focal')
        if not (-0.5 <= self.cx <= cols - 0.5 and -0.5 <= self.cy <= rows - 0.5):
            raise IntrinsicsError(
                f'camera_info K has its principal point (cx {self.cx:.6g}, cy {self.cy:.6g}, '
                f'image pixels) outside the {cols}x{rows} image: publish the camera\'s '
                'calibrated K', 'principal point')


@dataclass
class Boxes3D:
    """3D boxes of the detections that had enough depth."""

    #: Indices of those detections in the 2D detections.
    index: np.ndarray     # (M,) int64
    centers: np.ndarray   # (M, 3) float64 metres, optical frame
    sizes: np.ndarray     # (M, 3) float64 metres (x, y, z extents)

    def __len__(self) -> int:
        return int(self.index.shape[0])


def _region(box: np.ndarray, scale: tuple[float, float], shape: tuple[int, int],
            fraction: float) -> tuple[int, int, int, int]:
    """Pixel rows/columns [y0, y1) x [x0, x1) of a box's central ``fraction`` in the depth map."""
    x1, y1, x2, y2 = (float(v) for v in box)
    sx, sy = scale
    cx, cy, hw, hh = (x1 + x2) / 2, (y1 + y2) / 2, (x2 - x1) * fraction / 2, \
        (y2 - y1) * fraction / 2
    x0, x1_ = int(np.floor((cx - hw) * sx)), int(np.ceil((cx + hw) * sx))
    y0, y1_ = int(np.floor((cy - hh) * sy)), int(np.ceil((cy + hh) * sy))
    h, w = shape
    x0, y0 = min(max(x0, 0), w), min(max(y0, 0), h)
    x1_, y1_ = min(max(x1_, x0 + 1), w), min(max(y1_, y0 + 1), h)
    return y0, y1_, x0, x1_


def _percentiles(values: np.ndarray, qs: tuple[float, ...]) -> np.ndarray:
    """``np.percentile(values, qs)`` (its default, linear method), by one sort.

    NumPy's sort of a few thousand float32 values is SIMD-vectorised and several times faster
    than its ``partition`` and ``percentile`` on them, and than its sort of 16-bit integers
    (bench_track3d's 3D steps: docs/benchmarks.md).
    """
    n = values.shape[0]
    at = (n - 1) * np.asarray(qs, dtype=np.float64) / 100.0
    lo = np.floor(at).astype(np.int64)
    hi = np.minimum(lo + 1, n - 1)
    ordered = np.sort(values.astype(np.float32, copy=False))  # exact for 16-bit depths
    a, b = ordered[lo].astype(np.float64), ordered[hi].astype(np.float64)
    return a + (b - a) * (at - lo)


def boxes_3d(boxes_xyxy: np.ndarray, depth: np.ndarray, k: Intrinsics,
             image_shape: tuple[int, int], labels: np.ndarray | None = None,
             depth_scale: float = 1.0) -> Boxes3D:
    """Compute the 3D boxes of detections from a depth map aligned with their image.

    ``boxes_xyxy`` are in the colour image's pixels (``image_shape`` (height, width)); the depth
    map (metres, NaN / 0 / inf where there is no return) may have another resolution and is
    sampled proportionally; ``depth_scale`` turns its values into metres (0.001 for a 16UC1
    image in millimetres, read as it is). ``labels`` (optional, the depth map's size; another
    size is not used) is an instance label image: pixel = 1 + the index of the detection it
    belongs to, 0 = none.
    """
    boxes = np.asarray(boxes_xyxy, dtype=np.float64).reshape(-1, 4)
    shape = (int(depth.shape[0]), int(depth.shape[1]))
    scale = (shape[1] / image_shape[1], shape[0] / image_shape[0])
    if labels is not None and labels.shape[:2] != shape:
        labels = None  # a mask of another size than the depth: fall back to the box core
    keep, zs, extents = [], [], []
    for i, box in enumerate(boxes):
        full = labels is not None
        y0, y1, x0, x1 = _region(box, scale, shape, 1.0 if full else CORE_FRACTION)
        if full:  # every pixel of the mask: a thin one must not fall between grid lines
            values = depth[y0:y1, x0:x1][labels[y0:y1, x0:x1] == i + 1]
        else:  # an even grid over the box's core, of at least MAX_SAMPLES pixels
            step = max(1, int(np.sqrt((y1 - y0) * (x1 - x0) / MAX_SAMPLES)))
            values = depth[y0:y1:step, x0:x1:step].reshape(-1)
        region = values.shape[0]
        valid = values[(values > 0) & (values < np.inf)] if values.dtype.kind == 'f' \
            else values[values > 0]  # NaN compares False; integer depths have no inf
        if valid.shape[0] < max(MIN_VALID_PIXELS, MIN_VALID_SHARE * region):
            continue
        if valid.shape[0] > 2 * MAX_SAMPLES:
            valid = valid[::valid.shape[0] // MAX_SAMPLES]
        low, mid, high = _percentiles(valid, (EXTENT_PERCENTILES[0], 50.0,
                                              EXTENT_PERCENTILES[1])) * depth_scale
        keep.append(i)
        zs.append(mid)
        extents.append(high - low)
    index = np.asarray(keep, dtype=np.int64)
    z = np.asarray(zs, dtype=np.float64)
    kept = boxes[index]
    # Box edges are pixel boundaries; K's principal point is in pixel-centre coordinates.
    u = (kept[:, 0] + kept[:, 2]) / 2 - 0.5
    v = (kept[:, 1] + kept[:, 3]) / 2 - 0.5
    with np.errstate(over='ignore', invalid='ignore'):  # what overflows is left out below
        centers = np.stack([(u - k.cx) * z / k.fx, (v - k.cy) * z / k.fy, z], axis=1)
        sizes = np.stack([(kept[:, 2] - kept[:, 0]) * z / k.fx,
                          (kept[:, 3] - kept[:, 1]) * z / k.fy, np.asarray(extents)], axis=1)
    centers, sizes = centers.reshape(-1, 3), sizes.reshape(-1, 3)
    # A box that is not finite is left out, not published (a K checked with check_for and
    # finite depths give none).
    finite = np.isfinite(centers).all(axis=1) & np.isfinite(sizes).all(axis=1)
    if not finite.all():
        index, centers, sizes = index[finite], centers[finite], sizes[finite]
    return Boxes3D(index, centers, sizes)
