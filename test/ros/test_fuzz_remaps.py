"""Fuzzing the node's topic remaps: outputs and inputs remapped onto each other and elsewhere.

A node runs a tiny detector and a tiny depth model (real ONNX graphs on ONNX Runtime, loaded
in milliseconds) with random remap rules over its own topic names, names other nodes of the
process hold with other types (``/rosout``, ``/parameter_events``, a publisher of our own) and
fresh names. Every case ends as the rules say it must: configure fails exactly when two
outputs share a topic or one lands on a topic the process has with another type; activate
fails exactly when an input lands on an output or on such a topic. A failure is one bounded
line naming what clashed (never a raw ``RCLError``), leaves no publisher or subscription
behind, and the node goes on through its transitions. Seeded and bounded: a few seconds.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

rclpy = pytest.importorskip('rclpy', reason='rclpy (ROS 2) is not installed')
pytest.importorskip('vision_msgs.msg', reason='vision_msgs is not built (scripts/setup_env.sh)')
pytest.importorskip('onnxruntime', reason='ONNX Runtime is not installed')
onnx = pytest.importorskip('onnx', reason='onnx builds the test models')

from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from vision_msgs.msg import Detection2DArray  # noqa: E402

from vision_nodes.ros.process.compat import lifecycle_state  # noqa: E402
from vision_nodes.ros.node import VisionNode  # noqa: E402

SCALE = max(1, int(os.environ.get('VISION_NODES_FUZZ_SCALE', '1')))
#: The node's outputs, in the order it creates them (diagnostics at start-up).
OUTPUTS = ['/diagnostics', 'det/detections', 'det/label_info', 'dep/depth/relative',
           'dep/depth/colored', 'dep/depth/camera_info']
INPUTS = ['image', 'camera_info']
#: Topics this process has with other types than any of the node's.
FOREIGN = ['/rosout', '/parameter_events', '/held_elsewhere']
FRESH = ['fresh', '/fresh_b', 'det/fresh']
MAX_MESSAGE = 600


def _save(graph_nodes, inputs, outputs, initializers, path: Path, names=None) -> str:
    graph = helper.make_graph(graph_nodes, 'tiny', inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid('', 17)])
    model.ir_version = 8
    if names:
        entry = model.metadata_props.add()
        entry.key, entry.value = 'names', repr(dict(enumerate(names)))
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return str(path)


@pytest.fixture(scope='module')
def manifests(tmp_path_factory) -> list[str]:
    """A 3-class detector head and a relative depth map, 64 x 64, as ONNX and manifests."""
    folder = tmp_path_factory.mktemp('remap_models')
    image = helper.make_tensor_value_info('images', TensorProto.FLOAT, [1, 3, 64, 64])
    weight = numpy_helper.from_array(
        np.random.default_rng(0).standard_normal((7, 3, 32, 32)).astype(np.float32), 'w')
    shape = numpy_helper.from_array(np.array([1, 7, -1], np.int64), 'shape')
    det = _save([helper.make_node('Conv', ['images', 'w'], ['conv'], strides=[32, 32]),
                 helper.make_node('Reshape', ['conv', 'shape'], ['output0'])], [image],
                [helper.make_tensor_value_info('output0', TensorProto.FLOAT, [1, 7, 4])],
                [weight, shape], folder / 'det.onnx', names=['a', 'b', 'c'])
    dep = _save([helper.make_node('ReduceMean', ['images'], ['depth'], axes=[1])], [image],
                [helper.make_tensor_value_info('depth', TensorProto.FLOAT, [1, 1, 64, 64])],
                [], folder / 'dep.onnx')
    paths = []
    for name, data in (('det', {'task': 'detect', 'weights': det, 'labels': 'from_weights'}),
                       ('dep', {'task': 'depth', 'weights': dep, 'depth': {'kind': 'relative'},
                                'preprocessing': {'letterbox': False}})):
        path = folder / f'{name}.yaml'
        path.write_text(yaml.safe_dump({'name': name, 'input_size': 64, 'backends': ['onnx'],
                                        **data}))
        paths.append(str(path))
    return paths


@pytest.fixture
def context():
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    holder = rclpy.create_node('remap_fuzz_holder', context=ctx)
    holder.create_publisher(String, '/held_elsewhere', 1)
    yield ctx, holder
    holder.destroy_node()
    rclpy.shutdown(context=ctx)


def _node(ctx, name: str, manifests: list[str], rules: list[tuple[str, str]], cache: Path,
          **params) -> VisionNode:
    args = ['--ros-args'] + [a for src, dst in rules for a in ('-r', f'{src}:={dst}')]
    overrides = [Parameter('models', value=manifests), Parameter('backend', value='onnx'),
                 Parameter('engine_cache_dir', value=str(cache)),
                 Parameter('dep.publish_camera_info', value=True)]
    overrides += [Parameter(k, value=v) for k, v in params.items()]
    return VisionNode(name, context=ctx, cli_args=args, parameter_overrides=overrides)


def _resolve(name: str, rules: list[tuple[str, str]]) -> str:
    """Where rcl puts ``name`` (root namespace): the first rule that matches it applies."""
    full = name if name.startswith('/') else f'/{name}'
    for src, dst in rules:
        if (src if src.startswith('/') else f'/{src}') == full:
            return dst if dst.startswith('/') else f'/{dst}'
    return full


def _rules(rng: random.Random) -> list[tuple[str, str]]:
    rules = []
    for _ in range(rng.randint(1, 3)):
        src = rng.choice(OUTPUTS + INPUTS)
        targets = OUTPUTS + INPUTS + FRESH + ([] if src == '/diagnostics' else FOREIGN)
        rules.append((src, rng.choice(targets)))
    return rules


def _failure(capfd, transition: str) -> str:
    lines = [line for line in capfd.readouterr().err.splitlines()
             if f'{transition} failed' in line]
    assert len(lines) == 1, lines
    return lines[0]


def _baseline(node: VisionNode) -> None:
    """Nothing but the start-up publishers (diagnostics, parameter events), no subscription."""
    assert len(list(node.publishers)) == 2, [p.topic_name for p in node.publishers]
    assert not list(node.subscriptions)


def test_fuzzed_remaps_fail_the_right_transition_in_one_line(context, manifests, tmp_path,
                                                             capfd):
    ctx, _ = context
    rng = random.Random(20)
    outcomes = {'configure': 0, 'activate': 0, 'active': 0}
    for case in range(40 * SCALE):
        rules = _rules(rng)
        outs = [_resolve(n, rules) for n in OUTPUTS]
        image, info = _resolve('image', rules), _resolve('camera_info', rules)
        node = _node(ctx, f'remap_fuzz_{case}', manifests, rules, tmp_path)
        try:
            capfd.readouterr()
            clash = len(set(outs)) < len(outs) or any(t in FOREIGN for t in outs)
            configured = node.trigger_configure()
            state = lifecycle_state(node)
            assert (state == 'unconfigured') == clash, (rules, state)
            if clash:
                outcomes['configure'] += 1
                message = _failure(capfd, 'configure')
                _baseline(node)
            else:
                loop = image in outs or info in outs or image == info or \
                    image in FOREIGN or info in FOREIGN
                node.trigger_activate()
                state = lifecycle_state(node)
                assert (state == 'inactive') == loop, (rules, state)
                if loop:
                    outcomes['activate'] += 1
                    message = _failure(capfd, 'activate')
                    assert not list(node.subscriptions)
                else:
                    outcomes['active'] += 1
                    message = ''
                    assert node.trigger_deactivate() and lifecycle_state(node) == 'inactive'
                assert node.trigger_cleanup() and lifecycle_state(node) == 'unconfigured'
                _baseline(node)
            assert configured is not None
            if message:
                assert len(message) < MAX_MESSAGE, message
                for text in ('RCLError', 'Traceback', 'unexpectedly', 'error processing'):
                    assert text not in message, message
                assert any(f"'{n}'" in message for n in OUTPUTS + INPUTS), message
        finally:
            node.release()
            node.destroy_node()
    assert all(outcomes.values()), outcomes  # the seed reaches all three outcomes


def test_a_type_another_process_uses_is_a_warning(manifests, tmp_path, capfd):
    """Another participant (another process, here another context) with another type on the
    topic: DDS allows it and nothing fails; the log says neither side hears the other."""
    ctx, other_ctx = rclpy.Context(), rclpy.Context()
    rclpy.init(context=ctx)
    rclpy.init(context=other_ctx)
    other = rclpy.create_node('remap_other_process', context=other_ctx)
    other.create_publisher(String, '/used_elsewhere', 1)
    node = _node(ctx, 'remap_warn', manifests, [('det/detections', '/used_elsewhere')],
                 tmp_path)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and '/used_elsewhere' not in dict(
                node.get_topic_names_and_types()):
            time.sleep(0.05)
        capfd.readouterr()
        node.trigger_configure()
        assert lifecycle_state(node) == 'inactive'
        err = capfd.readouterr().err
        assert ("output 'det/detections' (vision_msgs/msg/Detection2DArray) is on topic "
                "'/used_elsewhere', which the ROS graph also has as std_msgs/msg/String") in err
    finally:
        node.release()
        node.destroy_node()
        other.destroy_node()
        rclpy.shutdown(context=other_ctx)
        rclpy.shutdown(context=ctx)


def test_lazy_input_on_a_held_topic_is_logged_and_the_node_spins_on(context, manifests,
                                                                    tmp_path, capfd):
    """lazy: the image subscription is made by a timer once someone listens; rcl refusing it
    there is a rate-limited log line, not an exception out of the executor."""
    ctx, holder = context
    node = _node(ctx, 'remap_lazy', manifests, [('image', '/held_elsewhere')], tmp_path,
                 lazy=True)
    executor = SingleThreadedExecutor(context=ctx)
    executor.add_node(node)
    try:
        node.trigger_configure()
        node.trigger_activate()
        assert lifecycle_state(node) == 'active'
        capfd.readouterr()
        holder.create_subscription(Detection2DArray, '/det/detections', lambda _: None, 1)
        err, deadline = '', time.monotonic() + 20
        while time.monotonic() < deadline and 'cannot take images' not in err:
            executor.spin_once(timeout_sec=0.1)
            err += capfd.readouterr().err
        assert ("cannot take images: input 'image' (sensor_msgs/msg/Image) cannot use topic "
                "'/held_elsewhere': this process already has it as std_msgs/msg/String") in err
        executor.spin_once(timeout_sec=0.1)  # still spinning
        assert node.trigger_deactivate() and lifecycle_state(node) == 'inactive'
    finally:
        executor.shutdown()
        node.release()
        node.destroy_node()
