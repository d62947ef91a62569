"""The images a reduced precision is measured on against fp32 (:mod:`..precision_check`).

In this order: the manifest's ``validation_dir``; else the calibration folder (the node's
``calibration_dir`` or the manifest's), when it holds at least :data:`MIN_VALIDATION_IMAGES`
usable images; else the default set: :data:`MIN_VALIDATION_IMAGES` real photographs that
installed packages ship (Ultralytics' ``bus.jpg`` and ``zidane.jpg``, then scikit-image's
sample photographs: people, vehicles, a cat, a cup, a rocket, a cameraman, coins, and last
the two without objects, the sky and a wall, which only an install without Ultralytics
uses), found without importing them and never downloaded. No more: each image is run at two
precisions on a first configure, whose time the check is held to. Every image is read like a
calibration image (bounded, regular file, JPEG or PNG checked before decoding:
:mod:`.calibration`), and the set's content hash is part of the measurement's cache key.
"""

from __future__ import annotations

import hashlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .calibration import CalibrationError, calibration_set, read_calibration_image
from ..limits import MAX_CALIBRATION_IMAGES
from ..text import clip, show_path

#: Fewer images than this cannot say much about a precision: a folder with fewer is refused.
MIN_VALIDATION_IMAGES = 10
#: (package, folder inside it, files): the default set's photographs, where installed.
DEFAULT_IMAGES = (
    ('ultralytics', 'assets', ('bus.jpg', 'zidane.jpg')),
    ('skimage', 'data', ('astronaut.png', 'chelsea.png', 'coffee.png', 'motorcycle_left.png',
                         'motorcycle_right.png', 'rocket.jpg', 'camera.png', 'coins.png',
                         'hubble_deep_field.jpg', 'brick.png')),
)
#: What the log calls the default set (when both packages ship their photographs).
DEFAULT_SOURCE = "the default set (sample photographs of Ultralytics and scikit-image)"
#: How the log names each package of :data:`DEFAULT_IMAGES`.
_PACKAGE_NAMES = {'ultralytics': 'Ultralytics', 'skimage': 'scikit-image'}


class ValidationError(ValueError):
    """No usable validation set; the message names the setting and the fix."""


@dataclass(frozen=True)
class ValidationSet:
    """The images used, their content hash, and where they came from (for the log)."""

    images: tuple[Path, ...]
    sha256: str
    source: str


def package_images(limit: int | None = MIN_VALIDATION_IMAGES) -> list[Path]:
    """Return the default set: the first ``limit`` photographs shipped (None: every one)."""
    found = []
    for package, folder, names in DEFAULT_IMAGES:
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.submodule_search_locations:
            continue
        base = Path(next(iter(spec.submodule_search_locations))) / folder
        found.extend(base / name for name in names if (base / name).is_file())
    return found[:limit]


def _hashed(images: list[Path], source: str) -> ValidationSet:
    digest = hashlib.sha256()
    for image in images:
        digest.update(image.name.encode() + b'\0')
        digest.update(hashlib.sha256(read_calibration_image(image)).digest())
    return ValidationSet(tuple(images), digest.hexdigest(), source)


def _folder(folder: str, setting: str, log: Callable[[str], None]) -> ValidationSet:
    try:
        found = calibration_set(folder, MAX_CALIBRATION_IMAGES, log)
    except CalibrationError as exc:
        raise ValidationError(f'{setting}: {exc}') from None
    return ValidationSet(found.images, found.sha256, f'{setting} {show_path(found.folder)}')


def validation_set(validation_dir: str = '', calibration_dir: str = '',
                   log: Callable[[str], None] = lambda _: None) -> ValidationSet:
    """Return the images to measure a precision on (see the module's order of sources).

    Raises :class:`ValidationError` for a ``validation_dir`` that cannot be used or holds
    fewer than :data:`MIN_VALIDATION_IMAGES` images, and when no source has enough.
    """
    if validation_dir:
        chosen = _folder(validation_dir, 'validation_dir', log)
        if len(chosen.images) < MIN_VALIDATION_IMAGES:
            raise ValidationError(
                f'validation_dir {show_path(Path(validation_dir))} holds '
                f'{len(chosen.images)} usable images; measuring a precision needs at least '
                f'{MIN_VALIDATION_IMAGES}')
        return chosen
    if calibration_dir:
        try:
            chosen = _folder(calibration_dir, 'calibration_dir', log)
            if len(chosen.images) >= MIN_VALIDATION_IMAGES:
                return chosen
            log(f'calibration_dir holds {len(chosen.images)} usable images, fewer than the '
                f'{MIN_VALIDATION_IMAGES} a precision is measured on: using '
                f'{DEFAULT_SOURCE}')
        except ValidationError as exc:
            log(f'{clip(exc, 300)}: using {DEFAULT_SOURCE}')
    images = package_images()
    shipped = [_PACKAGE_NAMES[package] for package, folder, _ in DEFAULT_IMAGES
               if any(image.parent.parent.name == package for image in images)]
    source = f"the default set (sample photographs of {' and '.join(shipped)})"
    if len(images) < MIN_VALIDATION_IMAGES:
        raise ValidationError(
            f'no validation images: {DEFAULT_SOURCE} needs scikit-image '
            f'(requirements/validation.txt; {len(images)} found); or set the manifest\'s '
            f'validation_dir to a folder of at least {MIN_VALIDATION_IMAGES} typical frames')
    try:
        return _hashed(images, source)
    except CalibrationError as exc:
        raise ValidationError(f'{source}: {exc}') from None


__all__ = ['DEFAULT_IMAGES', 'MIN_VALIDATION_IMAGES', 'ValidationError', 'ValidationSet',
           'package_images', 'validation_set']
