"""Every private rclpy detail the package touches, named here with why, and nowhere else.

rclpy has no public API for these; each is read in one place so that a new rclpy release that
renames one breaks here, in one line, and not across the package.

* ``LifecycleNode._state_machine``: the current lifecycle state. The public way is a call of
  the node's own ``get_state`` service, which a callback on the executor's thread (the
  parameter callback, the diagnostics timer) cannot wait for.
* ``Node._parameter_overrides``: the start-up values (``-p``, parameters files). The node
  declares with ``ignore_override`` and checks them itself, so that a bad value is one line
  and not a traceback (:func:`..params.specs.declare`); tasks' defaults must not replace them.
* ``LifecycleNode._service_change_state``: the ``change_state`` service, moved into a
  callback group of its own so transitions run off the spinning thread (:mod:`.executor`).
* ``SingleThreadedExecutor._spin_once_impl``: the one step of spinning; overridden
  (:class:`SteppedExecutor`) to run some callback groups on threads of their own.
* ``Executor._guard``: the guard condition that wakes a waiting executor.
* ``rclpy_implementation.RCLError``: what rcl raises for a refused topic, and with
  ``RCLInvalidROSArgsError`` / ``UnknownROSArgsError`` for refused start-up arguments
  (:mod:`.startup`); the C extension's exception types have no public import.
* ``Subscription.CallbackType`` (Jazzy and later): whether subscription callbacks may take
  the message info as a second argument (Humble's take the message alone).
* ``CallbackGroup.entities``: the weak references a callback group keeps to its
  subscriptions, timers, guard conditions and event handlers. rclpy adds one for each entity
  made and never takes it out when the entity is destroyed; :func:`leave_callback_groups`
  does, so a node that makes and destroys endpoints at every lifecycle cycle does not grow.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable

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


def leave_callback_groups(entity: Any) -> None:
    """Take ``entity`` and its event handlers out of their callback groups' sets.

    Call it before destroying the entity: a weak reference to a destroyed object no longer
    compares equal to a new one, so it could not be found afterwards.
    """
    for item in (entity, *getattr(entity, 'event_handlers', ())):
        group = getattr(item, 'callback_group', None)
        if group is not None:
            group.entities.discard(weakref.ref(item))


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
