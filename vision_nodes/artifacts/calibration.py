"""int8 calibration images: one set for OpenVINO and TensorRT, listed, checked and read alike.

The images are preprocessed by a :class:`Preprocessor` the caller makes from the model's own
task (``artifacts/`` never imports ``tasks/``): the same function frames go through, at the
rect shape computed with the manifest's stride when the backend calibrates at rect shapes.

A calibration folder (``calibration_dir``) is untrusted input like a camera: it may hold a
30000 x 30000 PNG, a FIFO, a link to ``/dev/zero``, or a million files. So:

* a folder of more than ``MAX_CALIBRATION_FILES`` entries is refused (it is listed once,
  without stopping at each entry);
* at most ``MAX_CALIBRATION_IMAGES`` are used, spread evenly over the sorted names;
* each is read as camera frames are bounded: a regular file (:mod:`..files`) of at most
  ``MAX_IMAGE_BYTES``, JPEG or PNG, whose header (:func:`..decode.read_header`) shows at most
  ``MAX_IMAGE_PIXELS``, before anything is decoded. Files failing that are skipped and
  counted, with one warning line; a folder left with none is refused.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from ..image_codecs import read_header
from ..files import read_regular
from ..images import ImageConversionError
from ..limits import MAX_CALIBRATION_FILES, MAX_CALIBRATION_IMAGES, MAX_IMAGE_BYTES
from ..text import clip, show_path

#: File names taken for calibration images (others, such as notes, are not looked at).
#: Only JPEG and PNG are decoded: other images are skipped, with the reason.
IMAGE_SUFFIXES = ('.jpg', '.jpeg', '.png', '.bmp', '.webp', '.tif', '.tiff')

Log = Callable[[str], None]


class CalibrationError(ValueError):
    """A calibration folder or image that cannot be used; the message names it and the fix."""


@dataclass(frozen=True)
class CalibrationSet:
    """The images of a calibration folder that are used, and their content hash."""

    folder: Path
    images: tuple[Path, ...]
    #: SHA-256 over every used image's name and content: the cache key's view of the set.
    sha256: str
    #: Image files passed over (not regular files, beyond the bounds, not JPEG or PNG).
    skipped: int = 0

    def tensors(self, preprocessor: 'Preprocessor', rect: bool = False, u8: bool = False
                ) -> Iterator[np.ndarray]:
        """Yield each image as the network input a frame like it gets (see ``Preprocessor``).

        ``u8``: the letterboxed u8 image, for a network with the pre-processing embedded.
        """
        for path in self.images:
            yield preprocessor.tensor(path, rect, u8)


@dataclass(frozen=True)
class Preprocessor:
    """How a model turns a calibration image into its network input, made by the caller.

    ``prepare`` is the model's task preprocessing (8-bit BGR image, (height, width) → NCHW
    float32); ``rect_shape`` maps a source (height, width) to the rect input shape a frame
    like it runs at, computed with the manifest's stride. ``prepare_u8`` is the same task
    handing the letterboxed u8 (1, H, W, 3) image instead, for a network that does the rest
    itself (None where the task cannot).
    """

    prepare: Callable[[np.ndarray, tuple[int, int]], np.ndarray]
    rect_shape: Callable[[tuple[int, int]], tuple[int, int]]
    input_size: tuple[int, int]
    prepare_u8: Callable[[np.ndarray, tuple[int, int]], np.ndarray] | None = None

    def tensor(self, path: Path, rect: bool = False, u8: bool = False) -> np.ndarray:
        """One calibration image, checked and decoded, as the network input (rect if asked).

        ``u8``: the letterboxed u8 image, for a network with the pre-processing embedded.
        """
        prepare = self.prepare_u8 if u8 else self.prepare
        if prepare is None:
            raise CalibrationError("the model's task cannot hand the u8 image a network with "
                                   'the pre-processing embedded calibrates on')
        image = calibration_image(path)
        shape = self.rect_shape(image.shape[:2]) if rect else tuple(self.input_size)
        return prepare(image, (int(shape[0]), int(shape[1])))


def _candidates(folder: Path) -> list[Path]:
    """Image files of ``folder`` by name, refusing a folder of too many entries."""
    names = []
    try:
        with os.scandir(folder) as entries:
            for count, entry in enumerate(entries, 1):
                if count > MAX_CALIBRATION_FILES:
                    raise CalibrationError(
                        f"calibration_dir {show_path(folder)} holds more than "
                        f'{MAX_CALIBRATION_FILES} files: give it a folder of typical frames '
                        f'(at most {MAX_CALIBRATION_IMAGES} are used)')
                if os.path.splitext(entry.name)[1].lower() in IMAGE_SUFFIXES:
                    names.append(entry.name)
    except OSError as exc:
        raise CalibrationError(f"calibration_dir {show_path(folder)} cannot be listed: "
                               f'{clip(exc.strerror or exc)}') from None
    return [folder / name for name in sorted(names)]


def read_calibration_image(path: Path) -> bytes:
    """Return one calibration image's bytes, checked like a camera frame; nothing decoded."""
    data = read_regular(path, MAX_IMAGE_BYTES, 'calibration image', CalibrationError)
    try:
        read_header(data)
    except ImageConversionError as exc:
        raise CalibrationError(f'{clip(path)}: {exc}') from None
    return data


def calibration_set(folder: str | Path, limit: int = MAX_CALIBRATION_IMAGES,
                    log: Log | None = None) -> CalibrationSet:
    """List, check and hash the calibration images in ``folder`` (see the module's rules).

    ``log`` gets one line when files were skipped. Raises :class:`CalibrationError` for an
    empty setting, a missing or oversized folder, or one without a usable image.
    """
    if not str(folder).strip():
        raise CalibrationError('int8 needs calibration images: set `calibration_dir` (node '
                               'parameter or manifest field) to a folder of typical frames')
    path = Path(folder).expanduser()
    if not path.is_dir():
        raise CalibrationError(f"calibration_dir {show_path(path)} is not a folder")
    chosen = _candidates(path)
    if not chosen:
        raise CalibrationError(f"calibration_dir {show_path(path)} holds no images "
                               f"({', '.join(IMAGE_SUFFIXES)})")
    if len(chosen) > limit:
        step = len(chosen) / limit
        chosen = [chosen[int(i * step)] for i in range(limit)]
    digest = hashlib.sha256()
    images, skipped = [], []
    for image in chosen:
        try:
            data = read_calibration_image(image)
        except CalibrationError as exc:
            skipped.append(str(exc))
            continue
        digest.update(image.name.encode() + b'\0')
        digest.update(hashlib.sha256(data).digest())
        images.append(image)
    if not images:
        raise CalibrationError(f"calibration_dir {show_path(path)} holds no usable image: all "
                               f'{len(chosen)} were skipped (first: {clip(skipped[0], 300)})')
    if skipped and log is not None:
        log(f"warning: calibration_dir {show_path(path)}: skipped {len(skipped)} of "
            f'{len(chosen)} image files, which are not used (first: {clip(skipped[0], 300)})')
    return CalibrationSet(path, tuple(images), digest.hexdigest(), len(skipped))


def calibration_image(path: Path) -> np.ndarray:
    """Decode one calibration image to 8-bit BGR (as ``cv2.imread`` does), after the checks."""
    import cv2

    data = read_calibration_image(path)
    image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if image is None:
        raise CalibrationError(f"calibration image {show_path(path)} cannot be decoded: remove "
                               'it from calibration_dir')
    return image
