"""The OpenVINO benchmarks run the runners' own models: settings, and int8 layer by layer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip('openvino', reason='OpenVINO is not installed')
pytest.importorskip('nncf', reason='NNCF is not installed (int8 quantization)')

BENCHMARKS = Path(__file__).resolve().parents[3] / 'benchmarks'


def _run(script: str, args: list[str], engine_cache_dir: Path, cwd: Path) -> str:
    """Run a benchmark the way a user does (no model folder setting); return its stdout."""
    env = {k: v for k, v in os.environ.items() if k != 'VISION_NODES_MODEL_DIR'}
    env['VISION_NODES_CACHE_DIR'] = str(engine_cache_dir)
    proc = subprocess.run([sys.executable, str(BENCHMARKS / script), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def _integer(kernel: str) -> bool:
    """Tell whether an OpenVINO ``exec_type`` names an 8-bit integer kernel (``..._I8``)."""
    return kernel.upper().endswith(('_I8', '_U8'))


def test_int8_layers_compares_each_convolution(model_dir, engine_cache_dir, tmp_path):
    """Every convolution of the network in both models; the int8 model's run int8 kernels but
    the float tail's (YOLO's DFL projection), and no float-model kernel is an integer one."""
    out = tmp_path / 'layers.json'
    stdout = _run('bench_int8_layers.py', ['--rounds', '2', '--frames', '1',
                                           '--profile-frames', '2', '--json', str(out)],
                  engine_cache_dir, tmp_path)
    assert 'int8 / float =' in stdout and 'the better of the two per convolution' in stdout
    report = json.loads(out.read_text())
    rows = report['convolutions']
    assert len(rows) == 64  # YOLOv8n's convolutions, the DFL's included
    assert all(r['float_us'] > 0 and r['int8_us'] > 0 and r['kernel'] in (1, 3) for r in rows)
    assert not any(_integer(r['float_kernel']) for r in rows)
    dfl = [r for r in rows if '/dfl/' in r['name']]
    assert len(dfl) == 1 and not _integer(dfl[0]['int8_kernel'])
    assert all(_integer(r['int8_kernel']) for r in rows if r not in dfl)
    assert sum(g['count'] for g in report['groups'].values()) == len(rows)
    assert 0 < report['best_per_layer_over_float'] <= 1
    assert report['whole_ms']['float'] > 0 and report['whole_ms']['int8'] > 0


def test_openvino_settings_compiles_what_the_runner_runs(model_dir, engine_cache_dir, tmp_path):
    """Each alternative compiles and runs the runner's input (the u8 twin where it takes u8)."""
    stdout = _run('bench_openvino_settings.py', ['--rounds', '1', '--frames', '1'],
                  engine_cache_dir, tmp_path)
    for setting in ('runner (f32)', 'THROUGHPUT hint, streams per core', 'one thread',
                    'CPU pinning on', 'dynamic-shape compile', 'int8 / f32'):
        assert any(line.startswith(setting) and '[' in line for line in stdout.splitlines()), \
            stdout
    assert 'CACHE_DIR, later (reads the blob)' in stdout
