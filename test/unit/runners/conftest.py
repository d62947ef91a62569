"""Fixtures shared by the runner tests: fake TensorRT and CUDA runtime, a tiny ONNX model."""

import sys
from pathlib import Path

import pytest

from fake_tensorrt import make_fake_cudart, make_fake_tensorrt
from tiny_onnx import tiny_detector

#: The fake GPU every TensorRT test starts with (tests may change it through ``.state``).
FAKE_GPU = {'name': 'NVIDIA Fake RTX 4090', 'cc': (8, 9), 'memory': 24 << 30}


@pytest.fixture
def fake_gpu(monkeypatch):
    """Install a fake cuda-python runtime with one GPU; return it (``.state`` holds GPUs)."""
    rt = make_fake_cudart([dict(FAKE_GPU)])
    monkeypatch.setitem(sys.modules, 'cuda.bindings.runtime', rt)
    return rt


@pytest.fixture
def fake_trt(monkeypatch, fake_gpu):
    """Install a fake TensorRT 10.x bound to the fake GPU."""
    trt = make_fake_tensorrt(fake_gpu)
    monkeypatch.setitem(sys.modules, 'tensorrt', trt)
    return trt


@pytest.fixture(scope='module')
def tiny_onnx(tmp_path_factory) -> Path:
    """Write a small detection-shaped model with free height and width (1x1 conv, pooling)."""
    pytest.importorskip('onnx', reason='onnx builds the small test model')
    return tiny_detector(tmp_path_factory.mktemp('tiny') / 'tiny.onnx')
