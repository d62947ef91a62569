"""Weights files are untrusted: a checkpoint never runs code, and bad files fail in one line."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from vision_nodes.loaders import ModelLoadError, load_torch_module
from vision_nodes.tasks import resolve_manifest

torch = pytest.importorskip('torch', reason='PyTorch is not installed')
pytest.importorskip('ultralytics', reason='ultralytics is not installed')


@pytest.fixture(scope='module')
def manifest():
    return resolve_manifest('yolov8n')


def _one_line(error: BaseException) -> str:
    message = str(error)
    assert '\n' not in message and len(message) <= 600, message[:2000]
    return message


class _Payload:
    """Pickles as a call of os.system that creates ``marker``: what a malicious .pt does."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f'touch {self.marker}',))


class _OpenPayload(_Payload):
    """Pickles as ``open(marker, 'w')``: creates the file without a shell."""

    def __reduce__(self):
        return (open, (str(self.marker), 'w'))


def _zip_checkpoint(path: Path, marker: Path) -> Path:
    torch.save({'model': _Payload(marker), 'ema': None}, path)
    return path


def _plain_pickle(path: Path, marker: Path) -> Path:
    path.write_bytes(pickle.dumps({'model': _OpenPayload(marker)}, protocol=2))
    return path


def _legacy_checkpoint(path: Path, marker: Path) -> Path:
    torch.save({'model': _Payload(marker)}, path, _use_new_zipfile_serialization=False)
    return path


def _payload_inside_model(path: Path, marker: Path) -> Path:
    """A real model whose pickled state carries the payload as one more attribute."""
    from ultralytics.nn.tasks import DetectionModel

    model = DetectionModel('yolov8n.yaml', verbose=False)
    model.hook = _Payload(marker)
    torch.save({'model': model}, path)
    return path


@pytest.mark.parametrize('make', [_zip_checkpoint, _plain_pickle, _legacy_checkpoint,
                                  _payload_inside_model],
                         ids=['torch.save', 'plain pickle', 'legacy format', 'inside a model'])
def test_malicious_checkpoint_never_runs_its_payload(manifest, tmp_path: Path, make) -> None:
    """The payload would create a file at load time: the file never appears."""
    marker = tmp_path / 'pwned'
    weights = make(tmp_path / 'evil.pt', marker)
    assert not marker.exists()
    with pytest.raises(ModelLoadError) as info:
        load_torch_module(manifest, weights)
    assert not marker.exists(), 'the checkpoint ran code while being loaded'
    message = _one_line(info.value)
    assert str(weights) in message


def test_refusal_names_the_global(manifest, tmp_path: Path) -> None:
    weights = _zip_checkpoint(tmp_path / 'evil.pt', tmp_path / 'pwned')
    with pytest.raises(ModelLoadError, match=r'refused: it names `posix\.system`.*trust'):
        load_torch_module(manifest, weights)


class _Construct:
    """Pickles as a call of an allowed layer class with arguments of the file's choosing."""

    def __reduce__(self):
        return (torch.nn.Linear, (3, 3))


class _GetAttr:
    """Pickles as ``getattr(layer, '__init__')``: more than a layer's forward method."""

    def __reduce__(self):
        return (getattr, (torch.nn.Identity(), '__init__'))


@pytest.mark.parametrize('payload,match', [
    (_Construct(), 'not construct one'),
    (_GetAttr(), r'getattr\(Identity, __init__\) is not allowed'),
], ids=['constructor call', 'getattr'])
def test_allowed_classes_are_rebuilt_never_called(manifest, tmp_path: Path, payload,
                                                  match: str) -> None:
    """A pickle may rebuild an allowed layer from its state but not call it with arguments.

    Calling layer constructors would let a file allocate any size or, for some layers,
    download weights; a getattr beyond forward methods would reach anything.
    """
    weights = tmp_path / 'call.pt'
    torch.save({'model': payload}, weights)
    with pytest.raises(ModelLoadError, match=match) as info:
        load_torch_module(manifest, weights)
    _one_line(info.value)


@pytest.mark.parametrize('content,name', [
    (b'hello, not a checkpoint', 'weights.bin'),
    (b'', 'empty.pt'),
    (b'PK\x03\x04' + b'\0' * 64, 'truncated_zip.pt'),
    (b'\x89PNG\r\n\x1a\n' + b'\0' * 64, 'image.pt'),
], ids=['text', 'empty', 'truncated zip', 'image'])
def test_files_that_are_not_checkpoints(manifest, tmp_path: Path, content: bytes,
                                        name: str) -> None:
    """Any suffix, any content: one line naming the file, never an AttributeError."""
    weights = tmp_path / name
    weights.write_bytes(content)
    with pytest.raises(ModelLoadError, match='is not a PyTorch checkpoint') as info:
        load_torch_module(manifest, weights)
    assert str(weights) in _one_line(info.value)


@pytest.mark.parametrize('payload', [{'weights': torch.zeros(3)}, torch.zeros(3), [1, 2]],
                         ids=['dict', 'tensor', 'list'])
def test_torch_file_without_a_model(manifest, tmp_path: Path, payload) -> None:
    weights = tmp_path / 'other.pt'
    torch.save(payload, weights)
    with pytest.raises(ModelLoadError, match='not an Ultralytics checkpoint') as info:
        load_torch_module(manifest, weights)
    _one_line(info.value)


def test_real_checkpoint_loads_as_ultralytics_loads_it(manifest, model_dir: Path) -> None:
    """yolov8n.pt through the safe loader: the same network, bit for bit, real classes."""
    from ultralytics import YOLO

    from vision_nodes.loaders.checkpoint import _REAL

    weights = model_dir / 'yolov8n.pt'
    module, labels = load_torch_module(manifest, weights)
    reference = YOLO(str(weights)).model.fuse().float().eval()  # trusted file: unsafe load
    x = torch.rand(1, 3, 640, 640, generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        ours, theirs = module(x).numpy(), reference(x)[0].numpy()
    assert ours.shape == (1, 84, 8400)
    np.testing.assert_array_equal(ours, theirs)
    assert labels == [reference.names[i] for i in sorted(reference.names)]
    assert not any(hasattr(type(m), _REAL) for m in module.modules())


def test_real_checkpoint_detections(manifest, model_dir: Path, bus_bgr,
                                    engine_cache_dir: Path) -> None:
    """The PyTorch runner on bus.jpg: the detections the README shows."""
    from vision_nodes.pipeline import build_pipeline
    from vision_nodes.tasks.detect import DetectionParams

    pipeline = build_pipeline(manifest, 'cpu', model_dir=str(model_dir),
                              cache_dir=engine_cache_dir)
    try:
        dets = pipeline.process(bus_bgr, 'bgr8', DetectionParams())
    finally:
        pipeline.close()
    names = sorted(pipeline.labels[c] for c in dets.class_ids)
    assert names.count('bus') == 1 and names.count('person') >= 3


PROBE = r'''
import os, sys, torch
from pathlib import Path
from vision_nodes.tasks import resolve_manifest
from vision_nodes.pipeline import build_pipeline
weights, marker, cache = sys.argv[1:4]
class Payload:
    def __reduce__(self):
        return (os.system, (f'touch {marker}',))
torch.save({'model': Payload()}, weights)
manifest = resolve_manifest('yolov8n')
for backend in ('onnx', 'cpu'):
    try:
        build_pipeline(manifest, backend, model_dir=str(Path(weights).parent), cache_dir=cache)
    except Exception as exc:
        print(backend, type(exc).__name__, str(exc).replace('\n', '\\n'))
print('MARKER', os.path.exists(marker))
'''


def test_configure_with_malicious_weights_in_a_fresh_process(tmp_path: Path) -> None:
    """Both backends' configure paths, in a process that never loaded Ultralytics before."""
    weights = tmp_path / 'models' / 'yolov8n.pt'
    weights.parent.mkdir()
    marker = tmp_path / 'pwned'
    result = subprocess.run([sys.executable, '-c', PROBE, str(weights), str(marker),
                             str(tmp_path / 'cache')], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.strip().splitlines()
    assert lines[-1] == 'MARKER False'
    for backend, line in zip(('onnx', 'cpu'), lines[:-1]):
        assert line.startswith(f'{backend} ModelLoadError ') and 'posix.system' in line
        assert '\\n' not in line and len(line) < 600
    assert not marker.exists()
