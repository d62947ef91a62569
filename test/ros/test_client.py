"""VisionNodeClient over real rclpy/DDS when an answer is lost.

DDS can drop the first answer of a service that a client has only just discovered. The servers
here are real lifecycle-service stand-ins in this process whose handlers never answer the
requests they are told to lose (an async handler that never finishes sends no reply).
"""

from __future__ import annotations

import threading

import pytest

rclpy = pytest.importorskip('rclpy', reason='rclpy (ROS 2) is not installed')

from lifecycle_msgs.msg import State  # noqa: E402
from lifecycle_msgs.srv import ChangeState, GetState  # noqa: E402
from rclpy.callback_groups import ReentrantCallbackGroup  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.task import Future  # noqa: E402

from vision_nodes.tools import client as client_module  # noqa: E402
from vision_nodes.tools.client import VisionNodeClient  # noqa: E402


class FakeLifecycle:
    """get_state / change_state under ``/<name>``; loses the answers it is told to lose."""

    def __init__(self, name: str, lose_get_state: int = 0, lose_change_state: int = 0,
                 fail_transitions: bool = False) -> None:
        if not rclpy.ok():
            rclpy.init()
        self.node = rclpy.create_node(name)
        self.state = 'unconfigured'
        self.get_state_requests = 0
        self.change_state_requests = 0
        self._lose = {'get_state': lose_get_state, 'change_state': lose_change_state}
        self._fail = fail_transitions
        # Reentrant: a handler left waiting must not keep the next request from being taken.
        group = ReentrantCallbackGroup()
        self.node.create_service(GetState, f'{name}/get_state', self._get_state,
                                 callback_group=group)
        self.node.create_service(ChangeState, f'{name}/change_state', self._change_state,
                                 callback_group=group)
        self._executor = SingleThreadedExecutor()
        self._executor.add_node(self.node)
        self._thread = threading.Thread(target=self._executor.spin, daemon=True)
        self._thread.start()

    async def _never(self) -> None:
        await Future()

    async def _get_state(self, request, response):
        self.get_state_requests += 1
        if self._lose['get_state'] > 0:
            self._lose['get_state'] -= 1
            await self._never()
        response.current_state = State(label=self.state)
        return response

    async def _change_state(self, request, response):
        self.change_state_requests += 1
        if not self._fail:
            self.state = 'inactive'  # the only transition these tests send is configure
        response.success = not self._fail
        if self._lose['change_state'] > 0:
            self._lose['change_state'] -= 1
            await self._never()
        return response

    def close(self) -> None:
        self._executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()


@pytest.fixture
def quick(monkeypatch):
    """Shorter resend and poll intervals, so a lost answer costs a fraction of a second."""
    monkeypatch.setattr(client_module, '_RESEND_QUERY_S', 0.3)
    monkeypatch.setattr(client_module, '_RESEND_TRANSITION_S', 0.5)
    monkeypatch.setattr(client_module, '_POLL_TRANSITION_S', 0.2)


@pytest.fixture
def pair(quick):
    """Make a stand-in server and a client aimed at it; both are closed after the test."""
    made = []

    def make(name: str, **options) -> tuple[FakeLifecycle, VisionNodeClient]:
        server = FakeLifecycle(name, **options)
        made.append((server, VisionNodeClient(f'/{name}', f'{name}_client')))
        return made[-1]

    yield make
    for server, client in made:
        client.close()
        server.close()


def test_a_lost_query_answer_is_asked_again(pair):
    server, client = pair('fake_lost_query', lose_get_state=2)
    assert client.get_state(timeout=30.0) == 'unconfigured'
    assert server.get_state_requests == 3  # two lost, the third answered


def test_a_query_that_never_answers_times_out(pair):
    server, client = pair('fake_silent_query', lose_get_state=1000)
    with pytest.raises(TimeoutError, match='did not answer'):
        client.get_state(timeout=1.5)
    assert server.get_state_requests >= 3


def test_a_lost_transition_answer_is_settled_by_the_state_without_resending(pair):
    server, client = pair('fake_lost_transition', lose_change_state=1)
    assert client.change_state('configure', timeout=10.0)
    assert server.change_state_requests == 1
    assert server.state == 'inactive'


def test_a_lost_failed_transition_is_sent_again_and_reports_failure(pair):
    server, client = pair('fake_failed_transition', lose_change_state=1, fail_transitions=True)
    assert client.change_state('configure', timeout=10.0) is False
    assert server.change_state_requests == 2
