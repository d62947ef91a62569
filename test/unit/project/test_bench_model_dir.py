"""Benchmarks find the weights the way the demo does, with no setting (issue #21, item 6)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[3] / 'benchmarks' / 'bench_track3d.py'


def test_bench_track3d_finds_the_weights_without_a_model_dir_setting(
        model_dir, engine_cache_dir, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != 'VISION_NODES_MODEL_DIR'}
    env['VISION_NODES_CACHE_DIR'] = str(engine_cache_dir)
    proc = subprocess.run([sys.executable, str(SCRIPT), '--frames', '3'], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert 'detections per frame' in proc.stdout and 'tracking bytetrack' in proc.stdout
