"""Where the images a precision is measured on come from, and the measurement's cache entry."""

from __future__ import annotations

import shutil
from dataclasses import replace

import pytest

from vision_nodes.artifacts.validation import (DEFAULT_IMAGES, DEFAULT_SOURCE,
                                               MIN_VALIDATION_IMAGES,
                                               ValidationError, package_images,
                                               validation_set)


@pytest.fixture(scope='module')
def photographs():
    """Every photograph of DEFAULT_IMAGES installed here (the default set is the first 10)."""
    images = package_images(limit=None)
    if len(images) <= MIN_VALIDATION_IMAGES:
        pytest.skip(f'{len(images)} default photographs here: scikit-image is not installed '
                    '(requirements/validation.txt)')
    return images


def _folder(tmp_path, images, count):
    folder = tmp_path / f'set{count}'
    folder.mkdir()
    for image in images[:count]:
        shutil.copy(image, folder / image.name)
    return folder


def test_the_default_set_is_real_photographs_from_installed_packages(photographs):
    names = {p.name for p in photographs}
    assert {'astronaut.png', 'coffee.png', 'motorcycle_left.png'} <= names
    found = validation_set()
    assert found.source == DEFAULT_SOURCE and found.images == tuple(package_images())
    # No more than the minimum (each costs two inferences), Ultralytics' first.
    assert list(found.images) == photographs[:MIN_VALIDATION_IMAGES]
    assert [p.name for p in found.images[:2]] == ['bus.jpg', 'zidane.jpg']
    assert validation_set().sha256 == found.sha256  # the cache key's view is stable


def test_the_log_names_only_the_packages_whose_photographs_were_found(photographs,
                                                                      monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, 'find_spec',
                        lambda name, *a: None if name == 'ultralytics' else real(name, *a))
    found = validation_set()
    assert found.source == 'the default set (sample photographs of scikit-image)'
    shipped = next(names for package, _, names in DEFAULT_IMAGES if package == 'skimage')
    assert [p.name for p in found.images] == list(shipped)[:MIN_VALIDATION_IMAGES]


def test_validation_dir_first_and_refused_below_the_minimum(photographs, tmp_path):
    folder = _folder(tmp_path, photographs, MIN_VALIDATION_IMAGES)
    found = validation_set(str(folder), calibration_dir='/nonexistent')
    assert found.source.startswith('validation_dir ') and len(found.images) == 10
    few = _folder(tmp_path, photographs, 3)
    with pytest.raises(ValidationError, match='holds 3 usable images; measuring a precision '
                                              'needs at least 10'):
        validation_set(str(few))
    with pytest.raises(ValidationError, match='validation_dir: calibration_dir .* is not a '
                                              'folder'):
        validation_set(str(tmp_path / 'missing'))


def test_a_small_calibration_folder_gives_way_to_the_default_set(photographs, tmp_path):
    lines = []
    found = validation_set('', str(_folder(tmp_path, photographs, 4)), lines.append)
    assert found.source == DEFAULT_SOURCE
    assert lines == [f'calibration_dir holds 4 usable images, fewer than the 10 a precision '
                     f'is measured on: using {DEFAULT_SOURCE}']
    enough = validation_set('', str(_folder(tmp_path, photographs, 11)))
    assert enough.source.startswith('calibration_dir ') and len(enough.images) == 11


def test_the_measurement_is_keyed_on_what_changes_it(photographs, model_dir, tmp_path):
    pytest.importorskip('openvino', reason='OpenVINO is not installed')
    pytest.importorskip('torch', reason='PyTorch is not installed (exports yolov8n.pt)')
    from vision_nodes.artifacts.cache import cache_key
    from vision_nodes.tasks import resolve_manifest
    from vision_nodes.pipeline import build_pipeline
    from vision_nodes.precision_check import cache_fields

    model = build_pipeline(resolve_manifest('yolov8n'), 'openvino', model_dir=str(model_dir),
                           cache_dir=tmp_path / 'cache', precision='fp32')
    try:
        images = validation_set()
        base = cache_fields(model, images)
        assert base['compute_type'] == 'fp32' and base['validation_sha256'] == images.sha256
        other_images = validation_set(str(_folder(tmp_path, photographs[1:], 11)))
        assert cache_key(cache_fields(model, other_images)) != cache_key(base)
        model.manifest = replace(model.manifest, thresholds=replace(
            model.manifest.thresholds, confidence=0.5))
        assert cache_key(cache_fields(model, images)) != cache_key(base)
        model.manifest = replace(model.manifest, name='renamed', thresholds=replace(
            model.manifest.thresholds, confidence=0.25))
        assert cache_key(cache_fields(model, images)) == cache_key(base)
    finally:
        model.close()
