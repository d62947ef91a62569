"""Autostart of the launch files: configure the node when its process starts, then activate.

Each process start (the first, and each ``respawn``) configures the node and arms one
activation, spent by the first successful configure: a later manual configure (after a cleanup)
is not auto-activated, and if the first configure failed, the first manual configure that
succeeds is. Driven by the node's answers and lifecycle events, no fixed waits.

The configure request is not launch_ros' ``ChangeState`` event: its client sends once, as soon
as the service looks available, and after a crash the dead process's service still looks
available to DDS until its lease runs out, so the request of a respawned node went to the dead
one and the launch waited for the answer for ever. Here the node is asked for its state until
the live process answers, and the configure request is sent again while the answer shows it did
not arrive.

Needs the ROS 2 ``launch`` and ``launch_ros`` packages (imported inside the functions).
"""

from __future__ import annotations

import threading

#: Seconds to wait for one answer of the node before asking again (it may not be up yet).
ANSWER_WAIT = 2.0
#: Configure requests sent to one process at most (a lost request is sent again).
CONFIGURE_TRIES = 5


def autostart_actions(node, full_name: str) -> list:
    """Return the event handlers that configure and activate ``node`` (a LifecycleNode)."""
    from launch.actions import EmitEvent, LogInfo, OpaqueFunction, RegisterEventHandler
    from launch.event_handlers import OnProcessStart
    from launch.events import matches_action
    from launch_ros.event_handlers import OnStateTransition
    from launch_ros.events.lifecycle import ChangeState
    from lifecycle_msgs.msg import Transition

    armed = [False]
    starts = [0]  # the process starts so far: a configure thread serves the latest only

    def start(context) -> None:
        armed[0] = True
        starts[0] += 1
        this = starts[0]
        context.add_completion_future(context.asyncio_loop.run_in_executor(
            None, configure_when_up, context, full_name, lambda: starts[0] == this))

    def activate_once(_context) -> list:
        if not armed[0]:
            return []
        armed[0] = False
        return [LogInfo(msg=f'autostart: {full_name} configured; activating'),
                EmitEvent(event=ChangeState(lifecycle_node_matcher=matches_action(node),
                                            transition_id=Transition.TRANSITION_ACTIVATE))]

    return [
        RegisterEventHandler(OnProcessStart(
            target_action=node,
            on_start=[LogInfo(msg=f'autostart: configuring {full_name}'),
                      OpaqueFunction(function=start)])),
        RegisterEventHandler(OnStateTransition(
            target_lifecycle_node=node, start_state='configuring', goal_state='inactive',
            entities=[OpaqueFunction(function=activate_once)])),
    ]


def configure_when_up(context, full_name: str, latest=lambda: True) -> None:
    """Configure ``full_name`` once its process answers (runs in a worker thread).

    Returns when the node has left 'unconfigured' (configuring, or configured by anyone), when
    a configure request was answered (a failure is logged by the launch file's handlers), when
    the launch shuts down, or when ``latest()`` turns false (the process exited and another
    was started).
    """
    from launch_ros.ros_adapters import get_ros_node
    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState, GetState

    ros_node = get_ros_node(context)
    get_state = ros_node.create_client(GetState, f'{full_name}/get_state')
    change_state = ros_node.create_client(ChangeState, f'{full_name}/change_state')
    request = ChangeState.Request()
    request.transition.id = Transition.TRANSITION_CONFIGURE
    tries = 0
    try:
        while not context.is_shutdown and latest() and tries < CONFIGURE_TRIES:
            state = ask(get_state, GetState.Request())
            if state is None:
                continue  # not up yet, or only the dead process is known
            if state.current_state.label != 'unconfigured':
                return
            tries += 1
            if ask(change_state, request) is not None:
                return
    finally:
        ros_node.destroy_client(get_state)
        ros_node.destroy_client(change_state)


def ask(client, request, wait: float = ANSWER_WAIT):
    """Return the answer to ``request`` within ``wait`` seconds, else None (it was lost)."""
    answered = threading.Event()
    future = client.call_async(request)
    future.add_done_callback(lambda _future: answered.set())
    if answered.wait(wait) and future.exception() is None:
        return future.result()
    forget = getattr(client, 'remove_pending_request', None)  # rclpy of Humble may lack it
    if forget is not None:
        forget(future)
    return None
