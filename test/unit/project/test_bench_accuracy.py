"""The accuracy benchmark (benchmarks/bench_accuracy.py): agreement, speed-up, labels, plot.

A tiny run (YOLOv8n on OpenVINO at fp32, and at fp16 where the CPU computes bf16; one round;
the check's price not measured) on a labelled folder made of yolov8n's own fp32 detections
of bus.jpg and zidane.jpg, so that fp32's mAP against those labels is ~1. No timing is
asserted.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip('openvino', reason='OpenVINO is not installed')
pytest.importorskip('pycocotools', reason='pycocotools is not installed (the measures)')

BENCHMARKS = Path(__file__).resolve().parents[3] / 'benchmarks'


def _bench():
    sys.path.insert(0, str(BENCHMARKS))  # the benchmark imports its siblings
    spec = importlib.util.spec_from_file_location('bench_accuracy',
                                                  BENCHMARKS / 'bench_accuracy.py')
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope='module')
def bench():
    return _bench()


@pytest.fixture(scope='module')
def labelled(model_dir, engine_cache_dir, assets, tmp_path_factory):
    """(YOLO txt folder, COCO json folder, the labels, label names): fp32's own detections."""
    import cv2

    from vision_nodes.tasks import resolve_manifest
    from vision_nodes.pipeline import build_pipeline
    from vision_nodes.tasks.registry import param_defaults

    manifest = resolve_manifest('yolov8n')
    model = build_pipeline(manifest, 'openvino', precision='fp32')
    params = model.task.make_params(param_defaults(manifest))
    yolo, coco = tmp_path_factory.mktemp('labels_yolo'), tmp_path_factory.mktemp('labels_coco')
    images, notes, found = [], [], {}
    for image_id, name in enumerate(('bus.jpg', 'zidane.jpg'), start=1):
        bgr = cv2.imread(str(assets / name))
        height, width = bgr.shape[:2]
        result = model.process(bgr, 'bgr8', params)
        assert len(result) >= 3  # people and a bus; zidane's two people and a tie
        found[name] = result
        lines = []
        for (x1, y1, x2, y2), cls in zip(result.boxes.tolist(), result.class_ids.tolist()):
            lines.append(f'{cls} {(x1 + x2) / 2 / width:.7f} {(y1 + y2) / 2 / height:.7f} '
                         f'{(x2 - x1) / width:.7f} {(y2 - y1) / height:.7f}')
            notes.append({'id': len(notes) + 1, 'image_id': image_id, 'iscrowd': 0,
                          'category_id': cls + 1, 'bbox': [x1, y1, x2 - x1, y2 - y1]})
        (yolo / name).with_suffix('.txt').write_text('\n'.join(lines) + '\n')
        for folder in (yolo, coco):
            shutil.copy(assets / name, folder / name)
        images.append({'id': image_id, 'file_name': name, 'width': width, 'height': height})
    # COCO's own habit: category ids from 1, so the class comes from the name
    categories = [{'id': i + 1, 'name': label} for i, label in enumerate(model.labels)]
    (coco / 'instances.json').write_text(json.dumps(
        {'images': images, 'annotations': notes, 'categories': categories}))
    labels = model.labels
    model.close()
    return yolo, coco, found, labels


def test_yolo_and_coco_labels_give_the_same_reference(bench, labelled):
    yolo, coco, found, names = labelled
    for folder in (yolo, coco):
        paths, references = bench.load_labels(folder, names)
        assert [p.name for p in paths] == ['bus.jpg', 'zidane.jpg']
        for path, reference in zip(paths, references):
            detections = found[path.name]
            assert np.array_equal(reference.class_ids, detections.class_ids)
            assert np.allclose(reference.boxes, detections.boxes, atol=0.01)
            assert np.all(reference.scores == 1.0)


def test_a_bad_label_line_is_one_line_naming_the_file_and_the_rule(bench, labelled, tmp_path):
    yolo = labelled[0]
    shutil.copy(yolo / 'bus.jpg', tmp_path / 'bus.jpg')
    (tmp_path / 'bus.txt').write_text('0 0.5 0.5 0.2 0.2\n3 0.5 1.5 0.1 0.1\n')
    with pytest.raises(SystemExit) as refused:
        bench.load_labels(tmp_path, labelled[3])
    message = str(refused.value)
    assert '\n' not in message and 'bus.txt: line 2' in message and "'3 0.5 1.5 0.1 0.1'" in \
        message and 'four values in 0..1' in message
    (tmp_path / 'bus.txt').unlink()
    with pytest.raises(SystemExit, match='no image with a same-named .txt and no '
                                         'instances.json'):
        bench.load_labels(tmp_path, labelled[3])


def test_the_check_cost_is_the_paired_share_of_each_configure(bench):
    times = {'cold, check': [[12.0], [11.0], [13.0]], 'cold, no check': [[10.0], [10.0], [10.0]],
             'cached, check': [[0.5], [0.5], [0.5]], 'cached, no check': [[0.5], [0.5], [0.5]],
             'cold, check, whole process': [[16.0], [15.0], [17.0]],
             'cold, no check, whole process': [[14.0], [14.0], [14.0]]}
    cost = bench._cost_summary('yolov8n', 'fp16', times, {})
    assert cost['repeats'] == 3 and cost['seconds']['cold, check'] == 12.0
    cold = cost['cold_added_percent']
    assert cold['median'] == pytest.approx(20.0)
    assert 10.0 - 1e-9 <= cold['low'] <= 20.0 <= cold['high'] <= 30.0 + 1e-9
    assert cost['cached_added_percent'] == {'median': 0.0, 'low': 0.0, 'high': 0.0}
    assert cost['cold_process_added_percent']['median'] == pytest.approx(100 * 2 / 14)
    assert 'cached_process_added_percent' not in cost


def test_a_tiny_run_writes_agreements_labels_map_and_the_plot(labelled, engine_cache_dir,
                                                              tmp_path):
    from vision_nodes.platform.cpu import cpu_info

    yolo = labelled[0]
    configs = ['openvino:fp32'] + (['openvino:fp16'] if cpu_info().bf16 else [])
    out, plot = tmp_path / 'acc.json', tmp_path / 'acc.png'
    env = {k: v for k, v in os.environ.items() if k != 'VISION_NODES_MODEL_DIR'}
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / 'bench_accuracy.py'), '--configs', *configs,
         '--rounds', '1', '--cost-repeats', '0', '--labels', str(yolo), '--json', str(out),
         '--plot', str(plot)], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(out.read_text())
    rows = report['configs']
    assert list(rows) == [f'yolov8n {c}' for c in configs] and not report['skipped']
    assert report['machine']['cpu'] and 'cpu_flags' in report['machine']
    for row in rows.values():
        assert 0.0 <= row['agreement']['value'] <= 1.0
        assert row['pipeline_ms'] > 0 and row['speedup']['low'] <= row['speedup']['high']
        assert 0.0 <= row['labels']['map50_95'] <= 1.0 and row['labels']['images'] == 2
    fp32 = rows['yolov8n openvino:fp32']
    assert fp32['labels']['map50_95'] >= 0.99 and fp32['labels']['recall50'] == 1.0
    assert fp32['speedup']['median'] == 1.0 and fp32['compute_type'] == 'fp32'
    if 'yolov8n openvino:fp16' in rows:
        reduced = rows['yolov8n openvino:fp16']
        assert reduced['compute_type'] == 'bf16'
        assert reduced['agreement']['measure'] == 'box mAP50-95'
        assert reduced['agreement']['images'] >= 10
        assert any(line.startswith('precision bf16: ') for line in reduced['precision_log'])
    assert 'yolov8n openvino:fp32' in proc.stdout and 'labels mAP' in proc.stdout
    assert plot.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
