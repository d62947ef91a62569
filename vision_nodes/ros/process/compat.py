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
  the message info as a second argument (Humble's take the message alone), decided once
  for the package by :func:`with_message_info`.
* ``rclpy_implementation.WaitSet`` and ``Subscription.handle.take_message``: a wait set
  of image subscriptions outside the executor, and the take, as rclpy's own
  ``wait_for_message`` does them (:class:`SubscriptionWait`); ``Subscription.handle.pointer``,
  the ``rcl_subscription_t`` a raw subscription's messages are taken from by rcl itself
  instead (:mod:`.rcl_take`: one copy of the message fewer).
* ``CallbackGroup.entities``: the weak references a callback group keeps to its
  subscriptions, timers, guard conditions and event handlers. rclpy adds one for each entity
  made and never takes it out when the entity is destroyed; :func:`leave_callback_groups`
  does, so a node that makes and destroys endpoints at every lifecycle cycle does not grow.
"""

from __future__ import annotations

import weakref
from contextlib import ExitStack
from typing import Any, Callable, Sequence

from rclpy.exceptions import InvalidHandle
from rclpy.executors import SingleThreadedExecutor
from rclpy.guard_condition import GuardCondition
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.subscription import Subscription

from .rcl_take import RclTake

#: The exception rcl raises when it refuses an endpoint (see the module docstring).
RCLError: type = _rclpy.RCLError
#: What ``rclpy.init`` raises for ROS arguments rcl cannot parse, and for unknown ones.
RCL_ARGUMENT_ERRORS: tuple[type, ...] = tuple(
    getattr(_rclpy, name) for name in ('RCLError', 'RCLInvalidROSArgsError')
    if hasattr(_rclpy, name))
UNKNOWN_ROS_ARGS_ERROR: type | tuple = getattr(_rclpy, 'UnknownROSArgsError', ())
#: Whether subscription callbacks may take ``(msg, message_info)``.
MESSAGE_INFO: bool = hasattr(Subscription, 'CallbackType')


def with_message_info(callback: Callable[[Any, Any], None]) -> Callable[..., None]:
    """Return ``callback(msg, info)`` as a subscription callback of this rclpy.

    Jazzy and later hand a two-argument callback the message info; Humble hands the message
    alone, and ``callback`` gets None for the info.
    """
    if MESSAGE_INFO:
        return callback
    return lambda msg: callback(msg, None)


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


class SubscriptionWait:
    """Wait on subscriptions outside any executor, and take their next messages.

    A wait set of the subscriptions, their event handlers and a guard condition of its own
    (:meth:`wake`), built with ``rclpy_implementation.WaitSet`` as rclpy's own
    ``wait_for_message`` builds it (rclpy has no public wait set). The thread that runs frames
    waits here on the image subscription itself, so a frame reaches it without a second
    thread's wake-up in between (:mod:`..inputs.frame_path`); a multi-camera node's taker waits
    here on every camera's (:mod:`..inputs.frame_taker`). The subscriptions' event handlers
    (incompatible QoS) are waited on and run here too, never by the executor: with Fast DDS an
    executor waiting on them took the data's wake-ups (measured: a third of the frames came
    through, docs/benchmarks.md), as if one waiter per subscription were woken.
    """

    def __init__(self, context: Any) -> None:
        """Make the wake-up guard condition in ``context`` (the node's)."""
        self._context = context
        self._wake = GuardCondition(None, None, context=context)
        #: rcl's take into pooled buffers for raw subscriptions (None: rclpy's take).
        self._rcl_take = RclTake.load()

    def wake(self) -> None:
        """End a wait now (from any thread)."""
        self._wake.trigger()

    def take(self, subscription: Any, timeout_s: float) -> tuple[Any, Any] | None:
        """Wait up to ``timeout_s`` for a message on ``subscription``; return it with its info.

        None when the wait ended without one: the timeout, :meth:`wake`, or an event (its
        handler has run), or the subscription was destroyed meanwhile. With no subscription
        (None, or one already destroyed) it waits for :meth:`wake` or the timeout only. A
        subscription destroyed by another thread during the wait stays valid until the wait
        ends. Raises ``InvalidHandle`` once the context or this wait is destroyed: nothing is
        left to wait for. A raw subscription's message is a read-only ``memoryview`` where rcl
        takes it (:mod:`.rcl_take`), else ``bytes``.
        """
        return self.take_now(subscription) if self.wait([subscription], timeout_s) else None

    def wait(self, subscriptions: Sequence[Any], timeout_s: float) -> list[int]:
        """Wait up to ``timeout_s`` for messages on any of ``subscriptions``.

        Return the positions in ``subscriptions`` of those with a message to take
        (:meth:`take_now`), in order; empty when the wait ended without one (as :meth:`take`).
        An entry that is None, or a subscription already destroyed, is not waited on.
        """
        with ExitStack() as held:
            held.enter_context(self._context.handle)
            held.enter_context(self._wake.handle)
            live: list[tuple[int, Any]] = []
            handlers: list[Any] = []
            for position, subscription in enumerate(subscriptions):
                if subscription is None:
                    continue
                try:
                    with ExitStack() as its:
                        its.enter_context(subscription.handle)
                        own = list(getattr(subscription, 'event_handlers', ()))
                        for handler in own:
                            its.enter_context(handler)
                        held.enter_context(its.pop_all())
                except InvalidHandle:  # destroyed before the wait began
                    continue
                live.append((position, subscription))
                handlers += own
            wait_set = _rclpy.WaitSet(len(live), 1, 0, 0, 0, len(handlers),
                                      self._context.handle)
            wait_set.clear_entities()
            for _, subscription in live:
                wait_set.add_subscription(subscription.handle)
            wait_set.add_guard_condition(self._wake.handle)
            for handler in handlers:
                handler.add_to_wait_set(wait_set)
            wait_set.wait(int(timeout_s * 1e9))
            for handler in handlers:
                if handler.is_ready(wait_set):
                    _run_event(handler)
            ready = set(wait_set.get_ready_entities('subscription')) if live else set()
            return [position for position, subscription in live
                    if subscription.handle.pointer in ready]

    def take_now(self, subscription: Any) -> tuple[Any, Any] | None:
        """Take ``subscription``'s next message with its info, without waiting.

        None when there is none, or the subscription is destroyed; otherwise as :meth:`take`.
        """
        try:
            with subscription.handle:
                if subscription.raw and self._rcl_take is not None:
                    return self._rcl_take.take(subscription.handle.pointer)
                return subscription.handle.take_message(subscription.msg_type, subscription.raw)
        except InvalidHandle:  # destroyed by another thread since the wait
            return None

    def destroy(self) -> None:
        """Destroy the guard condition and free the take's buffers (after the last take)."""
        self._wake.destroy()
        if self._rcl_take is not None:
            self._rcl_take.close()


def _run_event(handler: Any) -> None:
    """Take a ready event handler's data and run its callback (``execute`` is a coroutine)."""
    data = handler.take_data()
    if data is None:
        return
    step = handler.execute(data)
    try:
        step.send(None)
    except StopIteration:
        pass
    else:
        step.close()  # an event callback does not wait for anything
