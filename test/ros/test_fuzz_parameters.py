"""Fuzzing the node's parameters: start-up values and live sets, valid and hostile alike.

Every random value ends in one of two ways: taken (it is valid for its parameter, and the
state allows the change) or refused with a one-line reason naming the parameter. The node
never raises, never ends up holding an invalid value, and keeps answering. Seeded and
bounded: a few seconds.
"""

from __future__ import annotations

import math
import random

import pytest

rclpy = pytest.importorskip('rclpy', reason='rclpy (ROS 2) is not installed')
pytest.importorskip('vision_msgs.msg', reason='vision_msgs is not built (scripts/setup_env.sh)')

from rclpy.parameter import Parameter  # noqa: E402

from node_harness import own_context  # noqa: E402
from vision_nodes.ros.process.compat import lifecycle_state  # noqa: E402
from vision_nodes.ros.node import VisionNode  # noqa: E402
from vision_nodes.ros.params.policy import output_switches  # noqa: E402
from vision_nodes.ros.params.specs import PARAMS, REPORTS, coerce, validate  # noqa: E402
from vision_nodes.tasks.detect import DetectionTask  # noqa: E402

NODE_SPECS = {spec.name: spec for spec in PARAMS}
TASK_SPECS = {spec.name: spec for spec in DetectionTask.params + output_switches('detect')}
NASTY_TEXT = ['', ' ', 'x' * 5000, 'bad\nline\x1b[31mred', '../../etc/passwd', '\x00', 'é✓']


def _value(rng: random.Random, spec) -> object:
    """A random value for ``spec``: often valid, often not, sometimes of another type."""
    roll = rng.random()
    default = spec.default
    if roll < 0.25:  # another type altogether
        return rng.choice([1, -7, 2 ** 62, 0.5, math.nan, math.inf, -math.inf, True, 'text',
                           ['a', 'b'], [1, 2], rng.choice(NASTY_TEXT)])
    if isinstance(default, bool):
        return rng.random() < 0.5
    if isinstance(default, float):
        low, high = spec.float_range or (-1e9, 1e9)
        return rng.choice([rng.uniform(low, high), low - 1.0, high + 1.0, math.nan, math.inf,
                           int(rng.uniform(low, high))])
    if isinstance(default, int):
        low, high = spec.int_range or (-1000, 1000)
        return rng.choice([rng.randint(low, high), low - 1, high + 1, 2 ** 62])
    if isinstance(default, list):
        return rng.choice([[], ['yolov8n'], ['yolov8n', 'yolov8n'], ['x' * 5000],
                           [rng.choice(NASTY_TEXT)] * rng.randint(1, 12)])
    if spec.choices:
        return rng.choice(list(spec.choices) + NASTY_TEXT)
    return rng.choice(NASTY_TEXT + ['yolov8n', '/tmp'])


def _expected_error(spec, name: str, value, start_up: bool = True) -> bool:
    """Whether the node must refuse ``value`` (as its own rules say).

    At start-up an integer where a number is expected is read as that number; a live set
    keeps ROS's own typing (``ros2 param set ... 1`` for a double is refused by rclpy).
    """
    if start_up:
        value = coerce(spec, value)
    if name in NODE_SPECS:
        return validate(name, value) is not None
    # A task parameter's further rule (tracker_config: a usable file) sees the others at
    # their defaults: no random tracker_config is a usable file, so none is ever taken.
    return spec.refusal(value, {}) is not None


@pytest.fixture
def context():
    with own_context() as ctx:
        yield ctx


def test_start_up_values_are_taken_or_named_never_raised(context):
    """150 nodes started with random overrides: no exception, each refusal names its
    parameter, valid values are taken, refused ones leave the default."""
    rng = random.Random(1)
    specs = {**NODE_SPECS, **TASK_SPECS}
    for case in range(150):
        chosen = rng.sample(sorted(specs), rng.randint(1, 6))
        overrides = {}
        for name in chosen:
            value = _value(rng, specs[name])
            if isinstance(value, list) and value and not all(isinstance(v, str) for v in value):
                continue  # rcl cannot even carry a mixed list; a YAML file cannot hold one
            overrides[name] = value
        params = [Parameter(k, value=v) for k, v in overrides.items()
                  if not isinstance(v, list) or v]
        node = VisionNode(f'fuzz_startup_{case}', context=context, parameter_overrides=params)
        try:
            for param in params:
                spec = specs[param.name]
                if not node.has_parameter(param.name):
                    # A task's parameter for a model that did not resolve: declared (and
                    # checked) at configure, once the model does.
                    assert param.name in TASK_SPECS and param.name not in node.parameters.errors
                    continue
                refused = param.name in node.parameters.errors
                assert refused == _expected_error(spec, param.name, param.value), \
                    (param.name, param.value, node.parameters.errors)
                if refused:
                    message = node.parameters.errors[param.name]
                    assert message.startswith(f'parameter {param.name}: ')
                    assert '\n' not in message and len(message) < 600
                    assert node.parameters.value(param.name) == spec.default
                else:
                    assert node.parameters.value(param.name) == coerce(spec, param.value)
        finally:
            node.destroy_node()


def test_live_sets_are_taken_or_refused_with_a_reason(context):
    """500 random parameter sets on an unconfigured node: each result is successful exactly
    when the value is valid; the stored value is always valid; reports stay read only."""
    rng = random.Random(2)
    node = VisionNode('fuzz_live', context=context)
    specs = {**NODE_SPECS, **TASK_SPECS, **{s.name: s for s in REPORTS}}
    try:
        for _ in range(500):
            name = rng.choice(sorted(specs))
            spec = specs[name]
            if not node.has_parameter(name):
                continue
            value = _value(rng, spec)
            try:
                param = Parameter(name, value=value)
            except Exception:  # noqa: BLE001 - not even a parameter value (mixed list)
                continue
            if isinstance(value, list) and not value:
                continue  # an empty list has no type a set can carry
            try:
                result = node.set_parameters([param])[0]
            except Exception as exc:  # noqa: BLE001 - rclpy's own type/range refusals
                assert type(exc).__name__ in ('InvalidParameterTypeException',
                                              'InvalidParameterValueException'), exc
                continue
            if spec in REPORTS:
                assert not result.successful
                assert 'read only' in result.reason or 'Wrong parameter type' in result.reason
                continue
            assert result.successful == (not _expected_error(spec, name, value, False)), \
                (name, value, result.reason)
            if not result.successful:
                assert result.reason and '\n' not in result.reason
            stored = node.parameters.value(name)
            if not (isinstance(stored, list) and not stored):
                assert _expected_error(spec, name, stored) is False, (name, stored)
        assert lifecycle_state(node) == 'unconfigured'
    finally:
        node.destroy_node()


@pytest.mark.parametrize('atomically', [False, True], ids=['set', 'set_atomically'])
def test_undeclared_names_are_refused_never_taken(context, atomically):
    """An empty name (which rclpy's own undeclared-name check lets through) and other names
    the node does not have: refused with a reason, never declared, as ``ros2 param set``
    reports it (the service turns rclpy's exception into a failed result)."""
    from rclpy.exceptions import ParameterNotDeclaredException

    rng = random.Random(3)
    node = VisionNode('fuzz_undeclared', context=context)
    names = ['', ' ', '.', 'x' * 300, 'model ', 'yolov8n.confidence_threshold', '\x00',
             'qos_overrides./image.subscription.depth']
    try:
        for name in names * 3:
            value = _value(rng, NODE_SPECS['model'])
            param = Parameter(name, value=value)
            try:
                result = (node.set_parameters_atomically([param]) if atomically
                          else node.set_parameters([param])[0])
            except ParameterNotDeclaredException:
                assert name, 'the empty name must reach the node and be refused by it'
            else:
                assert not result.successful, (name, value)
                assert 'is not declared on this node' in result.reason, result.reason
                assert '\n' not in result.reason and len(result.reason) < 600
            assert not node.has_parameter(name)
        assert node.get_parameter('model').value == NODE_SPECS['model'].default
    finally:
        node.destroy_node()
