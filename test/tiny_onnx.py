"""Test helper: a small detection-shaped ONNX model (pooling, 1x1 conv) written with ``onnx``."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def tiny_detector(path: Path, channels: int = 3) -> Path:
    """Write a (1, ``channels``, height, width) -> (1, 84, anchors) model to ``path``.

    Height and width are free; one anchor per 8 x 8 block.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(
        rng.standard_normal((84, channels, 1, 1)).astype(np.float32), 'w')
    shape = numpy_helper.from_array(np.array([1, 84, -1], np.int64), 'shape')
    graph = helper.make_graph(
        [helper.make_node('AveragePool', ['images'], ['pooled'], kernel_shape=[8, 8],
                          strides=[8, 8]),
         helper.make_node('Conv', ['pooled', 'w'], ['conv']),
         helper.make_node('Reshape', ['conv', 'shape'], ['output0'])],
        'tiny', [helper.make_tensor_value_info('images', TensorProto.FLOAT,
                                               [1, channels, 'height', 'width'])],
        [helper.make_tensor_value_info('output0', TensorProto.FLOAT, [1, 84, 'anchors'])],
        [weight, shape])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid('', 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path
