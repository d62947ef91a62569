"""The launch files' description: their arguments, then one lifecycle ``vision_node``.

Every launch file of the package (``launch/*.launch.py``) starts one ``vision_node`` as a
lifecycle node and differs only in its defaults (model, parameters file) and output topics,
so each calls :func:`vision_launch_description`. The arguments are :mod:`.launch_arguments`'s;
here they become the node's parameters (:func:`node_parameters`), remappings and process,
with the lifecycle's event handlers.

This module needs the ROS 2 ``launch`` and ``launch_ros`` packages; they are imported inside
the functions so that importing ``vision_nodes`` never requires them. Only APIs that exist in
Humble are used (DeclareLaunchArgument choices, LifecycleNode with ``respawn`` and
``respawn_delay``, OnProcessStart, OnProcessExit, OnStateTransition, ChangeState, Node
``ros_arguments``, ExecuteProcess ``additional_env``, ``launch_ros.ros_adapters.get_ros_node``),
so the launch files work on Humble, Jazzy and Kilted. The autostart is :mod:`.launch_autostart`.
"""

from __future__ import annotations

import functools
import json
import os
from typing import Any

import yaml

from ...text import show_path
from .launch_arguments import (BOOLEANS, DDS_PROFILE_VARIABLE, DEFAULT_BACKEND, EXECUTABLE,
                               LISTS, NUMBERS, OVERRIDABLE, PACKAGE, Output, boolean_argument,
                               dds_profile_environment, declare_arguments, is_fast_dds,
                               model_list, number_argument, seconds_argument)
from .launch_autostart import autostart_actions
from .startup import StartupError, check_params_file


def node_parameters(default_model: str, params_file: str, arguments: dict[str, str],
                    default_models: list[str] | None = None,
                    node: str = '') -> list[dict[str, Any] | str]:
    """Return the node's parameters: ``params_file`` (if any), then a dict of overrides.

    Priority, lowest first: the launch file's defaults (``default_model``, ``default_models``
    when the launch file runs several, :data:`DEFAULT_BACKEND`), then ``params_file``, then
    the non-empty ``arguments`` (launch arguments named as in :data:`OVERRIDABLE` or
    :data:`BOOLEANS` that were given), so a file that sets model or backend is not overridden
    by a default the user never typed.

    The overrides are given to the node as ``-p`` rules (:func:`override_arguments`) after
    the file, so nothing is written to disk; rcl lets the later value win. A launch default
    therefore goes into the overrides only where the file does not set that parameter for
    ``node`` (its full name; empty: for any node the file names). One case stays with the
    file: a value under the node's own name in a file whose ``/**`` section comes first
    (rcl applies ``/**`` values first, then the node's own).
    """
    overrides: dict[str, Any] = {'model': default_model, 'backend': DEFAULT_BACKEND}
    if default_models:
        overrides['models'] = list(default_models)
    entries: list[dict[str, Any] | str] = []
    if params_file:
        try:
            check_params_file(params_file)  # the node's own check, before it is started
        except StartupError as exc:
            raise RuntimeError(f'params_file {show_path(params_file)}: {exc.problem}; {exc.rule}'
                               ) from None
        entries.append(params_file)
        for name in _names_set_in(params_file, node):
            overrides.pop(name, None)
    given: dict[str, Any] = {name: value for name, value in arguments.items() if value}
    for name in LISTS:
        if name in given:
            given[name] = model_list(given[name], name)
    for name in NUMBERS:
        if name in given:
            given[name] = number_argument(name, given[name])
    for name in BOOLEANS:
        if name in given:
            given[name] = boolean_argument(name, given[name])
    overrides.update(given)
    if overrides:
        entries.append(overrides)
    return entries


def _names_set_in(params_file: str, node: str) -> set[str]:
    """Parameter names ``params_file`` sets under a key that may apply to ``node``.

    A key applies when it is a wildcard (``/**``, ``/ns/*``...), names ``node`` (with or
    without its leading slash) or, without a namespace, the node's base name; with ``node``
    empty every key applies. Only the top two levels are read.
    """
    with open(params_file, 'rb') as f:  # already bounded and parsed by check_params_file
        data = yaml.safe_load(f) or {}
    names: set[str] = set()
    for key, body in data.items() if isinstance(data, dict) else ():
        key = str(key)
        applies = not node or '*' in key or key.strip('/') == node.strip('/') or \
            ('/' not in key.strip('/') and key.strip('/') == node.rsplit('/', 1)[-1])
        values = body.get('ros__parameters') if isinstance(body, dict) else None
        if applies and isinstance(values, dict):
            names.update(str(name) for name in values)
    return names


def override_arguments(overrides: dict[str, Any]) -> list[str]:
    """``-p name:=value`` rules for rcl, each value a JSON string or list of strings.

    JSON is YAML that rcl reads back with the type it had here: a string stays a string
    (``'1'``, ``'true'``), a list a string array.
    """
    rules: list[str] = []
    for name, value in overrides.items():
        rules += ['-p', f'{name}:={json.dumps(value)}']
    return rules


def _note_given(context, given: set[str]) -> None:
    """Record the launch arguments given to this launch file (an OpaqueFunction body).

    It runs before the arguments are declared: the launch configurations that exist then were
    set by the command line or an including launch file, not by a declared default. The node's
    parameters need the difference (:func:`node_parameters`); ``--show-args`` shows the
    defaults.
    """
    given.update(context.launch_configurations)


def _node_and_lifecycle(context, given_names: set[str], outputs: tuple[Output, ...],
                        default_model: str, default_models: list[str] | None) -> list:
    """Return the LifecycleNode and its lifecycle event handlers (an OpaqueFunction body)."""
    from launch.actions import LogInfo, RegisterEventHandler, Shutdown
    from launch.event_handlers import OnProcessExit
    from launch.substitutions import LaunchConfiguration
    from launch_ros.actions import LifecycleNode
    from launch_ros.event_handlers import OnStateTransition

    def arg(name: str) -> str:
        return LaunchConfiguration(name).perform(context).strip()

    arguments = {name: arg(name) for name in (*OVERRIDABLE, *BOOLEANS) if name in given_names}
    given = ', '.join(f"{k} '{arguments[k]}'" for k in ('model', 'backend') if arguments.get(k))

    name, namespace = arg('node_name'), arg('namespace')
    full_name = '/' + '/'.join(p for p in (namespace.strip('/'), name) if p)
    # The file, then the overrides as -p rules, in this order on the command line (rcl lets
    # a later value win); launch_ros would write a dict to a temporary file never removed.
    parameters: list[str] = []
    for entry in node_parameters(default_model, arg('params_file'), arguments, default_models,
                                 node=full_name):
        parameters += override_arguments(entry) if isinstance(entry, dict) else \
            ['--params-file', entry]
    remappings = [('image', arg('image_topic'))]
    for output in outputs:
        if output.children and f'{output.name}_topic' in given_names:
            raise RuntimeError(
                f"{output.name}_topic:='{arg(output.name + '_topic')}' is no longer an argument: "
                f"the {output.name} topics are siblings under {output.argument} "
                f"({output.name}/{output.children[0]}, ...): give {output.argument}:=<namespace>")
        remappings += output.remappings(arg(output.argument))

    respawn = boolean_argument('respawn', arg('respawn'))
    delay = seconds_argument('respawn_delay', arg('respawn_delay'))
    environment = dds_profile_environment(arg('dds_profile'))
    node = LifecycleNode(
        package=PACKAGE, executable=EXECUTABLE, name=name, namespace=namespace,
        remappings=remappings, output='screen', respawn=respawn, respawn_delay=delay,
        ros_arguments=['--log-level', arg('log_level'), *parameters],
        additional_env=environment or None)

    on_exit = functools.partial(_respawning if respawn else _failed_exit, full_name, delay)
    actions = [node, RegisterEventHandler(OnProcessExit(target_action=node, on_exit=on_exit))]
    rmw = os.environ.get('RMW_IMPLEMENTATION', '')
    if environment and rmw and not is_fast_dds(rmw):
        actions.insert(0, LogInfo(msg=(
            f"dds_profile:={arg('dds_profile')}: RMW_IMPLEMENTATION is {rmw}, which does not "
            f'read {DDS_PROFILE_VARIABLE}: the profile changes nothing (it is for '
            'rmw_fastrtps_cpp, the default RMW)')))
    # A failed configure leaves the node up and unconfigured; say so, and what to do.
    actions.append(RegisterEventHandler(OnStateTransition(
        target_lifecycle_node=node, start_state='configuring', goal_state='unconfigured',
        entities=[LogInfo(msg=(
            f'{full_name} FAILED TO CONFIGURE' + (f' ({given})' if given else '') +
            '; it stays up, unconfigured. The reason is in the '
            "node's log above ('configure failed: ...'): check the parameters (model, backend, "
            'model_dir, params_file), fix them with `ros2 param set` and run '
            f'`ros2 lifecycle set {full_name} configure`, or relaunch.'))])))
    actions.append(RegisterEventHandler(OnStateTransition(
        target_lifecycle_node=node, start_state='activating', goal_state='inactive',
        entities=[LogInfo(msg=(
            f"{full_name} FAILED TO ACTIVATE; it stays inactive. See the node's log above."))])))
    actions.append(RegisterEventHandler(OnStateTransition(
        target_lifecycle_node=node, goal_state='finalized',
        entities=[LogInfo(msg=(
            f'{full_name} is finalized (shut down); its process exits and the launch ends '
            'with it.')), Shutdown(reason=f'{full_name} was shut down')])))
    if arg('autostart').lower() == 'true':
        actions += autostart_actions(node, full_name)
    return actions


def _respawning(full_name: str, delay: float, event, context) -> list:
    """Say that the node exited and starts again (respawn); nothing while shutting down."""
    from launch.actions import LogInfo

    if getattr(context, 'is_shutdown', False):
        return []
    return [LogInfo(msg=f'{full_name} exited with code {event.returncode}; respawn: starting '
                        f'it again in {delay:g} s')]


def _failed_exit(full_name: str, _delay: float, event, context) -> None:
    """End the launch with an error when the node exits with a non-zero code on its own.

    A node that cannot start (a remap rule rcl refuses, say) prints one line and exits with
    code 2; the autostart configure request would otherwise wait for its service for ever.
    An exit while the launch is shutting down (Ctrl-C) is no error.
    """
    if event.returncode != 0 and not getattr(context, 'is_shutdown', False):
        raise RuntimeError(f'{full_name} exited with code {event.returncode}; its last line '
                           'above says why')


def vision_launch_description(*, task: str, default_model: str, default_params_file: str,
                              outputs: tuple[Output, ...],
                              default_models: list[str] | None = None):
    """Return a LaunchDescription: the shared arguments plus one lifecycle ``vision_node``."""
    from launch import LaunchDescription
    from launch.actions import OpaqueFunction

    given: set[str] = set()
    return LaunchDescription([
        OpaqueFunction(function=_note_given, args=[given]),
        *declare_arguments(default_model=default_model,
                           default_params_file=default_params_file, task=task,
                           outputs=outputs, default_models=default_models),
        OpaqueFunction(function=_node_and_lifecycle,
                       args=[given, outputs, default_model, default_models]),
    ])
