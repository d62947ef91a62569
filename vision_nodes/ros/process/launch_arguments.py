"""The launch files' arguments: declared with the defaults the node gets, and parsed.

Every launch file of the package declares these (:func:`declare_arguments`): the node's
model, backend and topics, the parameters file and autostart, the process's log level,
simulated time, respawning and Fast DDS profile. Their values are parsed here, each refused in
one line (a ``RuntimeError`` that ends the launch before the node starts). What the node then
gets from them is :mod:`.launch_description`'s.

Like that module this one imports ``launch`` only inside its functions, and uses only APIs
that exist in Humble.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ...files import read_regular
from ...text import clip_path
from ..params.specs import SPECS

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
    """Return the process's arguments: simulated time, respawning, the Fast DDS profile."""
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


def is_fast_dds(rmw: str) -> bool:
    """Return whether the RMW implementation ``rmw`` is Fast DDS's, which reads the profile.

    rmw_fastrtps_cpp (the default RMW) or rmw_fastrtps_dynamic_cpp: the ones that read
    :data:`DDS_PROFILE_VARIABLE`. The launch and the node's diagnostics both ask this.
    """
    return rmw.startswith('rmw_fastrtps')


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


def number_argument(name: str, text: str) -> int | float:
    """Parse a number launch argument as its parameter's type; RuntimeError in one line."""
    kind = type(SPECS[name].default)
    try:
        return kind(text.strip())
    except ValueError:
        what = 'an integer' if kind is int else 'a number'
        raise RuntimeError(f'{name}:={text!r} is not {what}') from None


def seconds_argument(name: str, text: str) -> float:
    """Parse a launch argument of seconds (a finite number, 0 or more); RuntimeError."""
    try:
        value = float(text.strip())
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise RuntimeError(f'{name}:={text!r} is not a number of seconds (0 or more)')
    return value


def boolean_argument(name: str, text: str) -> bool:
    """Parse a ``true``/``false`` launch argument; RuntimeError in one line."""
    value = text.strip().lower()
    if value not in ('true', 'false'):
        raise RuntimeError(f"{name}:={text!r} is not true or false")
    return value == 'true'
