"""benchmarks/gpu_threads.py: several models at once on their own threads, checked against
each model alone. Its GPU run needs a GPU; its logic runs here for real on the CPU backend
(real models, real threads), and a defect planted in the threads' results is caught."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from vision_nodes.platform import cuda

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / 'benchmarks' / 'gpu_threads.py'


@pytest.fixture(scope='module')
def gpu_threads():
    sys.path.insert(0, str(ROOT / 'benchmarks'))
    spec = importlib.util.spec_from_file_location('gpu_threads', SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_without_a_gpu_it_says_so_and_exits_0(gpu_threads, capsys):
    if cuda.gpu_info(0) is not None:
        pytest.skip('a GPU is visible here')
    assert gpu_threads.main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith('gpu_threads: backend cuda cannot run here: ') and out.count('\n') == 1


def test_models_on_their_own_threads_answer_as_alone(gpu_threads, model_dir, assets,
                                                     tmp_path, capsys):
    """On the CPU backend: every frame of every model, run together, equals the model alone."""
    report = tmp_path / 'r.json'
    code = gpu_threads.main(['--backend', 'cpu', '--models', 'yolov8n', 'yolov8n_cls',
                             '--rounds', '2', '--json', str(report)])
    out = capsys.readouterr().out
    assert code == 0, out
    data = json.loads(report.read_text())
    assert data['ok'] and [m['model'] for m in data['models']] == ['yolov8n', 'yolov8n_cls']
    for row in data['models']:
        assert row['frames'] == 2 * len(data['images']) and row['frames'] >= 4
        assert row['differences'] == row['failed_captures'] == row['errors'] == []
    assert 'verdict: every frame as the model gives alone' in out


def test_a_thread_that_differs_or_raises_fails_the_check(gpu_threads, model_dir, assets,
                                                         tmp_path, monkeypatch, capsys):
    """A result moved on the threads, or an exception there, is reported and exits 1."""
    real = gpu_threads.Loaded.run_together

    def planted(self, images, names, rounds, start):
        process = self.model.process

        def moved(image, encoding, params):
            found = process(image, encoding, params)
            if self.entry == 'yolov8n_cls':
                raise RuntimeError('operation not permitted when stream is capturing')
            return dataclasses.replace(found, boxes=found.boxes + 40.0)

        self.model.process = moved
        try:
            real(self, images, names, rounds, start)
        finally:
            self.model.process = process

    monkeypatch.setattr(gpu_threads.Loaded, 'run_together', planted)
    code = gpu_threads.main(['--backend', 'cpu', '--models', 'yolov8n', 'yolov8n_cls',
                             '--rounds', '1'])
    out = capsys.readouterr().out
    assert code == 1, out
    assert '  yolov8n: 2 frames, DIFFERS' in out and 'missing from the GPU' in out
    assert 'RuntimeError: operation not permitted when stream is capturing' in out
    assert 'verdict: a model failed or differed' in out
