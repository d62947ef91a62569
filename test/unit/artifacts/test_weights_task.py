"""The weights' own task is checked on every configure, whatever the engine cache holds.

An Ultralytics checkpoint says which task it was trained for; a manifest of another task is
refused when the checkpoint is read for the export. Before the task was part of the export's
cache key, a warm cache skipped that read: a ``task: pose`` manifest pointed at -seg weights
found the segment export (1x116x8400 passes the pose shape check: 4 + 61 classes + 51) and
published keypoints at (0, 0) without a word.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

pytest.importorskip('torch', reason='PyTorch is not installed (exports .pt weights)')
pytest.importorskip('onnxruntime', reason='ONNX Runtime is not installed')

from vision_nodes.loaders import ModelLoadError  # noqa: E402
from vision_nodes.tasks import resolve_manifest  # noqa: E402
from vision_nodes.pipeline import build_pipeline  # noqa: E402


@pytest.mark.parametrize('backend', ['onnx', 'openvino'])
def test_pose_manifest_on_seg_weights_is_refused_on_a_warm_cache(model_dir, tmp_path, backend):
    pytest.importorskip('openvino') if backend == 'openvino' else None
    cache = tmp_path / 'cache'
    seg = resolve_manifest('yolov8n_seg')
    build_pipeline(seg, backend, model_dir=str(model_dir), cache_dir=cache).close()
    assert any(cache.rglob('model.onnx')), 'the segment export is in the cache'
    pose_on_seg = replace(resolve_manifest('yolov8n_pose'), weights=seg.weights)
    with pytest.raises(ModelLoadError) as info:
        build_pipeline(pose_on_seg, backend, model_dir=str(model_dir), cache_dir=cache)
    text = str(info.value)
    assert "holds a segment model but manifest 'yolov8n_pose' has task 'pose'" in text
    assert '\n' not in text
