"""Shared pieces of the launch files (``launch/detect.launch.py``, ``launch/depth.launch.py``).

Both launch files start one ``vision_node`` as a lifecycle node and differ only in their
defaults (model, parameters file) and output topics, so they call
:func:`vision_launch_description`.

This module needs the ROS 2 ``launch`` and ``launch_ros`` packages; they are imported inside
the functions so that importing ``vision_nodes`` never requires them. Only APIs that exist in
Humble are used (DeclareLaunchArgument choices, LifecycleNode with ``respawn`` and
``respawn_delay``, OnProcessStart, OnProcessExit, OnStateTransition, ChangeState, Node
``ros_arguments``, ``launch_ros.ros_adapters.get_ros_node``), so the launch files work on Humble,
Jazzy and Kilted. The autostart is :mod:`.launch_autostart`.
"""

from __future__ import annotations

import functools
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ...files import read_regular
from ...text import clip_path, show_path
from ..params.specs import SPECS
from .launch_autostart import autostart_actions
from .startup import StartupError, check_params_file

PACKAGE = 'vision_nodes'
EXECUTABLE = 'vision_node'
LOG_LEVELS = ['debug', 'info', 'warn', 'error', 'fatal']
DEFAULT_BACKEND = 'auto'
#: Parameters that a non-empty launch argument of the same name overrides (strings, the
#: lists of :data:`LISTS` written ``a,b`` or ``[a, b]``, and the numbers of :data:`NUMBERS`).
OVERRIDABLE = ('model', 'models', 'backend', 'model_dir', 'engine_cache_dir',
               'image_transport', 'image_topics', 'output_namespaces', 'batch_window',
               'max_batch')
LISTS = ('models', 'image_topics', 'output_namespaces')
NUMBERS = ('batch_window', 'max_batch')
#: Node parameters of rclpy's own that a launch argument of the same name sets when given
#: (``true``/``false``), with the value a node has without it.
BOOLEANS = {'use_sim_time': False}
#: Seconds the launch waits before it starts a node that exited again (``respawn:=true``).
DEFAULT_RESPAWN_DELAY = 2.0
#: ``dds_profile`` names of the package's own Fast DDS profiles (files in its share folder).
DDS_PROFILES = {'large_images': 'config/fastdds_large_images.xml'}
#: The environment variable Fast DDS reads its default profiles from.
DDS_PROFILE_VARIABLE = 'FASTDDS_DEFAULT_PROFILES_FILE'
#: Largest profile file read (Fast DDS profiles are a few kilobytes).
MAX_DDS_PROFILE_BYTES = 1 << 20
#: The RMW implementations that read it (rmw_fastrtps_cpp is the default RMW).
FAST_DDS_RMWS = ('rmw_fastrtps_cpp', 'rmw_fastrtps_dynamic_cpp')


@dataclass(frozen=True)
class Output:
    """A topic the node publishes, remapped by a launch argument ``<name>_topic``.

    With ``children`` it is a namespace of topics (``depth``: ``depth/image``,
    ``depth/camera_info``...), moved as one by ``<name>_namespace`` so that siblings stay
    siblings (an image and its camera_info).
    """

    name: str
    description: str
    children: tuple[str, ...] = ()

    @property
    def argument(self) -> str:
        """The launch argument that remaps it."""
        return f'{self.name}_namespace' if self.children else f'{self.name}_topic'

    def remappings(self, value: str) -> list[tuple[str, str]]:
        """Return the node's remapping rules for the argument's ``value``."""
        if not self.children:
            return [(self.name, value)]
        return [(f'{self.name}/{child}', f'{value.rstrip("/")}/{child}')
                for child in self.children]


def package_share_file(relative: str, launch_file: str | os.PathLike | None = None) -> str:
    """Path of ``relative`` in the package share, or in the source tree.

    ``launch_file`` is the calling launch file's ``__file__``: when the package is not in the
    ament index (a launch file run from the source tree), the file is looked up relative to the
    launch file's parent folder (the package root / share folder); without one, relative to
    the source tree this module is in.
    """
    try:
        from ament_index_python.packages import (PackageNotFoundError,
                                                 get_package_share_directory)
        try:
            return os.path.join(get_package_share_directory(PACKAGE), relative)
        except (PackageNotFoundError, OSError):  # not installed; no AMENT_PREFIX_PATH at all
            pass
    except ImportError:
        pass
    root = Path(launch_file).resolve().parent.parent if launch_file is not None else \
        Path(__file__).resolve().parents[3]
    return str(root / relative)


#: How an argument that sets a node parameter relates to the parameters file (each says it).
PRIORITY = (' Not given: the parameters file\'s value, else this default; given, it beats the '
            'file.')


def _from_spec(name: str, default: Any, extra: str = '') -> dict[str, Any]:
    """Return an argument's default, description and choices, from the parameter it sets.

    ``default`` is what the node gets when neither the argument nor the parameters file sets
    the parameter (the launch file's own default, else the parameter's), shown by
    ``--show-args``.
    """
    spec = SPECS[name]
    kwargs: dict[str, Any] = {'default_value': _argument_text(default),
                              'description': f'{spec.description}{extra}{PRIORITY}'}
    if spec.choices:
        kwargs['choices'] = ['', *(c for c in spec.choices if c)]
    return kwargs


def _argument_text(value: Any) -> str:
    """Write a parameter value as a launch argument (lists ``a,b``)."""
    if isinstance(value, (list, tuple)):
        return ','.join(str(v) for v in value)
    return str(value)


def declare_arguments(*, default_model: str, default_params_file: str, task: str,
                      outputs: tuple[Output, ...],
                      default_models: list[str] | None = None) -> list:
    """Return the DeclareLaunchArgument actions shared by the vision_nodes launch files."""
    from launch.actions import DeclareLaunchArgument

    params_help = ('Parameters file (ROS 2 YAML, `/**: ros__parameters:`). The launch arguments '
                   f"{', '.join((*OVERRIDABLE, *BOOLEANS))} override it when given "
                   '(non-empty).')
    if not default_params_file:
        params_help += ' Empty: none (the node\'s defaults).'
    lists = ' Written `a,b` or `[a, b]`.'
    args = [
        DeclareLaunchArgument('backend', **_from_spec('backend', DEFAULT_BACKEND)),
        DeclareLaunchArgument('model', **_from_spec(
            'model', default_model, f' This launch file runs the {task} task.')),
        DeclareLaunchArgument('models', **_from_spec(
            'models', default_models or SPECS['models'].default, lists)),
        *(DeclareLaunchArgument(name, **_from_spec(name, SPECS[name].default, extra))
          for name, extra in (('image_transport', ''), ('model_dir', ''),
                              ('image_topics', lists), ('output_namespaces', lists),
                              ('batch_window', ''), ('max_batch', ''))),
        DeclareLaunchArgument(
            'params_file', default_value=default_params_file, description=params_help),
        DeclareLaunchArgument('engine_cache_dir', **_from_spec(
            'engine_cache_dir', SPECS['engine_cache_dir'].default)),
        DeclareLaunchArgument(
            'image_topic', default_value='image',
            description='Input sensor_msgs/Image topic (the node\'s `image` subscription is '
                        'remapped to it; relative names resolve in `namespace`).'),
    ]
    for output in outputs:
        moved = (f"its {', '.join(f'`{output.name}/{c}`' for c in output.children)} topics move "
                 'there together') if output.children else \
            f'the node\'s `{output.name}` topic is remapped to it'
        args.append(DeclareLaunchArgument(
            output.argument, default_value=output.name,
            description=f'{output.description}; {moved}.'))
    args += [
        DeclareLaunchArgument(
            'namespace', default_value='',
            description='Namespace of the node and of its relative topics.'),
        DeclareLaunchArgument(
            'node_name', default_value=EXECUTABLE, description='Name of the node.'),
        DeclareLaunchArgument(
            'autostart', default_value='true', choices=['true', 'false'],
            description='Configure the lifecycle node when it starts and activate it once '
                        'configured. false: it waits unconfigured for '
                        '`ros2 lifecycle set <node> configure`.'),
        DeclareLaunchArgument(
            'log_level', default_value='info', choices=LOG_LEVELS,
            description='Logging level of the node process.'),
        *_process_arguments(),
    ]
    return args


def _process_arguments() -> list:
    """Return the arguments of simulated time and respawning, as other ROS launch files have."""
    from launch.actions import DeclareLaunchArgument

    return [
        DeclareLaunchArgument(
            'use_sim_time', default_value='false', choices=['', 'true', 'false'],
            description='Take time from the /clock topic (a simulator, `ros2 bag play '
                        '--clock`): the node\'s use_sim_time parameter.' + PRIORITY),
        DeclareLaunchArgument(
            'respawn', default_value='false', choices=['true', 'false'],
            description='Start the node again when its process exits (a crash) before the '
                        'launch ends; with autostart, each new process is configured and '
                        'activated again.'),
        DeclareLaunchArgument(
            'respawn_delay', default_value=str(DEFAULT_RESPAWN_DELAY),
            description='With respawn: seconds to wait before starting the node again.'),
        DeclareLaunchArgument(
            'dds_profile', default_value='',
            description=f"Fast DDS profile of the node's process ({DDS_PROFILE_VARIABLE}; "
                        "rmw_fastrtps_cpp, the default RMW): 'large_images' (the package's "
                        'config/fastdds_large_images.xml: multi-megabyte raw images through '
                        'shared memory in one piece; start the camera driver with it too), or '
                        "a profile XML file. Empty: the launch's own environment."),
    ]


def dds_profile_environment(value: str) -> dict[str, str]:
    """Return the node process's environment for ``dds_profile:=value`` (empty: nothing).

    A name of :data:`DDS_PROFILES` is the package's file (its share folder, else the source
    tree's ``config/``); anything else is a path, which must be a readable XML file. Raises
    RuntimeError in one line otherwise, before the node starts.
    """
    import xml.etree.ElementTree as ElementTree

    value = value.strip()
    if not value:
        return {}
    path = Path(package_share_file(DDS_PROFILES[value])) if value in DDS_PROFILES else \
        Path(value).expanduser()

    def refused(text: str) -> RuntimeError:
        return RuntimeError(f'dds_profile: {text} (give '
                            f"{' or '.join(repr(n) for n in DDS_PROFILES)}, or a Fast DDS "
                            'profile XML file)')

    data = read_regular(path, MAX_DDS_PROFILE_BYTES, 'Fast DDS profile', refused)
    try:
        ElementTree.fromstring(data)
    except ElementTree.ParseError as exc:
        raise refused(f'{clip_path(path)}: not XML ({exc})') from None
    return {DDS_PROFILE_VARIABLE: str(path.resolve())}


def model_list(text: str, name: str = 'models') -> list[str]:
    """Parse a list launch argument (``models``, ``image_topics``): ``a,b`` or ``[a, b]``."""
    text = text.strip()
    if text.startswith('['):
        parsed = yaml.safe_load(text)
        if not isinstance(parsed, list) or not all(isinstance(v, str) for v in parsed):
            raise RuntimeError(f'{name}:={text!r} is not a list of names')
        return [v.strip() for v in parsed if v.strip()]
    return [v.strip() for v in text.split(',') if v.strip()]


def _number(name: str, text: str) -> int | float:
    """Parse a number launch argument as its parameter's type; RuntimeError in one line."""
    kind = type(SPECS[name].default)
    try:
        return kind(text.strip())
    except ValueError:
        what = 'an integer' if kind is int else 'a number'
        raise RuntimeError(f'{name}:={text!r} is not {what}') from None


def _seconds(name: str, text: str) -> float:
    """Parse a launch argument of seconds (a finite number, 0 or more); RuntimeError."""
    try:
        value = float(text.strip())
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise RuntimeError(f'{name}:={text!r} is not a number of seconds (0 or more)')
    return value


def _boolean(name: str, text: str) -> bool:
    """Parse a ``true``/``false`` launch argument; RuntimeError in one line."""
    value = text.strip().lower()
    if value not in ('true', 'false'):
        raise RuntimeError(f"{name}:={text!r} is not true or false")
    return value == 'true'


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
            given[name] = _number(name, given[name])
    for name in BOOLEANS:
        if name in given:
            given[name] = _boolean(name, given[name])
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

    respawn = _boolean('respawn', arg('respawn'))
    delay = _seconds('respawn_delay', arg('respawn_delay'))
    environment = dds_profile_environment(arg('dds_profile'))
    node = LifecycleNode(
        package=PACKAGE, executable=EXECUTABLE, name=name, namespace=namespace,
        remappings=remappings, output='screen', respawn=respawn, respawn_delay=delay,
        ros_arguments=['--log-level', arg('log_level'), *parameters],
        additional_env=environment or None)

    on_exit = functools.partial(_respawning if respawn else _failed_exit, full_name, delay)
    actions = [node, RegisterEventHandler(OnProcessExit(target_action=node, on_exit=on_exit))]
    rmw = os.environ.get('RMW_IMPLEMENTATION', '')
    if environment and rmw and rmw not in FAST_DDS_RMWS:
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
