"""benchmarks/gpu_check.py: the CPU report for real, every GPU path through the fakes.

This machine has no GPU: the script's own run here must say "no CUDA device", list what it
would run and exit 0, without ROS. Its GPU code paths run against the fakes the TensorRT and
ONNX Runtime provider tests use (``fake_tensorrt``; ONNX Runtime's CUDA and TensorRT
providers answered by real CPU sessions); PyTorch's CUDA paths cannot be faked (the runner
moves real tensors to the device), so they are reported as not runnable, with the reason.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fake_tensorrt import make_fake_cudart, make_fake_tensorrt
from vision_nodes.platform import cuda
from vision_nodes.tasks.detect import Detections

ort = pytest.importorskip('onnxruntime', reason='ONNX Runtime is the reference')
ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / 'benchmarks' / 'gpu_check.py'
REAL_SESSION = ort.InferenceSession


@pytest.fixture(scope='module')
def gpu_check():
    spec = importlib.util.spec_from_file_location('gpu_check', SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_cpu_machine_says_no_cuda_device_without_ros(tmp_path):
    """Real run here: one clear line, the paths it would run, exit 0; rclpy never imported."""
    if cuda.gpu_info(0) is not None:
        pytest.skip('a GPU is visible here')
    report = tmp_path / 'report.json'
    code = ('import runpy, sys; sys.modules["rclpy"] = None; '
            f'sys.argv = ["gpu_check.py", "--json", {str(report)!r}]; '
            f'runpy.run_path({str(SCRIPT)!r}, run_name="__main__")')
    result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                            cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith('no CUDA device: no NVIDIA GPU is visible')
    for name in ('torch-cuda-host', 'torch-cuda-device', 'torch-cuda', 'torch-cuda-fp16-host',
                 'torch-cuda-fp16', 'torch-compile', 'onnx-cuda', 'onnx-tensorrt',
                 'tensorrt-fp32', 'tensorrt-fp16', 'tensorrt-int8'):
        assert any(line.startswith(f'  {name}: ') for line in lines), name
    data = json.loads(report.read_text())
    assert data['cuda_device'] is False and len(data['would_run']) == 11
    assert data['environment']['gpu'] is None


class _ProxySession:
    """A real CPU session that reports the providers it was asked for (a GPU stand-in)."""

    def __init__(self, model, providers):
        self._session = REAL_SESSION(model, providers=['CPUExecutionProvider'])
        self._providers = list(providers)

    def get_providers(self):
        return self._providers

    def __getattr__(self, name):
        return getattr(self._session, name)


@pytest.fixture
def fake_gpu_machine(monkeypatch):
    """A fake GPU (cuda-python), fake TensorRT, and ONNX Runtime listing CUDA and TensorRT."""
    rt = make_fake_cudart()
    monkeypatch.setitem(sys.modules, 'cuda.bindings.runtime', rt)
    trt = make_fake_tensorrt(rt)
    monkeypatch.setitem(sys.modules, 'tensorrt', trt)
    gpu_providers = ['TensorrtExecutionProvider', 'CUDAExecutionProvider']

    def session(model, sess_options=None, providers=None, provider_options=None):
        if providers[0] in gpu_providers:
            return _ProxySession(model, providers)
        return REAL_SESSION(model, sess_options=sess_options, providers=providers,
                            provider_options=provider_options)

    monkeypatch.setattr(ort, 'get_available_providers',
                        lambda: gpu_providers + ['CPUExecutionProvider'])
    monkeypatch.setattr(ort, 'InferenceSession', session)
    return trt


def test_every_path_runs_through_the_fakes(gpu_check, fake_gpu_machine, model_dir, assets,
                                           tmp_path, capsys):
    """With a (fake) GPU: each runnable path is compared with the CPU on the bundled images
    and timed; the others are listed with their reason; the JSON holds the same."""
    report = tmp_path / 'report.json'
    code = gpu_check.main(['--frames', '2', '--json', str(report), '--cache-dir',
                           str(tmp_path / 'cache')])
    out = capsys.readouterr().out
    assert code == 0, out
    results = {r['path']: r for r in json.loads(report.read_text())['results']}
    assert results['cpu-reference']['status'] == 'reference'
    for name in ('onnx-cuda', 'onnx-tensorrt', 'tensorrt-fp32', 'tensorrt-fp16',
                 'tensorrt-int8'):
        result = results[name]
        assert result['status'] == 'match', (name, result)
        assert result['detections'] == results['cpu-reference']['detections']
        assert result['bare_ms'] > 0 and result['pipeline_ms'] >= result['stages_ms']['infer']
        assert set(result['stages_ms']) == {'preprocess', 'infer', 'postprocess'}
    assert results['torch-cuda']['status'] == 'cannot run'
    assert 'sees no CUDA device' in results['torch-cuda']['reason']
    assert 'Ultralytics model' in results['torch-compile']['reason']
    flags = [b['flags'] for b in fake_gpu_machine.built]
    assert flags == [[], ['FP16', 'TF32'], ['FP16', 'INT8', 'TF32']]
    assert '| path | status | detections (>= 0.5) | bare ms | pipeline ms |' in out
    assert '| tensorrt-int8 | match |' in out
    assert ('cannot run here:\n- torch-cuda-host (PyTorch eager on CUDA, pre/post-processing '
            'on the host): PyTorch') in out


def test_detections_are_compared_both_ways_per_precision(gpu_check):
    """A box moved by a few pixels fails fp32 (IoU 0.95) but passes int8 (0.75); a missing or
    an extra confident detection fails every precision."""
    def dets(boxes, scores, classes):
        return Detections(np.array(boxes, np.float32), np.array(scores, np.float32),
                          np.array(classes, np.int64))

    cpu = dets([[0, 0, 100, 100], [200, 200, 300, 300]], [0.9, 0.3], [0, 1])
    moved = dets([[6, 0, 106, 100]], [0.88], [0])
    assert gpu_check.compare(cpu, moved, 'int8', 'bus.jpg') == []
    problems = gpu_check.compare(cpu, moved, 'fp32', 'bus.jpg')
    assert len(problems) == 2 and problems[0].startswith('bus.jpg: missing from the GPU: '
                                                         'class 0 score 0.90')
    extra = dets([[0, 0, 100, 100], [400, 400, 500, 500]], [0.9, 0.7], [0, 2])
    assert gpu_check.compare(cpu, extra, 'int8', 'x.jpg') == [
        'x.jpg: not found on the CPU: class 2 score 0.70 box [400.0, 400.0, 500.0, 500.0] '
        '(best IoU 0.00)']
    fp32 = next(p for p in gpu_check.PATHS if p.name == 'tensorrt-fp32')
    outcome = gpu_check.Outcome(fp32, status='MISMATCH', detections=[1],
                                mismatches=['x.jpg: missing'])
    assert '  tensorrt-fp32: x.jpg: missing' in gpu_check.table([outcome])


def test_torch_paths_load_on_the_device_as_given(gpu_check, fake_gpu_machine, model_dir,
                                                 assets, tmp_path, monkeypatch, capsys):
    """``--device cuda:0`` reaches the PyTorch runner as written (it once became
    'cuda:cuda:0', not a device). PyTorch here has no GPU: it is told it sees one, so the
    load goes past the device and stops only where a tensor would move to the GPU."""
    torch = pytest.importorskip('torch')
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    monkeypatch.setattr(torch.cuda, 'device_count', lambda: 1)
    monkeypatch.setattr(cuda, '_torch_cuda', lambda: None)  # GPU facts: the fake cuda-python
    report = tmp_path / 'report.json'
    code = gpu_check.main(['--device', 'cuda:0', '--paths', 'torch-cuda', '--frames', '1',
                           '--json', str(report), '--cache-dir', str(tmp_path / 'cache')])
    assert code == 0, capsys.readouterr().out
    result = json.loads(report.read_text())['results'][1]
    assert result['path'] == 'torch-cuda' and result['status'] == 'cannot run'
    assert result['reason'].startswith('load failed: ')
    assert 'is not a device' not in result['reason'], result['reason']


def test_batches_time_every_size_and_match_the_single_frame(gpu_check, model_dir, assets,
                                                            tmp_path):
    """--batch on a PyTorch runner (the CPU one here): a row per size, every frame of a batch
    decoded to the unbatched frame's detections; ONNX Runtime's fixed-batch export is not
    batched."""
    import cv2

    from vision_nodes.tasks import resolve_manifest
    from vision_nodes.pipeline import build_pipeline
    from vision_nodes.tasks.detect import DetectionParams

    manifest = resolve_manifest('yolov8n')
    image = cv2.imread(str(assets / 'bus.jpg'))
    params = DetectionParams(0.25, 0.45, 300)
    model = build_pipeline(manifest, 'cpu', cache_dir=tmp_path)
    try:
        assert gpu_check.batchable(model.runner)
        rows = gpu_check.measure_batches(model, image, params, (1, 2), frames=1)
    finally:
        model.close()
    assert [r['batch'] for r in rows] == [1, 2]
    for row in rows:
        assert row['mismatches'] == [] and row['bare_ms'] > 0
        assert row['frames_per_s'] == pytest.approx(row['batch'] * 1000 / row['pipeline_ms'],
                                                    abs=0.051)
    onnx = build_pipeline(manifest, 'onnx', cache_dir=tmp_path, execution_provider='cpu')
    try:
        assert not gpu_check.batchable(onnx.runner)
    finally:
        onnx.close()


def test_masks_and_keypoints_are_compared_per_precision(gpu_check):
    """Matched detections' masks (IoU) and keypoints (px, score) are checked at the path's
    precision: a mask shifted by 8 of 100 px fails fp32 (0.95) but passes int8 (0.75);
    keypoints 3 px away fail fp32/fp16 (2 px) but pass int8 (4 px)."""
    from vision_nodes.tasks.instances import PoseResult, SegmentResult

    boxes = np.array([[0, 0, 100, 100]], np.float32)
    scores, classes = np.array([0.9], np.float32), np.array([0])
    mask = np.zeros((1, 120, 120), bool)
    mask[0, 10:90, 0:100] = True
    shifted = np.zeros_like(mask)
    shifted[0, 10:90, 8:108] = True
    cpu = SegmentResult(boxes, scores, classes, mask)
    gpu = SegmentResult(boxes.copy(), scores, classes, shifted)
    assert gpu_check.compare(cpu, gpu, 'int8', 'bus.jpg') == []
    assert gpu_check.compare(cpu, gpu, 'fp32', 'bus.jpg') == [
        'bus.jpg: class 0 score 0.90: mask IoU 0.852']
    assert gpu_check.compare(cpu, SegmentResult(boxes, scores, classes, mask.copy()),
                             'fp32', 'bus.jpg') == []
    points = np.array([[[10, 10, 0.8], [50, 60, 0.4]]], np.float32)
    moved = points.copy()
    moved[0, 1, :2] += (3, 0)
    pose = PoseResult(boxes, scores, classes, points, ('a', 'b'))
    assert gpu_check.compare(pose, PoseResult(boxes, scores, classes, moved, ('a', 'b')),
                             'int8', 'x.jpg') == []
    assert gpu_check.compare(pose, PoseResult(boxes, scores, classes, moved, ('a', 'b')),
                             'fp16', 'x.jpg') == [
        'x.jpg: class 0 score 0.90: keypoints up to 3.00 px, scores up to 0.000 away']
    rescored = points.copy()
    rescored[0, 0, 2] = 0.7
    assert len(gpu_check.compare(pose, PoseResult(boxes, scores, classes, rescored,
                                                  ('a', 'b')), 'fp32', 'x.jpg')) == 1


@pytest.mark.parametrize('model', ['yolov8n_seg', 'yolov8n_pose'])
def test_segment_and_pose_models_are_checked_through_the_fakes(gpu_check, fake_gpu_machine,
                                                               model_dir, assets, tmp_path,
                                                               capsys, model):
    """--model with a segmentation or pose manifest: the masks and keypoints of the (fake)
    GPU paths are compared with the CPU's, and they match."""
    report = tmp_path / 'report.json'
    code = gpu_check.main(['--model', model, '--paths', 'onnx-cuda', 'tensorrt-fp16',
                           '--frames', '1', '--json', str(report), '--cache-dir',
                           str(tmp_path / 'cache')])
    out = capsys.readouterr().out
    assert code == 0, out
    results = {r['path']: r for r in json.loads(report.read_text())['results']}
    for name in ('onnx-cuda', 'tensorrt-fp16'):
        assert results[name]['status'] == 'match', results[name]
        assert results[name]['detections'] == results['cpu-reference']['detections']
    assert sum(results['cpu-reference']['detections']) > 0


def test_batches_of_a_segmentation_model_match_the_single_frame(gpu_check, model_dir, assets,
                                                                tmp_path):
    """--batch with two outputs (detections and mask prototypes): every frame of a batch is
    decoded from its slice of both, to the single frame's detections and masks."""
    import cv2

    from vision_nodes.tasks import resolve_manifest
    from vision_nodes.pipeline import build_pipeline
    from vision_nodes.tasks.detect import DetectionParams

    image = cv2.imread(str(assets / 'bus.jpg'))
    model = build_pipeline(resolve_manifest('yolov8n_seg'), 'cpu', cache_dir=tmp_path)
    try:
        rows = gpu_check.measure_batches(model, image, DetectionParams(0.25, 0.45, 300), (2,),
                                         frames=1)
    finally:
        model.close()
    assert rows[0]['batch'] == 2 and rows[0]['mismatches'] == []


def test_ultralytics_predict_is_timed_and_each_pipeline_put_beside_it(gpu_check, model_dir,
                                                                      assets, tmp_path):
    """--ultralytics: Ultralytics' own predict on the manifest's .pt is timed (here on the
    CPU, the device it is given) and each timed path's pipeline printed as a fraction of it; a
    model that is not an Ultralytics .pt is said so in one line."""
    import dataclasses

    import cv2

    from vision_nodes.tasks import resolve_manifest
    from vision_nodes.tasks.detect import DetectionParams

    image = cv2.imread(str(assets / 'bus.jpg'))
    setup = gpu_check.Setup(resolve_manifest('yolov8n'), {'bus.jpg': image},
                            DetectionParams(0.25, 0.45, 300), tmp_path, tmp_path, 'cpu', 2,
                            lambda _: None)
    predict_ms, reason = gpu_check.ultralytics_predict(setup, image)
    assert predict_ms > 0 and reason == ''
    path = next(p for p in gpu_check.PATHS if p.name == 'torch-cuda')
    ran = gpu_check.Outcome(path, status='match', pipeline_ms=predict_ms / 4)
    skipped = gpu_check.Outcome(next(p for p in gpu_check.PATHS if p.name == 'onnx-cuda'),
                                status='cannot run')
    line = gpu_check.predict_line([ran, skipped], predict_ms, '')
    assert line.endswith('pipeline / predict: torch-cuda 0.250'), line
    onnx_only = dataclasses.replace(setup.manifest, architecture='onnx', weights='model.onnx')
    other = gpu_check.Setup(onnx_only, {}, setup.params, tmp_path, tmp_path, 'cpu', 1,
                            lambda _: None)
    assert gpu_check.ultralytics_predict(other, image) == (
        None, f"'{onnx_only.name}' is not an Ultralytics .pt model")
    assert gpu_check.predict_line([ran], None, 'why') == "Ultralytics' predict not timed: why"
    on_no_gpu = dataclasses.replace(setup, device='0')  # this machine has no GPU 0
    none, why = gpu_check.ultralytics_predict(on_no_gpu, image)
    assert none is None and why.startswith('Ultralytics failed: ') and '\n' not in why, why


@pytest.mark.parametrize('model', ['yolov8n_obb', 'yolov8n_cls'])
def test_oriented_boxes_and_classification_run_through_the_fakes(gpu_check, fake_gpu_machine,
                                                                 model, model_dir, assets,
                                                                 tmp_path, capsys):
    """The two newer tasks are compared by their own results (rotated corners; class
    probabilities and top-k order), and a reduced path reports the agreement with fp32 that
    loading it measured on the validation set."""
    report = tmp_path / 'report.json'
    code = gpu_check.main(['--model', model, '--frames', '1', '--min-score', '0.05',
                           '--paths', 'onnx-cuda', 'tensorrt-fp32', 'tensorrt-fp16',
                           '--json', str(report), '--cache-dir', str(tmp_path / 'cache')])
    out = capsys.readouterr().out
    assert code == 0, out
    results = {r['path']: r for r in json.loads(report.read_text())['results']}
    for name in ('onnx-cuda', 'tensorrt-fp32', 'tensorrt-fp16'):
        assert results[name]['status'] == 'match', (name, results[name])
    assert results['tensorrt-fp32']['agreement'] is None
    measured = results['tensorrt-fp16']['agreement']
    assert measured['compute_type'] == 'fp16'
    assert 'measured against fp32 when loaded:' in out


def test_classification_and_rotated_box_comparisons_catch_a_difference(gpu_check):
    """The comparisons are real: a moved probability or swapped order is reported, and a
    rotated box written from another corner is the same box, while a moved one is not."""
    from vision_nodes.tasks.classify import Classification

    probs = np.array([0.6, 0.3, 0.1], np.float32)
    cpu = Classification(probs, np.array([0, 1, 2]), probs)
    moved = probs + np.array([-0.015, 0.015, 0.0], np.float32)
    gpu = Classification(moved, np.array([0, 1, 2]), moved)
    assert gpu_check.compare(cpu, gpu, 'fp16', 'a.jpg') == []
    assert gpu_check.compare(cpu, gpu, 'fp32', 'a.jpg') == [
        'a.jpg: class probabilities up to 0.0150 away']
    swapped = Classification(probs, np.array([1, 0, 2]), probs)
    assert gpu_check.compare(cpu, swapped, 'fp32', 'a.jpg') == [
        'a.jpg: top classes [1, 0, 2], the CPU [0, 1, 2]']
    box = np.array([[0, 0], [4, 0], [4, 2], [0, 2]], np.float64)
    assert gpu_check.corner_distance(box, np.roll(box, 1, axis=0)) == 0.0
    assert gpu_check.corner_distance(box, box + [3.0, 4.0]) == pytest.approx(5.0)
