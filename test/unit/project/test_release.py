"""Release hygiene: one version, a ROS changelog, a licence file and its notes (issue #33).

bloom releases the version of ``package.xml`` and wants ``CHANGELOG.rst`` to have a section for
it; pip and colcon read ``setup.py``'s; the message package ships from the same repository, so
it carries the same version. ``vision_msgs`` in ``interfaces/`` mirrors upstream's definitions
and keeps upstream's version.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from catkin_pkg.changelog import get_changelog_from_path
from catkin_pkg.package import parse_package

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = parse_package(str(ROOT / 'package.xml'))
MSGS = parse_package(str(ROOT / 'interfaces' / 'vision_nodes_msgs' / 'package.xml'))


def _setup_keyword(name: str) -> str:
    """A string keyword argument of the ``setup()`` call in setup.py."""
    tree = ast.parse((ROOT / 'setup.py').read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, 'id', '') == 'setup':
            for keyword in node.keywords:
                if keyword.arg == name:
                    return ast.literal_eval(keyword.value)
    raise AssertionError(f'setup.py: setup() has no {name}=')


def test_one_version():
    """package.xml, setup.py and vision_nodes_msgs' package.xml name the same version."""
    assert _setup_keyword('version') == PACKAGE.version == MSGS.version


def test_the_changelog_is_rosdistro_format_and_has_this_version():
    """CHANGELOG.rst parses as catkin's format, newest first, its top section this version."""
    changelog = get_changelog_from_path(str(ROOT / 'CHANGELOG.rst'))
    assert changelog is not None, 'CHANGELOG.rst is missing'
    text = (ROOT / 'CHANGELOG.rst').read_text()
    assert text.splitlines()[1] == 'Changelog for package vision_nodes'
    versions = sorted(((version, date) for version, date, _ in changelog.foreach_version()),
                      key=lambda entry: text.index(f'\n{entry[0]} ('))  # the file's order
    assert versions and versions[0][0] == PACKAGE.version, versions
    as_tuples = [tuple(int(part) for part in v.split('.')) for v, _ in versions]
    assert as_tuples == sorted(as_tuples, reverse=True) and len(set(as_tuples)) == len(versions)
    dates = [date for _, date in versions]
    assert dates == sorted(dates, reverse=True)
    for version, _ in versions:
        assert changelog.get_content_of_version(version), f'{version} has no bullets'


def test_the_licence_file_matches_the_manifests():
    """LICENSE is the Apache License 2.0, as package.xml files and setup.py say."""
    licence = (ROOT / 'LICENSE').read_text()
    assert 'Apache License' in licence and 'Version 2.0, January 2004' in licence
    assert 'END OF TERMS AND CONDITIONS' in licence
    assert PACKAGE.licenses == MSGS.licenses == ['Apache-2.0']
    assert _setup_keyword('license') == 'Apache-2.0'


def test_the_licence_notes_name_every_module_that_loads_ultralytics():
    """docs/licences.md says AGPL-3.0 and names each module importing ultralytics."""
    notes = (ROOT / 'docs' / 'licences.md').read_text()
    assert 'AGPL-3.0' in notes and '## What runs without it' in notes
    importers = set()
    for path in (ROOT / 'vision_nodes').rglob('*.py'):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ''] if isinstance(node, ast.ImportFrom) and not node.level
                     else [])
            if any(re.match(r'ultralytics(\.|$)', name) for name in names):
                importers.add(path.relative_to(ROOT).as_posix())
    assert importers, 'no module imports ultralytics: update docs/licences.md'
    unnamed = {path for path in importers if Path(path).name not in notes}
    assert not unnamed, f'docs/licences.md does not say these load Ultralytics: {unnamed}'
    assert '[licences](docs/licences.md)' in (ROOT / 'README.md').read_text()
