"""int8 within a declared accuracy budget: NNCF's accuracy-controlled quantization.

YOLOv8n (real weights) at 320 x 320, calibrated and validated on the default set's
photographs: the manifest's ``accuracy.max_drop`` makes the INT8 step revert layers to
floating point until its answers agree with fp32's within the budget, on the float type the
int8 model's float layers run in here; the precision check then measures what runs.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import pytest

pytest.importorskip('openvino', reason='OpenVINO is not installed')
pytest.importorskip('nncf', reason='NNCF is not installed (requirements/openvino.txt)')
pytest.importorskip('torch', reason='PyTorch is not installed (exports yolov8n.pt)')

from vision_nodes.artifacts.validation import MIN_VALIDATION_IMAGES, package_images  # noqa: E402,E501
from vision_nodes.manifest import AccuracyBudget  # noqa: E402
from vision_nodes.tasks import resolve_manifest  # noqa: E402
from vision_nodes.pipeline import build_pipeline  # noqa: E402

MAX_DROP = 0.005


def test_int8_is_quantized_within_the_declared_budget(model_dir, tmp_path):
    photographs = package_images()
    if len(photographs) < MIN_VALIDATION_IMAGES:
        pytest.skip('no default validation set here (requirements/validation.txt)')
    calibration = tmp_path / 'frames'
    calibration.mkdir()
    for image in photographs:
        shutil.copy(image, calibration / image.name)
    manifest = replace(resolve_manifest('yolov8n'), input_size=(320, 320),
                       accuracy=AccuracyBudget(max_drop=MAX_DROP, declared=True))
    lines: list[str] = []
    model = build_pipeline(manifest, 'openvino', model_dir=str(model_dir),
                           cache_dir=tmp_path / 'cache', precision='int8',
                           calibration_dir=str(calibration), log=lines.append)
    try:
        assert f'quantizing within accuracy.max_drop {MAX_DROP:g}' in '\n'.join(lines)
        assert any(line.startswith('int8: NNCF: Metric of quantized model:') for line in lines)
        assert any('achieved required accuracy drop' in line for line in lines), lines
        entry = next((tmp_path / 'cache').glob('yolov8n-openvino-int8-*/entry.json'))
        control = json.loads(entry.read_text())['fields']['accuracy_control']
        assert control['max_drop'] == MAX_DROP and control['images'] == len(photographs)
        check = model.precision_check
        assert check.compute_type == 'int8' and check.agreement is not None
        # What NNCF reached on the validation images, measured again on what runs (the
        # u8-input twin, the runner's float type); within the budget.
        assert check.agreement.drop() <= MAX_DROP, check.line()
    finally:
        model.close()
