"""The node's executor (``ros/process/executor.py``) over real rclpy, in this process.

* A background callback group's callbacks each run on a fresh thread; a finished one is not
  kept (every transition of a node cycling for days used to stay in a list).
* A subscription destroyed by a transition while the spinning thread builds its wait set
  costs that wait, not the process: rclpy raises ``InvalidHandle`` when an event handler it
  has taken for the wait set is destroyed before it is added (seen under load in
  ``scripts/soak.py --lifecycle``: the node exited with that traceback during a deactivate).
"""

from __future__ import annotations

import gc
import threading

import pytest

rclpy = pytest.importorskip('rclpy', reason='rclpy (ROS 2) is not installed')

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup  # noqa: E402
from std_msgs.msg import String  # noqa: E402

from node_harness import node_in_own_context  # noqa: E402
from vision_nodes.ros.process.executor import TransitionExecutor  # noqa: E402
from vision_nodes.tools.client import wait_for  # noqa: E402


def _finished_transition_threads() -> int:
    return sum(1 for o in gc.get_objects() if isinstance(o, threading.Thread)
               and o.name == 'transition' and not o.is_alive())


def _spin_until(executor: TransitionExecutor, done, timeout: float = 30.0) -> bool:
    return wait_for(lambda: executor.spin_once(timeout_sec=0.05) or done(), timeout, 0.0)


def test_finished_background_threads_are_not_kept():
    with node_in_own_context('executor_threads') as node:
        executor = TransitionExecutor(context=node.context)
        group = MutuallyExclusiveCallbackGroup()
        executor.run_in_background(group)
        executor.add_node(node)
        ran = []
        node.create_timer(0.01, lambda: ran.append(1), callback_group=group)
        try:
            before = _finished_transition_threads()
            assert _spin_until(executor, lambda: len(ran) >= 20)
            # Not executor.wait_idle, which forgets the finished ones itself.
            assert wait_for(lambda: not any(t.name == 'transition'
                                            for t in threading.enumerate()), 10.0)
            gc.collect()
            assert _finished_transition_threads() - before <= 1, len(ran)
        finally:
            executor.shutdown(timeout_sec=0)


def test_a_subscription_destroyed_while_the_wait_set_is_built_costs_one_wait():
    try:
        from rclpy.event_handler import SubscriptionEventCallbacks
    except ImportError:  # Humble
        from rclpy.qos_event import SubscriptionEventCallbacks

    with node_in_own_context('executor_race') as node:
        executor = TransitionExecutor(context=node.context)
        executor.add_node(node)
        sub = node.create_subscription(
            String, 'race', lambda msg: None, 1,
            event_callbacks=SubscriptionEventCallbacks(incompatible_qos=lambda event: None))
        handler = sub.event_handlers[0]
        add = handler.add_to_wait_set

        def destroyed_in_between(wait_set):
            # What the transition thread does between rclpy holding the handler and adding
            # it: its destruction is deferred while held, and the add then raises.
            node.destroy_subscription(sub)
            add(wait_set)
        handler.add_to_wait_set = destroyed_in_between
        ticks = []
        node.create_timer(0.01, lambda: ticks.append(1))
        try:
            executor.spin_once(timeout_sec=0.05)
            assert sub not in node.subscriptions
            assert _spin_until(executor, lambda: len(ticks) >= 3)
        finally:
            executor.shutdown(timeout_sec=0)
