"""Every private rclpy detail the package touches, named here with why, and nowhere else.

rclpy has no public API for these; each is read in one place so that a new rclpy release that
renames one breaks here, in one line, and not across the package.

* ``LifecycleNode._state_machine``: the current lifecycle state. The public way is a call of
  the node's own ``get_state`` service, which a callback on the executor's thread (the
  parameter callback, the diagnostics timer) cannot wait for.
* ``Node._parameter_overrides``: the start-up values (``-p``, parameters files). The node
  declares with ``ignore_override`` and checks them itself, so that a bad value is one line
  and not a traceback (:func:`.params.declare`); tasks' defaults must not replace them.
* ``LifecycleNode._service_change_state``: the ``change_state`` service, moved into a
  callback group of its own so transitions run off the spinning thread (:mod:`.executor`).
* ``SingleThreadedExecutor._spin_once_impl``: the one step of spinning; overridden
  (:class:`SteppedExecutor`) to run some callback groups on threads of their own.
* ``Executor._guard``: the guard condition that wakes a waiting executor.
* ``_rclpy.WaitSet``, ``Subscription.handle.take_message`` and the ``EventHandler`` waitable
  calls: how rclpy's executor waits for and takes a message and serves an event; the
  single-camera inference thread waits on its image subscription and takes each frame
  itself with them (:class:`SubscriptionWaiter`), as rclpy has no public way to wait for one
  subscription outside an executor.
* ``rclpy_implementation.RCLError``: what rcl raises for a refused topic, and with
  ``RCLInvalidROSArgsError`` / ``UnknownROSArgsError`` for refused start-up arguments
  (:mod:`.startup`); the C extension's exception types have no public import.
* ``Subscription.CallbackType`` (Jazzy and later): whether subscription callbacks may take
  the message info as a second argument (Humble's take the message alone).
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from typing import Any, Callable

from rclpy.exceptions import InvalidHandle
from rclpy.executors import SingleThreadedExecutor
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.subscription import Subscription

#: The exception rcl raises when it refuses an endpoint (see the module docstring).
RCLError: type = _rclpy.RCLError
#: What ``rclpy.init`` raises for ROS arguments rcl cannot parse, and for unknown ones.
RCL_ARGUMENT_ERRORS: tuple[type, ...] = tuple(
    getattr(_rclpy, name) for name in ('RCLError', 'RCLInvalidROSArgsError')
    if hasattr(_rclpy, name))
UNKNOWN_ROS_ARGS_ERROR: type | tuple = getattr(_rclpy, 'UnknownROSArgsError', ())
#: Whether subscription callbacks may take ``(msg, message_info)``.
MESSAGE_INFO: bool = hasattr(Subscription, 'CallbackType')


def lifecycle_state(node: Any) -> str:
    """Return the label of the lifecycle node's current state ('unconfigured', 'active', ...)."""
    return node._state_machine.current_state[1]


def parameter_overrides(node: Any) -> dict[str, Any]:
    """Return the node's start-up parameter values by name (``-p``, parameters files)."""
    return getattr(node, '_parameter_overrides', {})


def change_state_service(node: Any) -> Any:
    """Return the lifecycle node's ``change_state`` service (None without lifecycle services)."""
    return getattr(node, '_service_change_state', None)


def wake(executor: Any) -> None:
    """Wake an executor waiting for work (it builds its wait set again)."""
    executor._guard.trigger()


class SteppedExecutor(SingleThreadedExecutor):
    """A single-threaded executor whose spinning step is :meth:`spin_step`."""

    def spin_step(self, timeout_sec: Any, wait_condition: Callable[[], bool]) -> None:
        """Wait for one ready callback and run it (subclasses decide where)."""
        raise NotImplementedError

    def _spin_once_impl(self, timeout_sec: Any = None,
                        wait_condition: Callable[[], bool] = lambda: False) -> None:
        self.spin_step(timeout_sec, wait_condition)


class SubscriptionWaiter:
    """Wait for one subscription's next message outside any executor, and take it.

    The wait set holds the subscription, its event handlers (incompatible QoS and the like)
    and a guard condition that ends the wait early; rclpy's executor waits and takes the same
    way (see the module docstring). The events are served here, not by an executor: with
    the rmw of Fast DDS a subscription's data and its events notify one waiter, so an
    executor waiting on the events would hold up the wake-up of this one by milliseconds.
    """

    def __init__(self, context: Any) -> None:
        self._context = context
        self._wait_sets: dict[int, Any] = {}

    def _wait_set(self, events: int) -> Any:
        """Return a wait set for one subscription, one guard condition and ``events`` events."""
        if events not in self._wait_sets:
            self._wait_sets[events] = _rclpy.WaitSet(1, 1, 0, 0, 0, events,
                                                     self._context.handle)
        return self._wait_sets[events]

    def take(self, subscription: Any, guard: Any, timeout_s: float) -> tuple[Any, Any] | None:
        """Return ``subscription``'s next ``(message, info)``, waiting up to ``timeout_s``.

        None when the time ran out, ``guard`` was triggered first, an event was served, or
        the subscription (or the context) was destroyed meanwhile; ``subscription`` may be
        None (only the guard and the time end the wait then).
        """
        try:
            with ExitStack() as stack:
                stack.enter_context(self._context.handle)
                stack.enter_context(guard.handle)
                handlers = list(subscription.event_handlers) if subscription is not None \
                    else []
                wait_set = self._wait_set(len(handlers))
                wait_set.clear_entities()
                if subscription is not None:
                    stack.enter_context(subscription.handle)
                    wait_set.add_subscription(subscription.handle)
                for handler in handlers:
                    stack.enter_context(handler)
                    handler.add_to_wait_set(wait_set)
                wait_set.add_guard_condition(guard.handle)
                wait_set.wait(int(timeout_s * 1e9))
                for handler in handlers:
                    if handler.is_ready(wait_set):
                        _run(handler.execute(handler.take_data()))
                if subscription is None or not wait_set.get_ready_entities('subscription'):
                    return None
                return subscription.handle.take_message(subscription.msg_type,
                                                        subscription.raw)
        except (InvalidHandle, RCLError):  # destroyed under us, or the context shut down
            time.sleep(0.01)  # the caller loops: not a busy one while the node stops
            return None


def _run(coroutine: Any) -> None:
    """Run an event handler's ``execute`` coroutine (it awaits nothing but its callback)."""
    try:
        coroutine.send(None)
    except StopIteration:
        return
    coroutine.close()
