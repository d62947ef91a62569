"""YAML from untrusted files (manifests, tracker configurations, metadata, start-up arguments).

Anchors and aliases are refused, nesting and node count bounded (:mod:`vision_nodes.limits`)
before PyYAML's safe loader runs, and its multi-line error text becomes one line.
"""

from __future__ import annotations

from typing import Any

import yaml

from .limits import MAX_MANIFEST_DEPTH, MAX_MANIFEST_NODES
from .text import clip

#: PyYAML's safe loader, in C where libyaml is available (a manifest may be 1 MiB).
SAFE_LOADER = getattr(yaml, 'CSafeLoader', yaml.SafeLoader)


def yaml_problem(exc: Exception) -> str:
    """One line describing a YAML error: what and where (PyYAML's own text spans lines)."""
    problem = getattr(exc, 'problem', None)
    mark = getattr(exc, 'problem_mark', None)
    if problem and mark is not None:
        context = getattr(exc, 'context', None)
        text = f'{context}, {problem}' if context else problem
        return f'{clip(text, 120)} (line {mark.line + 1}, column {mark.column + 1})'
    return clip(exc, 160)


def _check_yaml_shape(text: str) -> None:
    """Refuse anchors, aliases, deep nesting and too many nodes before building any object.

    Runs over the parser's event stream, which is produced without recursion and without
    expanding aliases, so a "billion laughs" document or a 100 000-deep list costs one pass
    over its bytes.
    """
    depth = nodes = 0
    for event in yaml.parse(text, Loader=SAFE_LOADER):
        if isinstance(event, yaml.AliasEvent) or getattr(event, 'anchor', None) is not None:
            mark = event.start_mark
            raise ValueError(f'YAML anchors and aliases (&name, *name) are not accepted in a '
                             f'manifest: write the value out (line {mark.line + 1})')
        if isinstance(event, yaml.NodeEvent):
            nodes += 1
            if nodes > MAX_MANIFEST_NODES:
                raise ValueError(f'more than {MAX_MANIFEST_NODES} YAML values')
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_MANIFEST_DEPTH:
                mark = event.start_mark
                raise ValueError(f'nested deeper than {MAX_MANIFEST_DEPTH} levels '
                                 f'(line {mark.line + 1})')
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def safe_yaml(text: str) -> Any:
    """Parse YAML from an untrusted file: the shape checks above, then the safe loader.

    Raises ValueError for a refused shape, ``yaml.YAMLError`` for invalid YAML.
    """
    _check_yaml_shape(text)
    return yaml.load(text, Loader=SAFE_LOADER)  # noqa: S506 - a SafeLoader (C or Python)
