"""The docs match the code: README parameter table and config/detect.yaml vs params.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from vision_nodes.ros.params.policy import output_switches
from vision_nodes.ros.params.specs import PARAMS as NODE_PARAMS
from vision_nodes.ros.params.specs import REPORTS
from vision_nodes.tasks import TASK_MAP, task_class

#: Every task's live parameters and its outputs' switches, once each (a node declares those
#: of the models it runs).
TASK_PARAMS = tuple({spec.name: spec for name, target in TASK_MAP.items() if target
                     for spec in task_class(name).params + output_switches(name)}.values())
PARAMS = NODE_PARAMS + TASK_PARAMS + REPORTS

ROOT = Path(__file__).resolve().parents[3]


def _readme_rows() -> dict[str, str]:
    rows = {}
    for line in (ROOT / 'README.md').read_text().splitlines():
        match = re.match(r'\| `(\w+)` \| `([^`]*)` \|', line)
        if match:
            rows[match.group(1)] = match.group(2)
    return rows


def test_readme_parameter_table_lists_every_parameter_with_its_default():
    """Same names, same defaults, nothing extra."""
    rows = _readme_rows()
    assert set(rows) == {p.name for p in PARAMS}
    for spec in PARAMS:
        assert rows[spec.name] == repr(spec.default), spec.name


def test_params_file_lists_every_parameter_with_its_default():
    """config/detect.yaml applies to any node name and holds exactly the defaults."""
    path = ROOT / 'config' / 'detect.yaml'
    if not path.is_file():
        pytest.fail('config/detect.yaml is missing')
    data = yaml.safe_load(path.read_text())
    values = data['/**']['ros__parameters']
    settable = NODE_PARAMS + task_class('detect').params + output_switches('detect')
    assert values == {p.name: p.default for p in settable}
    for spec in settable:
        assert type(values[spec.name]) is type(spec.default), spec.name


def test_readme_names_two_setup_commands_that_exist():
    """The quick start's commands are the ones CI and users run."""
    text = (ROOT / 'README.md').read_text()
    assert 'scripts/dev demo' in text and 'scripts/dev test' in text
    assert 'scripts/dev test' in (ROOT / '.ci' / 'run').read_text()
