"""Drive a ``vision_node`` from Python: start it, walk its lifecycle, exchange messages.

Used by the demo, the benchmark and the tests; handy in a user's own scripts too.

Everything goes through the real ROS interfaces (lifecycle and parameter services, topics over
DDS); nothing here reaches into the node's process.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import rclpy
import yaml
from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState, GetState
from rcl_interfaces.msg import Parameter as ParameterMsg
from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
from rcl_interfaces.srv import DescribeParameters, GetParameters, SetParameters
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile

from ..ros.process.compat import with_message_info

_TRANSITIONS = {
    'configure': Transition.TRANSITION_CONFIGURE,
    'cleanup': Transition.TRANSITION_CLEANUP,
    'activate': Transition.TRANSITION_ACTIVATE,
    'deactivate': Transition.TRANSITION_DEACTIVATE,
}
# Lifecycle states that are not transitions, and the one each transition ends in on success.
_PRIMARY_STATES = {'unconfigured', 'inactive', 'active', 'finalized'}
_GOALS = {'configure': 'inactive', 'cleanup': 'unconfigured', 'activate': 'active',
          'deactivate': 'inactive', 'shutdown': 'finalized'}
# Send a query again after this long without an answer (see VisionNodeClient.call).
_RESEND_QUERY_S = 2.0
# Ask the node's state after this long without a transition's answer, then this often.
_RESEND_TRANSITION_S = 5.0
_POLL_TRANSITION_S = 2.0
_SHUTDOWN = {
    'unconfigured': Transition.TRANSITION_UNCONFIGURED_SHUTDOWN,
    'inactive': Transition.TRANSITION_INACTIVE_SHUTDOWN,
    'active': Transition.TRANSITION_ACTIVE_SHUTDOWN,
}


class NodeProcess:
    """A ``vision_node`` in its own process (started with this interpreter)."""

    def __init__(self, params: dict[str, Any] | None = None, node_name: str = 'vision_node',
                 namespace: str = '', remaps: dict[str, str] | None = None,
                 log_level: str = 'info', env: dict[str, str] | None = None,
                 log_path: str | os.PathLike | None = None) -> None:
        self._params_file = tempfile.NamedTemporaryFile(
            'w', prefix='vision_node_params_', suffix='.yaml', delete=False)
        yaml.safe_dump({'/**': {'ros__parameters': dict(params or {})}}, self._params_file)
        self._params_file.close()
        cmd = [sys.executable, '-m', 'vision_nodes.ros.main', '--ros-args',
               '-r', f'__node:={node_name}', '--params-file', self._params_file.name,
               '--log-level', log_level]
        if namespace:
            cmd += ['-r', f'__ns:={namespace}']
        for src, dst in (remaps or {}).items():
            cmd += ['-r', f'{src}:={dst}']
        self._own_log = log_path is None  # a temporary log is deleted by stop()
        self.log_path = Path(log_path) if log_path else Path(tempfile.mkstemp(
            prefix='vision_node_', suffix='.log')[1])
        self._log = open(self.log_path, 'w')
        self._final_output: str | None = None
        self.process = subprocess.Popen(
            cmd, stdout=self._log, stderr=subprocess.STDOUT,
            env={**os.environ, 'PYTHONUNBUFFERED': '1', **(env or {})})

    def output(self) -> str:
        """Return everything the node has printed so far."""
        if self._final_output is not None:
            return self._final_output
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors='replace')

    def wait_for_output(self, text: str, timeout: float = 30.0) -> bool:
        """Wait until ``text`` appears in the node's output."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.output():
                return True
            if self.process.poll() is not None:
                return text in self.output()
            time.sleep(0.05)
        return False

    def alive(self) -> bool:
        """Return whether the process is still running."""
        return self.process.poll() is None

    def stop(self, sig: int | None = None, timeout: float = 15.0) -> int:
        """Send SIGINT (or ``sig``) and wait; kill after ``timeout``. Returns the exit code."""
        import signal

        if self.process.poll() is None:
            self.process.send_signal(sig if sig is not None else signal.SIGINT)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        Path(self._params_file.name).unlink(missing_ok=True)
        if self._own_log:
            self._final_output = self.log_path.read_text(errors='replace')
            self.log_path.unlink(missing_ok=True)
        return self.process.returncode


@dataclass(frozen=True)
class Arrival:
    """When a message reached this process, in system-clock nanoseconds (``time.time_ns()``)."""

    #: DDS delivered it to the reader (the middleware's ``received_timestamp``; on rclpy
    #: before Jazzy, which passes no message info, the callback time).
    received_ns: int
    #: This process's executor ran the subscription callback.
    callback_ns: int


class MessageQueue:
    """Messages received on one topic, for waiting on in a test or script."""

    def __init__(self) -> None:
        self._items: queue.Queue = queue.Queue()

    def _put(self, msg, info) -> None:
        """Keep the message, timed by its info where rclpy gives one (the subscription's)."""
        now = time.time_ns()
        self._items.put((Arrival(info['received_timestamp'] if info else now, now), msg))

    def get(self, timeout: float = 30.0, predicate: Callable[[Any], bool] | None = None):
        """Return the next message (matching ``predicate``), or None after ``timeout`` seconds."""
        stamped = self.get_stamped(timeout, predicate)
        return None if stamped is None else stamped[1]

    def get_stamped(self, timeout: float = 30.0,
                    predicate: Callable[[Any], bool] | None = None
                    ) -> tuple[Arrival, Any] | None:
        """Like :meth:`get`, with the message's :class:`Arrival` times."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            try:
                received, msg = self._items.get(timeout=remaining)
            except queue.Empty:
                return None
            if predicate is None or predicate(msg):
                return received, msg

    def clear(self) -> None:
        """Drop everything received so far."""
        while not self._items.empty():
            self._items.get_nowait()

    def count(self) -> int:
        """Return how many messages are waiting."""
        return self._items.qsize()


def _send(client, request) -> tuple[Any, threading.Event]:
    """Send a request; return its future and an event set when the answer arrives."""
    done = threading.Event()
    future = client.call_async(request)
    future.add_done_callback(lambda _: done.set())
    return future, done


class VisionNodeClient:
    """Service clients, publishers and subscriptions aimed at one ``vision_node``.

    Spins its own ROS node in a background thread; call :meth:`close` when done.
    """

    def __init__(self, target: str = '/vision_node', name: str = 'vision_nodes_client',
                 context: rclpy.Context | None = None) -> None:
        """Aim at node ``target``; ``context``: an rclpy context of the caller's (initialised).

        Without one the process's default context is used (initialised if it is not).
        """
        if context is None and not rclpy.ok():
            rclpy.init()
        self.target = target.rstrip('/')
        self.node = rclpy.create_node(name, context=context)
        self._executor = SingleThreadedExecutor(context=context)
        self._executor.add_node(self.node)
        self._thread = threading.Thread(target=self._executor.spin, daemon=True)
        self._thread.start()
        self._clients: dict[str, Any] = {}

    def _client(self, srv_type, name: str, timeout: float):
        """Return the client for ``<target>/<name>`` once the service is up (or TimeoutError)."""
        if name not in self._clients:
            self._clients[name] = self.node.create_client(srv_type, f'{self.target}/{name}')
        client = self._clients[name]
        if not client.wait_for_service(timeout_sec=timeout):
            raise TimeoutError(f'service {self.target}/{name} did not appear in {timeout} s')
        return client

    def call(self, srv_type, name: str, request, timeout: float = 30.0,
             resend_after: float | None = None):
        """Call ``<target>/<name>``; return the response or raise TimeoutError.

        ``resend_after``: for a request that is safe to repeat (a query), send it again when no
        answer came within that many seconds. DDS can lose the first answer of a service that a
        client has only just discovered: the server's reply writer may not yet have matched the
        client's reader when the reply goes out, and the reply is then dropped.
        """
        deadline = time.monotonic() + timeout
        client = self._client(srv_type, name, timeout)
        while (remaining := deadline - time.monotonic()) > 0:
            future, done = _send(client, request)
            if done.wait(min(remaining, resend_after or remaining)):
                return future.result()
            client.remove_pending_request(future)
        raise TimeoutError(f'service {self.target}/{name} did not answer in {timeout} s')

    def wait_for_node(self, timeout: float = 30.0) -> None:
        """Wait until the node's lifecycle services answer."""
        self.get_state(timeout)

    def get_state(self, timeout: float = 30.0) -> str:
        """Return the current lifecycle state label, e.g. 'unconfigured', 'inactive', 'active'."""
        return self.call(GetState, 'get_state', GetState.Request(), timeout,
                         resend_after=_RESEND_QUERY_S).current_state.label

    def change_state(self, transition: str, timeout: float = 120.0) -> bool:
        """Trigger a lifecycle transition by name; True when it succeeded.

        A transition is not safe to send twice, so a lost answer is settled by the node's state:
        while the node is still in the state it started from, the request (or the answer to a
        transition that failed at once) was lost and is sent again; once the node has moved,
        the transition is running or done and its answer (or the state it ends in) decides.
        """
        start = self.get_state()
        if transition == 'shutdown':
            transition_id = _SHUTDOWN.get(start)
            if transition_id is None:
                return False
        else:
            transition_id = _TRANSITIONS[transition]
        request = ChangeState.Request()
        request.transition.id = transition_id
        deadline = time.monotonic() + timeout
        client = self._client(ChangeState, 'change_state', timeout)
        future, done = _send(client, request)
        waited = _RESEND_TRANSITION_S
        while not done.wait(max(0.0, min(waited, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                client.remove_pending_request(future)
                raise TimeoutError(f'transition {transition!r} of {self.target} did not answer '
                                   f'in {timeout} s')
            state = self.get_state()
            if state == start:
                client.remove_pending_request(future)
                future, done = _send(client, request)
            elif state in _PRIMARY_STATES:
                client.remove_pending_request(future)
                return state == _GOALS[transition]
            waited = _POLL_TRANSITION_S
        return bool(future.result().success)

    def set_parameters(self, timeout: float = 30.0, **values: Any
                       ) -> list[SetParametersResult]:
        """Set parameters through the parameter service; one result per parameter."""
        request = SetParameters.Request()
        request.parameters = [Parameter(k, value=v).to_parameter_msg()
                              for k, v in values.items()]
        return list(self.call(SetParameters, 'set_parameters', request, timeout).results)

    def get_parameters(self, *names: str, timeout: float = 30.0) -> dict[str, Any]:
        """Return current parameter values by name."""
        request = GetParameters.Request(names=list(names))
        values = self.call(GetParameters, 'get_parameters', request, timeout,
                           resend_after=_RESEND_QUERY_S).values
        return {n: Parameter.from_parameter_msg(ParameterMsg(name=n, value=v)).value
                for n, v in zip(names, values)}

    def describe_parameters(self, *names: str, timeout: float = 30.0
                            ) -> dict[str, ParameterDescriptor]:
        """Return parameter descriptors by name."""
        request = DescribeParameters.Request(names=list(names))
        response = self.call(DescribeParameters, 'describe_parameters', request, timeout,
                             resend_after=_RESEND_QUERY_S)
        return {d.name: d for d in response.descriptors}

    def topic(self, relative: str) -> str:
        """Return a topic name relative to the target node's namespace."""
        namespace = self.target.rsplit('/', 1)[0]
        return f'{namespace}/{relative}'

    def subscribe(self, msg_type, topic: str, qos: QoSProfile | int = 10) -> MessageQueue:
        """Subscribe and collect messages into a :class:`MessageQueue`."""
        received = MessageQueue()
        # The message info (with the DDS reception time) where rclpy gives it (Jazzy on).
        self.node.create_subscription(msg_type, topic, with_message_info(received._put), qos)
        return received

    def publisher(self, msg_type, topic: str, qos: QoSProfile | int = 10):
        """Create a publisher on the client node."""
        return self.node.create_publisher(msg_type, topic, qos)

    def close(self) -> None:
        """Stop spinning and destroy the client node, once the spin thread has left it.

        Destroying a node that the spin thread is still waiting on crashes the process
        (seen on a busy machine, where the thread took longer than the shutdown's wait).
        """
        self._executor.shutdown(timeout_sec=30.0)
        self._thread.join(30.0)
        if not self._thread.is_alive():
            self.node.destroy_node()


def publish_until_answered(publisher, msg, answers: MessageQueue, timeout: float = 60.0,
                           resend_every: float = 1.0,
                           match: Callable[[Any], bool] | None = None):
    """Publish ``msg`` until an answer with its ``header.frame_id`` arrives; None on timeout.

    ``match`` replaces the test for the answer (e.g. the same stamp as well).
    The first messages on a new connection can be lost before discovery completes, so the
    message is sent again every ``resend_every`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        publisher.publish(msg)
        wait = min(resend_every, max(deadline - time.monotonic(), 0.0))
        got = answers.get(wait, match or (lambda m: m.header.frame_id == msg.header.frame_id))
        if got is not None or time.monotonic() >= deadline:
            return got


def wait_for(predicate: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()
