"""One source of dependency bounds: setup.py's extras, held to requirements/ (issue #33).

The extras give the ranges a user installs; ``requirements/*.txt`` name the same packages, each
with the extras' range or an exact version inside it, and the lock
(``requirements/constraints.txt``) pins every one inside its range, so what the suite runs is
what the extras allow. The pip lines of the README's ROS recipe and of docs/installing.md are
the extras' own requirements.
"""

from __future__ import annotations

import re
import runpy
from pathlib import Path
from unittest import mock

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[3]
REQUIREMENTS = ROOT / 'requirements'
#: The extras whose packages the development venv installs (the lock covers them); the others
#: are for other machines (GPUs, Jetson) and name packages the lock cannot have.
LOCKED_EXTRAS = ('onnx', 'openvino', 'torch', 'validation', 'test')
#: The requirement files of those extras (ros.txt holds the PyPI ROS wheels, no extra's).
FILES = ('runtime.txt', 'openvino.txt', 'torch.txt', 'validation.txt', 'test.txt')


def _extras() -> dict[str, list[Requirement]]:
    """setup.py's extras_require, read by running setup.py with setup() stubbed out."""
    with mock.patch('setuptools.setup') as setup:
        runpy.run_path(str(ROOT / 'setup.py'))
    extras = setup.call_args.kwargs['extras_require']
    return {name: [Requirement(r) for r in reqs] for name, reqs in extras.items()}


def _file_requirements() -> list[tuple[str, Requirement]]:
    out = []
    for name in FILES:
        for line in (REQUIREMENTS / name).read_text().splitlines():
            line = line.split('#')[0].strip()
            if line:
                out.append((name, Requirement(line)))
    return out


def _lock() -> dict[str, str]:
    pins = {}
    for line in (REQUIREMENTS / 'constraints.txt').read_text().splitlines():
        if line.strip() and not line.startswith('#'):
            name, _, version = line.strip().partition('==')
            pins[canonicalize_name(name)] = version
    return pins


def _ranges() -> dict[str, set[str]]:
    """Each package of the locked extras and the specifier(s) they give it."""
    ranges: dict[str, set[str]] = {}
    for extra in LOCKED_EXTRAS:
        for req in _extras()[extra]:
            ranges.setdefault(canonicalize_name(req.name), set()).add(str(req.specifier))
    return ranges


def test_the_extras_allow_the_locked_versions():
    """Every package of the locked extras is pinned by the lock, inside the extras' range."""
    pins = _lock()
    for extra in LOCKED_EXTRAS:
        for req in _extras()[extra]:
            name = canonicalize_name(req.name)
            assert name in pins, f'extra {extra!r}: {req.name} is not in constraints.txt'
            assert req.specifier.contains(pins[name], prereleases=True), \
                f'extra {extra!r}: {req} excludes the locked {req.name}=={pins[name]}'


def test_the_files_and_the_extras_name_the_same_packages():
    """requirements/*.txt (but ros.txt) and the locked extras: one set of packages."""
    in_files = {canonicalize_name(req.name) for _, req in _file_requirements()}
    in_extras = set(_ranges())
    assert in_files == in_extras, (f'only in requirements/: {sorted(in_files - in_extras)}; '
                                   f'only in the extras: {sorted(in_extras - in_files)}')


def test_each_range_is_written_once():
    """A package has one range in the extras; a file gives that range or an exact pin in it."""
    ranges = _ranges()
    several = {name: specs for name, specs in ranges.items() if len(specs) > 1}
    assert not several, f'extras give these packages different ranges: {several}'
    for path, req in _file_requirements():
        (extra_range,) = ranges[canonicalize_name(req.name)]
        pinned = [s for s in req.specifier if s.operator == '==']
        if pinned:
            assert Requirement(f'x{extra_range}').specifier.contains(
                pinned[0].version, prereleases=True), f'{path}: {req} outside {extra_range!r}'
        else:
            assert str(req.specifier) == extra_range, \
                f'{path}: {req} but setup.py gives {req.name}{extra_range}'


def test_the_documented_pip_lines_are_the_extras():
    """The README's ROS recipe and docs/installing.md ask pip for what the extras say."""
    known = {str(req) for reqs in _extras().values() for req in reqs}
    readme = (ROOT / 'README.md').read_text()
    recipe = readme[readme.index('## Running with ROS 2'):readme.index('### Launch')]
    lines = [line for line in recipe.splitlines() if line.startswith('pip install')]
    quoted = [q for line in lines for q in re.findall(r"'([^']+)'", line)]
    assert quoted, 'no pip line in the README recipe'
    table = (ROOT / 'docs' / 'installing.md').read_text()
    table = table[table.index('## Dependencies without a rosdep key'):]
    ticked = re.findall(r'`([A-Za-z][\w.-]*(?:>=|<=|==|~=|!=|<|>)[^`]*)`', table)
    assert ticked, 'no pip requirement in docs/installing.md'
    unknown = [q for q in quoted + ticked if str(Requirement(q)) not in known]
    assert not unknown, f'pip lines that are not setup.py extras requirements: {unknown}'
