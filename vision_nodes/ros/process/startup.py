"""Start a ROS process from its command line, or say in one line which argument stops it.

rcl refuses some start-up arguments: a parameters file that is not YAML or not a parameters
file, a remap rule or ``-p`` override it cannot parse, an unknown ``--ros-args`` flag, a node
name or namespace too long for rmw. rclpy then raises with rcl's text (source locations,
lexer token numbers, several lines) after rcl has logged lines of its own. :func:`start_node`
turns each refusal into one line on stderr and exit code 2 (:data:`EXIT_USAGE`, as argparse
exits on a usage error)::

    <prog>: '<the argument as given>': <what is wrong>; <the rule it breaks>

A parameters file is checked before rcl reads it (:func:`check_params_file`): a regular file
of at most ``MAX_PARAMS_FILE_BYTES``, so a FIFO or ``/dev/zero`` never blocks or fills the
process, holding YAML whose top level is a mapping (rcl silently takes a bare scalar).
What rcl and rmw print while they start is held and passed on only when they succeed, so a
refused start prints nothing else.
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import functools
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterator, Sequence, TypeVar

import rclpy
import yaml
from rclpy.exceptions import NameValidationException
from rclpy.validate_namespace import validate_namespace
from rclpy.validate_node_name import validate_node_name
from rclpy.validate_topic_name import validate_topic_name

from ...files import read_regular
from ...limits import MAX_PARAMS_FILE_BYTES
from ...text import clip, clip_path, show
from ...yaml_safety import SAFE_LOADER, yaml_problem
from . import compat

#: Exit code of a process that cannot start with the arguments it was given.
EXIT_USAGE = 2

#: ``--ros-args`` flags followed by a value.
_VALUE_FLAGS = frozenset({'-r', '--remap', '-p', '--param', '--params-file', '-e', '--enclave',
                          '--log-level', '--log-config-file', '--log-file-name'})
#: rmw's longest topic or service name (RMW_TOPIC_MAX_NAME_LENGTH: 255 less DDS's prefixes).
_RMW_NAME_MAX = 247
#: The longest service name a lifecycle node adds to its full name.
_LONGEST_SERVICE = '/get_available_transitions'

_PARAMS_RULE = ("a parameters file maps a node name (or /**) to 'ros__parameters:' and those "
                "to '<name>: <value>'")
_REMAP_RULE = ('write -r <from>:=<to> with ROS names (letters, digits, _, / and ~), '
               '-r __ns:=/<namespace> or -r __node:=<node name>')
_OVERRIDE_RULE = ("write -p <name>:=<value> with a YAML value (-p qos_depth:=2, "
                  "-p models:='[a, b]')")
_LOG_LEVEL_RULE = ('write --log-level <level> or --log-level <logger>:=<level>, the level one '
                   'of debug, info, warn, error, fatal')
_FLAGS_RULE = ('the --ros-args flags are -r, -p, --params-file, -e, --log-level, '
               '--log-config-file, --log-file-name and --enable-/--disable-rosout-logs, '
               '-stdout-logs, -external-lib-logs; end the ROS arguments with -- before others')

_SOURCE_LOCATION = re.compile(r',?\s*at \S+\.(?:c|cc|cpp|h|hpp):\d+')
_RCL_ARGUMENT = re.compile(r"Couldn't parse (?P<what>[^:']+): '(?P<argument>.*?)'\. "
                           r'Error: (?P<reason>.*)')
_RCL_TRAILING = re.compile(r"Couldn't parse trailing .*?flag(?:: '[^']*')?\. (?P<reason>.*)")
_RCL_ENCLAVE = re.compile(r"Enclave name is not valid: '(?P<reason>.*)'\. Invalid index")
_NULL_SCALARS = ('', '~', 'null', 'Null', 'NULL')

_RCL_ERRORS = compat.RCL_ARGUMENT_ERRORS
_UNKNOWN_ARGS = compat.UNKNOWN_ROS_ARGS_ERROR

NodeT = TypeVar('NodeT')


class StartupError(Exception):
    """A start-up argument the process cannot start with: what is wrong with it, and the rule."""

    def __init__(self, argument: str | None, problem: str, rule: str = '') -> None:
        self.argument, self.problem, self.rule = argument, problem, rule
        super().__init__(self.text())

    def text(self) -> str:
        """``'<argument>': <problem>; <rule>`` (without the argument when none is to blame)."""
        text = f'{show(self.argument)}: {self.problem}' if self.argument else self.problem
        return f'{text}; {self.rule}' if self.rule else text


def start_node(create: Callable[[], NodeT], args: Sequence[str] | None, prog: str) -> NodeT:
    """``rclpy.init(args=args)``, then return ``create()`` (which creates the process's node).

    An argument rcl or rmw refuses (or a parameters file :func:`check_params_file` refuses)
    ends the process: one line ``<prog>: ...`` on stderr and :data:`EXIT_USAGE`. ``args`` as
    for ``rclpy.init``: None means ``sys.argv``.
    """
    argv = list(sys.argv if args is None else args)
    try:
        for flag, value in ros_arguments(argv):
            if flag == '--params-file' and value is not None:
                check_params_file(value)
        _init(args, argv)
        return _create(create, argv)
    except StartupError as exc:
        rclpy.try_shutdown()
        print(f'{prog}: {exc.text()}', file=sys.stderr, flush=True)
        raise SystemExit(EXIT_USAGE) from None


def ros_arguments(argv: Sequence[str]) -> list[tuple[str, str | None]]:
    """Return the flags of ``argv``'s ``--ros-args`` sections, each with its value or None."""
    found: list[tuple[str, str | None]] = []
    inside, i = False, 0
    while i < len(argv):
        token = argv[i]
        if token == '--ros-args':
            inside = True
        elif token == '--':
            inside = False
        elif inside:
            value = argv[i + 1] if token in _VALUE_FLAGS and i + 1 < len(argv) else None
            found.append((token, value))
            i += value is not None
        i += 1
    return found


def check_params_file(path: str) -> None:
    """Refuse (StartupError) a parameters file rcl should not be given to read.

    It must be a regular file of at most ``MAX_PARAMS_FILE_BYTES`` (checked on the open file,
    before reading), parse as YAML, and have a mapping (or nothing) at its top level. What a
    ROS 2 parameters file holds under that, rcl checks.
    """
    data = _read_params_file(path)
    argument = f'--params-file {path}'
    top = None  # the document's first node: its top level
    try:
        for event in yaml.parse(data, Loader=SAFE_LOADER):  # events only: no alias is expanded
            if top is None and isinstance(event, yaml.NodeEvent):
                top = event
    except yaml.reader.ReaderError as exc:
        raise StartupError(argument, f'not text: {clip(exc.reason)} at byte {exc.position}',
                           'save it as UTF-8 text') from None
    except yaml.YAMLError as exc:
        raise StartupError(argument, f'not valid YAML: {yaml_problem(exc)}',
                           _PARAMS_RULE) from None
    empty = top is None or (isinstance(top, yaml.ScalarEvent) and top.value in _NULL_SCALARS
                            and top.style is None)
    if not (empty or isinstance(top, yaml.MappingStartEvent)):
        kind = 'a list' if isinstance(top, yaml.SequenceStartEvent) else 'a single value'
        raise StartupError(argument, f'not a ROS 2 parameters file: its top level is {kind}',
                           _PARAMS_RULE)


def _read_params_file(path: str) -> bytes:
    """Read a parameters file through the package's one bounded reader (else StartupError)."""
    argument = f'--params-file {path}'
    rule = f'give the path of a YAML file of at most {MAX_PARAMS_FILE_BYTES} bytes'
    prefix = f'{clip_path(Path(path))}: '

    def refused(text: str) -> StartupError:  # the line names the argument, not the path again
        return StartupError(argument, text[len(prefix):] if text.startswith(prefix) else text,
                            rule)

    return read_regular(path, MAX_PARAMS_FILE_BYTES, 'the parameters file', refused)


def _init(args: Sequence[str] | None, argv: list[str]) -> None:
    """``rclpy.init``; rcl's refusal becomes a StartupError naming the argument."""
    with held_output() as held:
        try:
            rclpy.init(args=args)
        except _UNKNOWN_ARGS as exc:
            held.drop()
            raise _unknown_arguments(exc) from None
        except _RCL_ERRORS as exc:
            held.drop()
            raise _from_rcl(_rcl_text(exc), argv) from None


def _create(create: Callable[[], NodeT], argv: list[str]) -> NodeT:
    """``create()``; a node name or namespace rmw refuses becomes a StartupError."""
    with held_output() as held:
        try:
            return create()
        except (NameValidationException, *_RCL_ERRORS) as exc:
            error = _name_error(exc, argv)
            if error is None:
                raise
            held.drop()
            raise error from None


def _rcl_text(exc: BaseException) -> str:
    """Return rcl's message on one line, without its source locations and its prefix."""
    text = ' '.join(_SOURCE_LOCATION.sub('', str(exc)).split())
    for prefix in ('failed to initialize rcl: ', 'error creating node: '):
        if text.startswith(prefix):
            text = text[len(prefix):]
    return text.rstrip(' ,')


def _from_rcl(text: str, argv: list[str]) -> StartupError:
    """Return the StartupError for rcl's (cleaned) refusal ``text`` of the arguments ``argv``."""
    found = _RCL_ARGUMENT.match(text)
    if found:
        what, argument = found['what'], found['argument']
        reason = clip(found['reason'].rstrip('.'), 160)
        value = argument.partition(' ')[2]
        if what == 'remap rule':
            return StartupError(argument, 'not a valid remap rule: '
                                f'{_remap_problem(value) or reason}', _REMAP_RULE)
        if what == 'parameter override rule':
            return StartupError(argument, 'not a valid parameter override: '
                                f'{_override_problem(value) or reason}', _OVERRIDE_RULE)
        if what == 'params file':
            return StartupError(argument, f'not a ROS 2 parameters file: {reason}',
                                _PARAMS_RULE)
        if what == 'log level':
            return StartupError(argument, f'not a valid log level: {reason}', _LOG_LEVEL_RULE)
        return StartupError(argument, f'not a valid {what}: {reason}')
    flags = ros_arguments(argv)
    found = _RCL_TRAILING.match(text)
    if found and flags:
        return StartupError(flags[-1][0], 'no value follows it',
                            clip(found['reason'].rstrip('.'), 160))
    found = _RCL_ENCLAVE.match(text)
    enclaves = [f'{flag} {value}' for flag, value in flags if flag in ('-e', '--enclave')]
    if found and enclaves:
        return StartupError(enclaves[-1], f'not a valid enclave: {clip(found["reason"])}',
                            'an enclave is an absolute name, e.g. -e /my/enclave')
    configs = [f'{flag} {value}' for flag, value in flags if flag == '--log-config-file']
    if text.startswith('failed to initialize logging') and configs:
        return StartupError(configs[-1], clip(text, 240))
    return StartupError(None, f'ROS cannot start: {clip(text, 240)}')


def _unknown_arguments(exc: BaseException) -> StartupError:
    """Return the StartupError for rclpy's UnknownROSArgsError (its text is a list's repr)."""
    try:
        unknown = [str(arg) for arg in ast.literal_eval(str(exc))]
    except (ValueError, SyntaxError):
        unknown = [str(exc)]
    what = 'unknown ROS argument' + ('s' if len(unknown) > 1 else '')
    return StartupError(' '.join(unknown), what, _FLAGS_RULE)


def _first_line(exc: BaseException) -> str:
    """Return a name validator's reason: its first line, without its ``Invalid <what>:``."""
    line = str(exc).splitlines()[0].rstrip(':') if str(exc) else type(exc).__name__
    return clip(line.split(': ', 1)[1] if line.startswith('Invalid ') else line, 160)


def _name_problems(checks: list[tuple[Callable[[str], object], str]]) -> str | None:
    """Return the first name its rclpy validator refuses, with the reason (else None)."""
    for validate, name in checks:
        try:
            validate(name)
        except NameValidationException as exc:
            return f'{show(name)}: {_first_line(exc)}'
    return None


def _remap_problem(rule: str) -> str | None:
    """Say why remap rule ``[node:]from:=to`` is not valid, in rclpy's validators' words."""
    if ':=' not in rule:
        return "no ':=' between the name and its replacement"
    source, _, target = rule.partition(':=')
    for scheme in ('rostopic://', 'rosservice://'):
        if source.startswith(scheme):
            source = source[len(scheme):]
    node, _, name = source.rpartition(':')
    checks: list[tuple[Callable[[str], object], str]] = []
    if node:
        checks.append((validate_node_name, node))
    if name == '__ns':
        checks.append((validate_namespace, target))
    elif name in ('__node', '__name'):
        checks.append((validate_node_name, target))
    else:
        checks += [(validate_topic_name, name), (validate_topic_name, target)]
    return _name_problems(checks)


def _override_problem(rule: str) -> str | None:
    """Say why parameter override ``[node:]name:=value`` is not valid, when it can be told."""
    if ':=' not in rule:
        return "no ':=' between the parameter name and its value"
    name, _, value = rule.partition(':=')
    if not name.rpartition(':')[2]:
        return "no parameter name before ':='"
    try:
        for _ in yaml.parse(value, Loader=SAFE_LOADER):
            pass
    except yaml.YAMLError as exc:
        return f'the value {show(value)} is not valid YAML: {yaml_problem(exc)}'
    return None


def _name_error(exc: BaseException, argv: list[str]) -> StartupError | None:
    """Return the StartupError for a node name or namespace refused at creation, else None."""
    if isinstance(exc, NameValidationException):
        text = _first_line(exc)
    else:
        text = _rcl_text(exc)
        if not text.startswith(('invalid node name', 'invalid node namespace')):
            return None
    renames = [f'{flag} {value}' for flag, value in ros_arguments(argv)
               if flag in ('-r', '--remap') and value is not None
               and value.partition(':=')[0].rpartition(':')[2] in ('__ns', '__node', '__name')]
    argument = ' '.join(renames) or None
    if 'length' in text or 'exceed' in text:
        limit = _RMW_NAME_MAX - len(_LONGEST_SERVICE)
        return StartupError(argument, 'namespace and node name too long',
                            f"together ('/<namespace>/<node name>') they may have at most "
                            f'{limit} characters: the node\'s service names '
                            f"('...{_LONGEST_SERVICE}') must fit rmw's {_RMW_NAME_MAX}")
    return StartupError(argument, f'not a valid node name or namespace: {clip(text, 160)}',
                        _REMAP_RULE)


class _Held:
    """What :func:`held_output` holds; :meth:`drop` keeps it from being passed on."""

    def __init__(self) -> None:
        self.dropped = False

    def drop(self) -> None:
        self.dropped = True


@contextlib.contextmanager
def held_output() -> Iterator[_Held]:
    """Hold what the process writes to its stdout and stderr (file descriptors 1 and 2).

    On leaving, the held output is written out unless :meth:`_Held.drop` was called: rcl and
    rmw print their own lines (C code, so below Python's ``sys.stderr``) before rclpy raises,
    and a refused start replaces them with one line of its own.
    """
    held = _Held()
    _flush()
    spools = []
    try:
        for fd in (1, 2):
            spool = tempfile.TemporaryFile()
            try:
                saved = os.dup(fd)
            except OSError:  # a closed descriptor: nothing to hold
                spool.close()
                continue
            spools.append((fd, saved, spool))
            os.dup2(spool.fileno(), fd)
        yield held
    finally:
        _flush()
        for fd, saved, _ in spools:
            os.dup2(saved, fd)
            os.close(saved)
        for fd, _, spool in spools:
            if not held.dropped:
                _copy_out(spool, fd)
            spool.close()


def _flush() -> None:
    """Flush Python's and C's buffered stdout/stderr, so each byte lands where it was meant."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    with contextlib.suppress(Exception):
        _libc().fflush(None)


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None)


def _copy_out(spool, fd: int) -> None:
    spool.seek(0)
    while True:
        chunk = spool.read(1 << 16)
        if not chunk:
            return
        with contextlib.suppress(OSError):
            while chunk:
                chunk = chunk[os.write(fd, chunk):]
