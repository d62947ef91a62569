"""Fixtures shared by the task tests."""

import pytest


@pytest.fixture
def fake_trt(monkeypatch):
    """Install a fake TensorRT and CUDA runtime (test/fake_tensorrt.py) running the ONNX."""
    import sys

    from fake_tensorrt import make_fake_cudart, make_fake_tensorrt

    rt = make_fake_cudart([{'name': 'NVIDIA Fake RTX 4090', 'cc': (8, 9), 'memory': 24 << 30}])
    monkeypatch.setitem(sys.modules, 'cuda.bindings.runtime', rt)
    trt = make_fake_tensorrt(rt)
    monkeypatch.setitem(sys.modules, 'tensorrt', trt)
    return trt
