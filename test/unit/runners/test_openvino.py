"""The OpenVINO runner against PyTorch on bus.jpg and zidane.jpg, its devices, its cache entries.

Tolerances: fp32 (pinned f32) raw outputs agree with PyTorch to 1e-2 on box coordinates
(pixels of the network input) and 1e-4 on class scores (measured: 2e-3 and 5e-6), detections
to 0.5 px and 1e-3. bf16 and int8 change scores by a few hundredths, so they are compared on
the detections above 0.5 confidence: same classes, boxes at IoU >= 0.9.

The int8 model is quantized once per session (8 calibration images: bus.jpg and zidane.jpg,
flipped and cropped; about 7 s at 640 on two cores) into the session's engine cache.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip('openvino', reason='OpenVINO is not installed')
pytest.importorskip('nncf', reason='NNCF is not installed (int8 quantization)')
pytest.importorskip('torch', reason='PyTorch is not installed (the reference)')

import cv2  # noqa: E402

from detection_match import assert_same_detections  # noqa: E402
from hostile_files import png_header  # noqa: E402
from pipeline_builds import PipelineBuilds  # noqa: E402
from vision_nodes.artifacts.cache import ArtifactCache, cache_key  # noqa: E402
from vision_nodes.artifacts.calibration import CalibrationError, calibration_set  # noqa: E402
from vision_nodes.artifacts.openvino_convert import (IR_BIN, IR_XML,  # noqa: E402
                                                     ir_cache_fields)
from vision_nodes.artifacts.quantize import float_tail, int8_cache_fields  # noqa: E402
from vision_nodes.tasks import resolve_manifest  # noqa: E402
from vision_nodes.pipeline import build_pipeline, calibration_tensor  # noqa: E402
from vision_nodes.runners.base import RunnerError  # noqa: E402
from vision_nodes.platform.openvino import fast_reduced_type  # noqa: E402
from vision_nodes.tasks.detect import DetectionParams  # noqa: E402

IMAGES = ('bus.jpg', 'zidane.jpg')
PARAMS = DetectionParams(0.25, 0.45, 300)


@pytest.fixture(scope='module')
def manifest():
    return resolve_manifest('yolov8n')


@pytest.fixture(scope='module')
def images(assets) -> dict[str, np.ndarray]:
    return {name: cv2.imread(str(assets / name)) for name in IMAGES}


@pytest.fixture(scope='module')
def build(manifest, model_dir, engine_cache_dir):
    """Build a pipeline on the session cache; unloaded at the end of the module."""
    builds = PipelineBuilds(model_dir, engine_cache_dir, manifest, 'openvino')
    yield builds
    builds.close()


@pytest.fixture(scope='module')
def reference(build):
    return build('cpu')


@pytest.fixture(scope='module')
def fp32(build):
    return build(precision='fp32')


@pytest.fixture(scope='module')
def int8_log() -> list[str]:
    return []


@pytest.fixture(scope='module')
def int8(build, calibration_dir, int8_log):
    return build(precision='int8', calibration_dir=str(calibration_dir), log=int8_log.append)


def _square(pipeline, image):
    tensor, meta = pipeline.task.preprocess(image, 'bgr8', pipeline.manifest.input_size)
    return tensor, meta


@pytest.mark.parametrize('name', IMAGES)
def test_fp32_raw_outputs_match_pytorch_square_and_rect(fp32, reference, images, name):
    """Same tensor in, same raw tensor out, at the export shape and at the rect shape."""
    image = images[name]
    for shape in {(640, 640), reference.input_shape(image.shape[:2])}:
        tensor, _ = reference.task.preprocess(image, 'bgr8', shape)
        want = reference.runner.infer(tensor)[0]
        got = fp32.runner.infer(tensor)[0]
        assert got.shape == want.shape == (1, 84, shape[0] * shape[1] // 64 * 21 // 16)
        np.testing.assert_allclose(got[:, :4], want[:, :4], atol=1e-2, rtol=0)
        np.testing.assert_allclose(got[:, 4:], want[:, 4:], atol=1e-4, rtol=0)


@pytest.mark.parametrize('name', IMAGES)
def test_fp32_detections_match_pytorch(fp32, reference, images, name):
    """The node's path (rect shape) gives PyTorch's detections."""
    want = reference.process(images[name], 'bgr8', PARAMS)
    got = fp32.process(images[name], 'bgr8', PARAMS)
    assert len(got) == len(want) >= 3
    np.testing.assert_array_equal(got.class_ids, want.class_ids)
    np.testing.assert_allclose(got.boxes, want.boxes, atol=0.5)
    np.testing.assert_allclose(got.scores, want.scores, atol=1e-3)
    assert fp32.runner.describe()['inference_type'] == 'f32'


@pytest.mark.parametrize('name', IMAGES)
def test_fp16_is_bf16_on_this_cpu_and_agrees_with_pytorch(build, reference, images, name):
    """fp16 on a CPU with native bf16 runs bf16 (logged), with PyTorch's confident detections."""
    if fast_reduced_type('CPU') != 'bf16':
        pytest.skip('this CPU has no native bf16 (see test_precision for the refusal)')
    log: list[str] = []
    pipeline = build(precision='fp16', log=log.append)
    assert any("precision 'fp16' runs as bf16" in line for line in log), log
    assert pipeline.runner.describe()['inference_type'] == 'bf16'
    assert_same_detections(reference.process(images[name], 'bgr8', PARAMS),
                           pipeline.process(images[name], 'bgr8', PARAMS), at_least=2)


@pytest.mark.parametrize('name', IMAGES)
def test_int8_agrees_with_pytorch(int8, reference, images, name):
    """NNCF int8 (float output tail) keeps PyTorch's confident detections."""
    info = int8.runner.describe()
    assert info['precision'] == 'int8' and info['artifact'] == 'int8-ir'
    assert info['inference_type'].startswith('int8')
    assert int8.rect
    assert_same_detections(reference.process(images[name], 'bgr8', PARAMS),
                           int8.process(images[name], 'bgr8', PARAMS), at_least=2)


def test_int8_rect_and_square_agree(int8, images):
    """The quantized IR keeps dynamic height/width; rect and square find the same objects."""
    for image in images.values():
        tensor, meta = _square(int8, image)
        square = int8.task.postprocess(int8.runner.infer(tensor), meta, PARAMS)
        assert_same_detections(square, int8.process(image, 'bgr8', PARAMS), at_least=2)


def test_quantization_is_logged_with_progress(int8, int8_log):
    """Quantizing says what it does, how far it is, and how long it took (when it ran)."""
    if int8.runner.cache_hit:
        pytest.skip('the int8 entry was already in the engine cache: nothing was quantized')
    text = '\n'.join(int8_log)
    assert 'int8: quantizing yolov8n with NNCF over 8 calibration images' in text
    assert 'int8: calibration image 8/8' in text
    assert 'only 8 calibration images' in text  # the advice to use more
    assert 'int8: quantized in' in text


def test_float_tail_keeps_the_decoder_in_float(int8):
    """What stays unquantized: YOLO's decode (DFL softmax and its fixed conv, sigmoid, boxes)."""
    import openvino as ov

    entry_dir = Path(int8.runner.model_path).parent
    parent_sha = json.loads((entry_dir / 'entry.json').read_text())['fields']['parent_sha256']
    ir_dirs = [d for d in entry_dir.parent.glob('yolov8n-openvino-*')
               if d.is_dir() and 'int8' not in d.name]
    model = None
    for folder in ir_dirs:
        xml, weights = (folder / IR_XML).read_bytes(), (folder / IR_BIN).read_bytes()
        digest = hashlib.sha256(hashlib.sha256(xml).digest()
                                + hashlib.sha256(weights).digest()).hexdigest()
        if digest == parent_sha:
            model = ov.Core().read_model(folder / IR_XML)
    assert model is not None, 'the int8 entry names a parent IR that is not in the cache'
    tail = set(float_tail(model))
    ops = {op.get_friendly_name(): op for op in model.get_ordered_ops()}
    kinds = [ops[name].get_type_name() for name in tail]
    assert 'Sigmoid' in kinds and 'Softmax' in kinds
    assert kinds.count('Convolution') == 1  # the DFL's fixed 0..15 projection
    convs = [n for n, op in ops.items() if op.get_type_name() == 'Convolution']
    assert len(convs) - 1 == len([n for n in convs if n not in tail]) >= 60
    quantized = ov.Core().read_model(Path(int8.runner.model_path))
    fq = sum(op.get_type_name() == 'FakeQuantize' for op in quantized.get_ops())
    assert fq >= 60


def test_prequantized_ir_runs_as_given(build, manifest, images):
    """The shared INT8 IR (320, static): auto means int8, names from metadata.yaml, no rect."""
    ir_manifest = resolve_manifest('yolov8n_int8_openvino')
    log: list[str] = []
    pipeline = build(model=ir_manifest, precision='auto', log=log.append)
    runner = pipeline.runner
    assert runner.config.precision == 'int8' and runner.quantized
    assert runner.cache_hit is None and runner.artifact == 'weights'
    assert pipeline.labels[:3] == ['person', 'bicycle', 'car'] and len(pipeline.labels) == 80
    assert not runner.dynamic_shapes and not pipeline.rect
    assert any("precision auto: 'int8'" in line for line in log)
    with pytest.raises(RunnerError, match=r'only takes input shape \(320, 320\)'):
        runner.prepare_shape((320, 256))
    square_320 = build('cpu', model=replace(manifest, input_size=(320, 320), rect=False))
    for image in images.values():
        assert_same_detections(square_320.process(image, 'bgr8', PARAMS),
                               pipeline.process(image, 'bgr8', PARAMS), at_least=2)


def test_describe_reports_device_facts(fp32):
    """Device, its name, precision, the latency settings and the CPU's facts."""
    import os

    import openvino as ov

    info = fp32.runner.describe()
    assert info['backend'] == 'openvino' and info['precision'] == 'fp32'
    assert info['device'] == 'CPU'
    assert info['device_name'] == ov.Core().get_property('CPU', 'FULL_DEVICE_NAME')
    assert info['num_streams'] == 1 and info['inference_num_threads'] >= 1
    assert info['cpu_pinning'] is False
    assert info['execution_devices'] == ['CPU']
    assert info['logical_cores'] == len(os.sched_getaffinity(0))
    assert info['runtime'].startswith('OpenVINO ')
    assert [640, 640] in info['shapes']


def test_devices_this_machine_lacks_are_clear_errors(build, manifest):
    """GPU/NPU where there is none: the error lists the available devices."""
    import openvino as ov

    available = ov.Core().available_devices
    for device in ('GPU', 'NPU', 'GPU.1'):
        if device.split('.')[0] in {d.split('.')[0] for d in available}:
            continue
        with pytest.raises(RunnerError, match=rf"device '{device}' is not available on this "
                                              rf"machine \(available: {available[0]}"):
            build(device=device)
    with pytest.raises(RunnerError, match="parameter device 'cpu;rm -rf' is not a device"):
        build(device='cpu;rm -rf')


@pytest.mark.parametrize('device', ['AUTO', 'auto:cpu'])
def test_auto_device_runs(build, images, reference, device):
    """OpenVINO's AUTO device (here it can only pick the CPU) runs at pinned f32."""
    pipeline = build(device=device)
    info = pipeline.runner.describe()
    assert info['device'] in ('AUTO', 'AUTO:CPU')
    assert 'CPU: f32' in info['inference_type']
    got = pipeline.process(images['bus.jpg'], 'bgr8', PARAMS)
    want = reference.process(images['bus.jpg'], 'bgr8', PARAMS)
    np.testing.assert_allclose(got.boxes, want.boxes, atol=0.5)


# ---------------------------------------------------------------------- cache entries
def _copy_entries(src: Path, dst: Path, *prefixes: str) -> None:
    for entry in src.iterdir():
        if entry.is_dir() and any(entry.name.startswith(p) for p in prefixes):
            shutil.copytree(entry, dst / entry.name)


def _bin_of(runner) -> Path:
    return Path(runner.model_path).with_name(IR_BIN)


def test_ir_entry_miss_hit_and_corruption(build, fp32, engine_cache_dir, tmp_path):
    """IR: built once from the cached ONNX (logged), then hit; a corrupt .bin is rebuilt."""
    _copy_entries(engine_cache_dir, tmp_path, 'yolov8n-onnx-')
    log: list[str] = []
    first = build(cache_dir=tmp_path, log=log.append)
    assert first.runner.cache_hit is False
    assert any('converting the ONNX model to OpenVINO IR' in line for line in log)
    assert not any('exporting' in line for line in log)  # the ONNX entry was a hit
    entry = json.loads((Path(first.runner.model_path).parent / 'entry.json').read_text())
    # The session's cache may hold several yolov8n ONNX exports (rect and square): the IR's
    # parent is one of them, converted as it was (nothing was exported).
    cached = {hashlib.sha256(f.read_bytes()).hexdigest()
              for f in tmp_path.glob('yolov8n-onnx-*/model.onnx')}
    assert entry['fields']['parent_sha256'] in cached
    assert entry['fields']['openvino'] and entry['kind'] == 'openvino'
    second = build(cache_dir=tmp_path)
    assert second.runner.cache_hit is True
    assert second.runner.model_path == first.runner.model_path
    weights = _bin_of(second.runner)
    weights.write_bytes(weights.read_bytes()[:-4096] + bytes(4096))
    third = build(cache_dir=tmp_path)
    assert third.runner.cache_hit is False
    tensor = np.full((1, 3, 640, 640), 0.5, np.float32)
    np.testing.assert_allclose(third.runner.infer(tensor)[0], fp32.runner.infer(tensor)[0],
                               atol=1e-3)


def test_int8_entry_hit_and_corruption(build, int8, engine_cache_dir, calibration_dir,
                                       tmp_path):
    """INT8 IR: found again without quantizing; a corrupt one is quantized again, not loaded."""
    _copy_entries(engine_cache_dir, tmp_path, 'yolov8n-onnx-', 'yolov8n-openvino-')
    log: list[str] = []
    again = build(cache_dir=tmp_path, precision='int8', calibration_dir=str(calibration_dir),
                  log=log.append)
    assert again.runner.cache_hit is True
    assert not any('quantizing' in line for line in log)
    weights = _bin_of(again.runner)
    weights.write_bytes(weights.read_bytes()[:1000])
    log.clear()
    rebuilt = build(cache_dir=tmp_path, precision='int8', calibration_dir=str(calibration_dir),
                    log=log.append)
    assert rebuilt.runner.cache_hit is False
    assert any('quantizing' in line for line in log)
    assert weights.stat().st_size > 1000
    tensor = np.full((1, 3, 640, 640), 0.5, np.float32)
    assert rebuilt.runner.infer(tensor)[0].shape == (1, 84, 8400)


def test_ir_key_changes_with_parent_and_openvino_version():
    """A new ONNX export or a new OpenVINO gives a new IR entry."""
    base = ir_cache_fields('a' * 64, 'onnx-export')
    assert cache_key(base) == cache_key(ir_cache_fields('a' * 64, 'onnx-export'))
    variants = [ir_cache_fields('b' * 64, 'onnx-export'), ir_cache_fields('a' * 64, 'onnx-file'),
                {**base, 'openvino': base['openvino'] + '.1'},
                {**base, 'converter': base['converter'] + '.1'}]
    keys = {cache_key(v) for v in variants}
    assert len(keys) == len(variants) and cache_key(base) not in keys


def test_int8_key_changes_with_calibration_content(manifest, calibration_dir, tmp_path):
    """Calibration images (content, not just names), preprocessing and tool versions key it."""
    folder = tmp_path / 'calib'
    shutil.copytree(calibration_dir, folder)
    first = calibration_set(folder)
    assert first == calibration_set(folder) and len(first.images) == 8
    base = int8_cache_fields('p' * 64, first, manifest, True)
    image = folder / 'bus_flip.jpg'
    image.write_bytes(image.read_bytes() + b'\0')  # same name, different content
    changed = calibration_set(folder)
    assert changed.sha256 != first.sha256
    bigger = replace(manifest, input_size=(320, 320))
    prep = replace(manifest, preprocessing=replace(manifest.preprocessing, pad_value=0))
    variants = [int8_cache_fields('p' * 64, changed, manifest, True),
                int8_cache_fields('q' * 64, first, manifest, True),
                int8_cache_fields('p' * 64, first, manifest, False),
                int8_cache_fields('p' * 64, first, bigger, True),
                int8_cache_fields('p' * 64, first, prep, True),
                {**base, 'nncf': base['nncf'] + '.1'}, {**base, 'openvino': 'x'}]
    keys = {cache_key(v) for v in variants}
    assert len(keys) == len(variants) and cache_key(base) not in keys
    every = sorted(folder.iterdir())
    assert calibration_set(folder, limit=3).images == (every[0], every[2], every[5])


def test_calibration_folder_errors(manifest, tmp_path):
    """Missing, empty or unreadable calibration data: errors naming the folder or file."""
    with pytest.raises(CalibrationError, match='set `calibration_dir`'):
        calibration_set('')
    with pytest.raises(CalibrationError, match="'.*nowhere' is not a folder"):
        calibration_set(tmp_path / 'nowhere')
    (tmp_path / 'notes.txt').write_text('not an image')
    with pytest.raises(CalibrationError, match='holds no images'):
        calibration_set(tmp_path)
    garbage = tmp_path / 'garbage.jpg'
    garbage.write_bytes(b'\xff\xd8 not really a jpeg')
    with pytest.raises(CalibrationError, match='holds no usable image: all 1 were skipped'):
        calibration_set(tmp_path)
    garbage.unlink()
    broken = tmp_path / 'broken.png'
    broken.write_bytes(png_header(64, 48) + b'no image data')  # a valid header, then garbage
    assert calibration_set(tmp_path).images == (broken,)
    with pytest.raises(CalibrationError, match="'.*broken.png' cannot be decoded"):
        calibration_tensor(broken, manifest, rect=True)


def test_int8_without_calibration_is_refused_at_configure(build):
    """int8 on PyTorch weights needs calibration images: a clear error, nothing runs."""
    with pytest.raises(RunnerError, match=r"cannot run precision 'int8' here: int8 quantizes "
                                          r'.*`calibration_dir`.*\(valid here: auto, fp32'):
        build(precision='int8')


def test_calibration_dir_from_the_manifest(int8, manifest, model_dir, calibration_dir,
                                           engine_cache_dir, tmp_path, monkeypatch):
    """A relative manifest calibration_dir resolves like its weights; same images, same entry."""
    from vision_nodes.manifest import MODEL_DIR_ENV

    monkeypatch.delenv(MODEL_DIR_ENV, raising=False)
    shutil.copytree(calibration_dir, tmp_path / 'calib')
    local = replace(manifest, weights=str(model_dir / 'yolov8n.pt'), calibration_dir='calib',
                    source=tmp_path / 'local.yaml')
    pipeline = build_pipeline(local, 'openvino', cache_dir=engine_cache_dir, precision='int8')
    try:
        assert pipeline.runner.config.calibration_dir == str(tmp_path / 'calib')
        assert pipeline.runner.cache_hit is True  # the session's int8 entry: same content
        assert pipeline.runner.model_path == int8.runner.model_path
    finally:
        pipeline.close()


def test_a_file_swapped_after_the_check_is_never_loaded(build, fp32, engine_cache_dir,
                                                        tmp_path, monkeypatch):
    """The runner loads the bytes it verified: a .bin changed after the entry's check fails."""
    from vision_nodes.artifacts.cache import CacheError

    _copy_entries(engine_cache_dir, tmp_path, 'yolov8n-onnx-', 'yolov8n-openvino-')
    # The entry this build reads (the session cache may hold others: batches, u8 inputs).
    weights = Path(build(cache_dir=tmp_path).runner.model_path).parent / 'model.bin'
    # As if the entry had been checked (lookup) and then swapped before the runner read it.
    monkeypatch.setattr(ArtifactCache, 'validate', staticmethod(lambda entry, files=(): True))
    weights.write_bytes(bytes(weights.stat().st_size))
    with pytest.raises(CacheError, match='model.bin does not match the hash recorded'):
        build(cache_dir=tmp_path)


def test_an_unreadable_calibration_image_fails_configure_naming_it(build, calibration_dir,
                                                                   tmp_path):
    """A file beyond the frame bounds is skipped (one log line); one that passes the checks
    but cannot be decoded fails configure naming it, nothing cached."""
    folder = tmp_path / 'calib'
    shutil.copytree(calibration_dir, folder)
    (folder / '000_huge.png').write_bytes(png_header(30000, 30000) + bytes(64))
    (folder / '000_broken.png').write_bytes(png_header(64, 48) + b'no image data')
    cache = tmp_path / 'cache'
    _copy_entries(Path(build(precision='fp32').runner.model_path).parent.parent, cache,
                  'yolov8n-onnx-', 'yolov8n-openvino-')
    before = sorted(cache.iterdir())
    lines: list[str] = []
    with pytest.raises(RunnerError, match=r"calibration image '.*000_broken.png' cannot be "
                                          r'decoded: remove it'):
        build(precision='int8', calibration_dir=str(folder), cache_dir=cache, log=lines.append)
    assert sorted(p for p in cache.iterdir() if not p.name.endswith('.lock')) == before
    skipped = [line for line in lines if 'skipped' in line]
    assert len(skipped) == 1 and 'skipped 1 of 10 image files' in skipped[0], lines
    assert '000_huge.png: png image of 30000x30000 exceeds the decode limit' in skipped[0]


def test_auto_falls_back_from_openvino_to_onnx(manifest, model_dir, engine_cache_dir,
                                               monkeypatch):
    """auto tries OpenVINO first on a CPU machine; if it fails to load, ONNX Runtime runs."""
    from vision_nodes.runners.openvino_runner import OpenVinoRunner
    from vision_nodes.backends import AUTO_ORDER

    assert AUTO_ORDER.index('openvino') < AUTO_ORDER.index('onnx')

    def broken(self):
        raise RunnerError('simulated OpenVINO failure')

    monkeypatch.setattr(OpenVinoRunner, '_load', broken)
    log: list[str] = []
    pipeline = build_pipeline(manifest, 'auto', model_dir=str(model_dir),
                              cache_dir=engine_cache_dir, precision='auto', log=log.append)
    try:
        assert pipeline.runner.config.backend == 'onnx'
        assert pipeline.runner.config.precision == 'fp32'
        text = '\n'.join(log)
        assert "'openvino' failed to load (simulated OpenVINO failure)" in text
        assert "backend auto: chose 'onnx'" in text
        fastest = 'fp16' if fast_reduced_type('CPU') else 'fp32'
        assert text.index(f"precision auto: '{fastest}' on backend 'openvino'") < \
            text.index("precision auto: 'fp32' on backend 'onnx'")
    finally:
        pipeline.close()


@pytest.mark.parametrize('name', IMAGES)
def test_int8_float_layers_in_this_cpus_type_agree_with_fp32(int8, fp32, images, name):
    """The accuracy check of int8's float layers in the type this CPU gets (bf16 with AMX or
    AVX-512 BF16, else f32: platform/cpu.int8_float_type) against exact fp32: the same
    confident objects, and no confident box's edge moved by more than 4 px or 2 % of its size
    (int8 with f32 float layers moved zidane.jpg's 1000 px wide person by 9.8 px)."""
    from vision_nodes.platform.cpu import cpu_info, int8_float_type

    float_type = int8_float_type(cpu_info())
    assert int8.runner.describe()['inference_type'] == \
        f'int8 in the quantized layers, {float_type} elsewhere'
    want = fp32.process(images[name], 'bgr8', PARAMS)
    got = int8.process(images[name], 'bgr8', PARAMS)
    assert_same_detections(want, got, at_least=2)
    for box, cls in zip(want.boxes[want.scores >= 0.5], want.class_ids[want.scores >= 0.5]):
        same = got.boxes[got.class_ids == cls]
        bound = max(4.0, 0.02 * float(max(box[2] - box[0], box[3] - box[1])))
        assert np.abs(same - box).max(axis=1).min() <= bound, (float_type, box, same)


@pytest.mark.parametrize('name', IMAGES)
def test_u8_input_with_the_preprocessing_in_the_model_gives_the_host_paths_detections(
        fp32, int8, images, name):
    """The pipeline hands OpenVINO the letterboxed u8 image and the model converts it
    (artifacts/openvino_u8_input.py); the detections equal the host float path's, at fp32
    and int8, the float tensors of other callers still run."""
    for pipeline in (fp32, int8):
        assert pipeline.task.u8_input and pipeline.runner.takes_u8
        assert pipeline.runner.describe()['input'].startswith('u8 NHWC bgr')
        got = pipeline.process(images[name], 'bgr8', PARAMS)
        pipeline.task.u8_input = False
        try:
            want = pipeline.process(images[name], 'bgr8', PARAMS)
        finally:
            pipeline.task.u8_input = True
        assert len(got) == len(want) >= 2
        np.testing.assert_array_equal(got.class_ids, want.class_ids)
        np.testing.assert_allclose(got.boxes, want.boxes, atol=1e-2)
        np.testing.assert_allclose(got.scores, want.scores, atol=1e-4)


def test_u8_input_ir_is_a_cache_entry_keyed_on_the_embedded_preprocessing(fp32,
                                                                          engine_cache_dir):
    from vision_nodes.artifacts.openvino_u8_input import u8_input_fields
    from vision_nodes.manifest import Preprocessing

    assert fp32.runner.describe()['artifact'] == 'ir'
    assert any(p.name.startswith('yolov8n-openvino-u8-') for p in Path(engine_cache_dir)
               .iterdir()), sorted(p.name for p in Path(engine_cache_dir).iterdir())
    base = u8_input_fields('a' * 64, Preprocessing())
    for changed in (Preprocessing(color_order='bgr'), Preprocessing(scale=1.0),
                    Preprocessing(mean=(0.5, 0.5, 0.5)), Preprocessing(std=(2.0, 2.0, 2.0))):
        assert cache_key(u8_input_fields('a' * 64, changed)) != cache_key(base)
    assert cache_key(u8_input_fields('b' * 64, Preprocessing())) != cache_key(base)
