"""A single-threaded executor that runs lifecycle transitions on a thread of their own.

rclpy's ``LifecycleNode`` serves ``change_state`` in the node's default callback group, like
every other service, so with a single-threaded executor nothing else is answered while a
transition runs: ``ros2 lifecycle get`` and ``ros2 param get`` time out for the seconds to
minutes of a first export or an engine build. rclpy's ``MultiThreadedExecutor`` would answer
them, but hands every callback to a thread pool, a hand-off per image that a large raw
image pays for in latency.

:class:`TransitionExecutor` keeps every callback on the spinning thread except those of the
callback groups it is told about, whose callbacks run one at a time off that thread: the node
moves ``change_state`` into such a group (:func:`isolate_transitions`), so transitions run
beside the spinning thread while it goes on answering services and taking images.
"""

from __future__ import annotations

import signal
import threading
import time
import weakref
from typing import Any, Callable

from rclpy.callback_groups import CallbackGroup, MutuallyExclusiveCallbackGroup
import rclpy
import rclpy.signals
from rclpy.exceptions import InvalidHandle
from rclpy.executors import (ConditionReachedException, ExternalShutdownException,
                             ShutdownException, TimeoutException)

from . import compat


def move_to_group(entity: Any, group: CallbackGroup) -> None:
    """Move a service, subscription or timer from its callback group into ``group``."""
    old = entity.callback_group
    if old is not None:
        old.entities.discard(weakref.ref(entity))
    entity.callback_group = group
    group.add_entity(entity)


def isolate_transitions(node: Any) -> CallbackGroup:
    """Move the lifecycle node's ``change_state`` service into a group of its own."""
    group = MutuallyExclusiveCallbackGroup()
    service = compat.change_state_service(node)
    if service is None:  # no lifecycle communication interface
        return group
    move_to_group(service, group)
    return group


class TransitionExecutor(compat.SteppedExecutor):
    """Run callbacks inline, except those of ``background`` groups (each on a thread of its own).

    A background callback gets a fresh daemon thread that ends with it. Fresh, because a
    runtime's thread pool belongs to the thread that first used it: PyTorch's OpenMP team
    created while a model loads (and warms up) in a thread that lives on would stay beside
    the inference thread's own team and slow inference down (docs/benchmarks.md). A
    daemon, so a process asked to exit while a transition is still running (a long export) is
    not kept alive by it; the engine cache publishes entries atomically, so an interrupted build
    leaves nothing half-written behind. The callback group still runs one callback at a time.
    """

    def __init__(self, *, context: Any = None) -> None:
        super().__init__(context=context)
        self._background: set[int] = set()
        self._threads: list[threading.Thread] = []
        self._error: BaseException | None = None

    def run_in_background(self, group: CallbackGroup) -> None:
        """Execute the callbacks of ``group`` off the spinning thread, one at a time."""
        self._background.add(id(group))

    @property
    def busy(self) -> bool:
        """Whether a background callback is running."""
        self._threads = [t for t in self._threads if t.is_alive()]
        return bool(self._threads)

    def wait_idle(self, timeout_sec: float) -> bool:
        """Wait up to ``timeout_sec`` for background callbacks to finish; True if idle."""
        deadline = time.monotonic() + timeout_sec
        while self.busy and time.monotonic() < deadline:
            time.sleep(0.05)
        return not self.busy

    def _run(self, handler: Callable[[], Any]) -> None:
        try:
            handler()
            exception = handler.exception()
            if exception is not None:
                raise exception
        except BaseException as exc:  # noqa: BLE001 - handed back to the spinning thread
            self._error = exc
            compat.wake(self)

    def spin_step(self, timeout_sec: Any, wait_condition: Callable[[], bool]) -> None:
        """Run one ready callback: inline, or on a thread of its own for a background group."""
        error, self._error = self._error, None
        if error is not None:
            raise error
        try:
            handler, entity, node = self.wait_for_ready_callbacks(
                timeout_sec, None, wait_condition)
        except (ShutdownException, TimeoutException, ConditionReachedException):
            return
        except InvalidHandle:
            # A transition destroyed an entity (a dropped subscription's event handler)
            # between rclpy holding it for the wait set and adding it there; rclpy then
            # raises. The next step builds the wait set without it.
            return
        group = getattr(entity, 'callback_group', None)
        if group is not None and id(group) in self._background:
            thread = threading.Thread(target=self._run, args=(handler,), name='transition',
                                      daemon=True)
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
            thread.start()
            return
        handler()
        exception = handler.exception()
        if exception is not None:
            raise exception
        handler.result()


#: The signals that end the node, and how often the spinning loop looks for them (seconds).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
SIGNAL_POLL_S = 0.1


def take_stop_signals(stop: threading.Event) -> None:
    """Make SIGINT/SIGTERM set ``stop``, the first one only; later ones are ignored.

    rclpy's own handler runs on a thread of its own: it shuts the context down and wakes the
    executors from there, so a second SIGINT (``ros2 launch`` signals the whole process
    group) could reach that thread while the main thread was destroying the executor and the
    node, and crash the process. Handled here, a signal only sets ``stop`` and the main
    thread tears everything down alone, in order. Call it from the main thread (Python sets
    signal handlers only there).
    """
    def on_signal(signum: int, frame: Any) -> None:
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        stop.set()

    rclpy.signals.uninstall_signal_handlers()
    for sig in STOP_SIGNALS:
        signal.signal(sig, on_signal)


def spin_until_shutdown(node: Any) -> None:
    """Spin ``node`` until SIGINT/SIGTERM or its shutdown transition; then release it.

    Its transitions (``node.transitions``) run off the spinning thread; the loop ends when
    ``node.finalized`` is set or a stop signal came (:func:`take_stop_signals`), and rclpy is
    shut down at the end.
    """
    stop = threading.Event()
    take_stop_signals(stop)
    executor = TransitionExecutor()
    executor.run_in_background(node.transitions)
    executor.add_node(node)
    try:
        while rclpy.ok(context=node.context) and not node.finalized and not stop.is_set():
            executor.spin_once(timeout_sec=SIGNAL_POLL_S)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:
        # A context shut down under the executor may make it fail to build its wait set;
        # that is a normal shutdown. Anything else is a real error.
        if rclpy.ok(context=node.context):
            raise
    finally:
        # A signal during the release only sets ``stop`` again (take_stop_signals).
        executor.shutdown(timeout_sec=0)
        if not executor.wait_idle(10.0):
            node.get_logger().warning('exiting while a transition is still running')
        node.release()
        node.destroy_node()
        rclpy.try_shutdown()
