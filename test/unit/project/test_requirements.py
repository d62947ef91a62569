"""A fresh machine installs exactly the tested versions: requirements/constraints.txt."""

from __future__ import annotations

import os
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[3]
CONSTRAINTS = ROOT / 'requirements' / 'constraints.txt'
#: Built from interfaces/ or installed editable by setup_env.sh, never from a registry.
LOCAL = {'vision-msgs', 'vision-nodes'}


def _lines(path: Path) -> list[str]:
    return [line.split('#')[0].strip() for line in path.read_text().splitlines()
            if line.split('#')[0].strip()]


def _pins() -> dict[str, str]:
    pins = {}
    for line in _lines(CONSTRAINTS):
        name, sep, version = line.partition('==')
        assert sep and version, f'constraints.txt: {line!r} is not an exact pin (name==version)'
        pins[canonicalize_name(name)] = version
    return pins


def test_every_requirement_is_pinned_at_a_version_it_allows():
    """Each direct dependency has one exact, compatible pin (so the lock is never stale)."""
    pins = _pins()
    for path in sorted((ROOT / 'requirements').glob('*.txt')):
        if path == CONSTRAINTS:
            continue
        for line in _lines(path):
            req = Requirement(line)
            name = canonicalize_name(req.name)
            assert name in pins, f'{path.name}: {req.name} is not in constraints.txt'
            assert req.specifier.contains(pins[name], prereleases=True), \
                f'{path.name}: {line} but constraints.txt pins {pins[name]}'


def test_setup_env_installs_under_the_constraints():
    """Every pip install of the set-up script goes through the constraints file."""
    script = (ROOT / 'scripts' / 'setup_env.sh').read_text()
    assert 'CONSTRAINTS=requirements/constraints.txt' in script
    assert '-c "$CONSTRAINTS"' in script
    stamp = next(line for line in script.splitlines() if line.startswith('want_hash='))
    assert '"$CONSTRAINTS"' in stamp and 'sha256sum' in stamp  # a new lock refreshes the venv


def test_this_environment_is_the_locked_one():
    """What runs the tests is what the lock names (the venv was made from it)."""
    venv = Path(os.environ.get('VISION_NODES_VENV', ROOT / '.venv')).resolve()
    if Path(sys.prefix).resolve() != venv:
        pytest.skip(f'not running in the venv scripts/setup_env.sh makes ({venv})')
    # The first distribution of a name on sys.path is the one imported. Once a test has
    # imported setuptools, its _vendor folder (older packaging and wheel) follows the venv's.
    installed: dict[str, str] = {}
    for d in metadata.distributions():
        installed.setdefault(canonicalize_name(d.metadata['Name']), d.version)
    wrong = {name: (version, installed.get(name)) for name, version in _pins().items()
             if name not in LOCAL and installed.get(name) != version}
    assert not wrong, f'installed versions differ from constraints.txt (pinned, got): {wrong}'
