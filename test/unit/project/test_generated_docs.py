"""The generated docs match the code, and every relative link in the docs reaches its target."""

from __future__ import annotations

import re
from pathlib import Path

from vision_nodes.tools import docs

ROOT = Path(__file__).resolve().parents[3]
DOCS = [ROOT / 'README.md', *sorted((ROOT / 'docs').glob('*.md'))]


def test_generated_text_is_what_the_generator_makes():
    """README/docs tables and config/detect.yaml: regenerate them after changing the code."""
    stale = [str(path.relative_to(ROOT)) for path in docs.stale(ROOT)]
    assert not stale, f'out of date: {", ".join(stale)}; run `{docs.COMMAND}` and commit'


def test_every_marker_is_filled():
    """Each BEGIN marker has its END and names a block the generator knows."""
    for path in DOCS:
        text = path.read_text()
        for name in re.findall(r'<!-- BEGIN generated: ([\w-]+) -->', text):
            assert name in docs.BLOCKS, (path.name, name)
            assert f'<!-- END generated: {name} -->' in text, (path.name, name)


def test_generated_tables_hold_every_parameter_and_backend():
    """Nothing is dropped on the way: each spec and backend has its row."""
    from vision_nodes.manifest import KNOWN_BACKENDS

    table = docs.parameters_block()
    for _label, specs in docs.parameter_groups():
        for spec in specs:
            assert f'| `{spec.name}` | `{spec.default!r}` |' in table, spec.name
    backends = docs.backends_block()
    assert all(f'| `{name}` |' in backends for name in KNOWN_BACKENDS)


def _anchors(path: Path) -> set[str]:
    """GitHub's anchors for the headings of a Markdown file (outside code fences)."""
    anchors, fence = set(), False
    for line in path.read_text().splitlines():
        if line.startswith('```'):
            fence = not fence
        elif not fence and re.match(r'#{1,6} ', line):
            title = line.lstrip('#').strip().lower()
            anchors.add(re.sub(r'[^\w\- ]', '', title).replace(' ', '-'))
    return anchors


def _links(path: Path) -> list[str]:
    text = re.sub(r'```.*?```', '', path.read_text(), flags=re.S)
    return [target for target in re.findall(r'\]\(([^)\s]+)\)', text)
            if not re.match(r'[a-z][a-z0-9+.-]*:', target)]


def test_relative_links_reach_existing_files_and_headings():
    """Every relative link in README.md and docs/*.md points at a file (and heading) there."""
    broken = []
    for path in DOCS:
        for target in _links(path):
            file_part, _, anchor = target.partition('#')
            dest = (path.parent / file_part).resolve() if file_part else path
            if not dest.exists():
                broken.append(f'{path.name}: {target} (no such file)')
            elif anchor and dest.suffix == '.md' and anchor not in _anchors(dest):
                broken.append(f'{path.name}: {target} (no such heading)')
    assert not broken, broken


def test_readme_stays_short():
    """The README is read in ten minutes; details go to docs/ (its ROS install: commands)."""
    assert len((ROOT / 'README.md').read_text().splitlines()) <= 330
