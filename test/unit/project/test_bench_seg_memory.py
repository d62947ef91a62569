"""benchmarks/bench_seg_memory.py: one frame per fresh process, its peaks written as JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / 'benchmarks' / 'bench_seg_memory.py'


def test_small_frames_are_measured_per_stage_and_written(model_dir, engine_cache_dir, tmp_path):
    """A 480x640 frame from each source: detections, masks held at their windows' size
    (well under one byte a pixel per detection), a peak per stage and for the frame."""
    pytest.importorskip('onnxruntime', reason='ONNX Runtime is not installed')
    env = dict(os.environ, VISION_NODES_CACHE_DIR=str(engine_cache_dir),
               VISION_NODES_MODEL_DIR=str(model_dir))
    out = tmp_path / 'memory.json'
    proc = subprocess.run([sys.executable, str(SCRIPT), '--sizes', '480x640', '--json',
                           str(out)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    cases = json.loads(out.read_text())['cases']
    assert [c['source'] for c in cases] == ['tiles', 'synthetic']
    assert cases[1]['detections'] == 300 and cases[0]['detections'] > 10
    for case in cases:
        assert case['size'] == [480, 640] and 'peak RSS added' in proc.stdout
        assert case['mask_bytes'] < 480 * 640 * case['detections'] / 4
        stages = [case[s] for s in ('postprocess', 'instance_mask', 'annotated')]
        assert all(v >= 0 for v in stages) and case['frame'] >= max(stages)
