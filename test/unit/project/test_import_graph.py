"""The package's floors: imports point down only, and no module imports itself round a circle.

Every import of ``vision_nodes`` in a module counts, wherever it stands: at the top, inside a
function (a lazy import is an arrow all the same) or under ``TYPE_CHECKING`` (a reader follows
it too). :data:`FLOORS` gives each folder or top-level module its floor (docs/architecture.md,
Layers, says the same); a module may import its own floor's room or a lower floor, never a
higher one nor a sibling room of its floor. :data:`EXCEPTIONS` lists the arrows allowed
against that, each with its reason; one that no longer exists fails too, so the list stays
true.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / 'vision_nodes'

#: folder or top-level module -> (floor, room). Higher floors import lower ones; one floor's
#: rooms import only themselves (tasks and runners know nothing of each other: the pipeline
#: joins them).
FLOORS: dict[str, tuple[int, str]] = {
    **dict.fromkeys(('ros', 'tools'), (6, 'ros')),
    **dict.fromkeys(('pipeline', 'precision_check'), (5, 'core')),
    **dict.fromkeys(('tasks', 'accuracy', 'tracking', 'geometry3d', 'drawing'), (4, 'tasks')),
    'runners': (4, 'runners'),
    'artifacts': (3, 'artifacts'),
    'loaders': (2, 'loaders'),
    'platform': (1, 'platform'),
    **dict.fromkeys(('__init__', 'backends', 'boxes', 'bytetrack', 'files', 'image_codecs',
                     'images', 'limits', 'manifest', 'parallel', 'param_spec', 'stage_times',
                     'stats', 'telemetry', 'text', 'yaml_safety'), (0, 'ground')),
}
#: (importer, imported) -> why the arrow may point up or sideways, or close a circle.
EXCEPTIONS: dict[tuple[str, str], str] = {}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix('').parts
    return '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)


def _targets(node: ast.AST, package: str, modules: set[str]) -> set[str]:
    """The package's modules one import statement names (``from x import y``: x.y if a module)."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names if alias.name in modules}
    if not isinstance(node, ast.ImportFrom):
        return set()
    base = package.split('.')[:len(package.split('.')) - node.level + 1] if node.level else []
    target = '.'.join(base + ([node.module] if node.module else []))
    found = {f'{target}.{alias.name}' for alias in node.names} & modules
    return found or ({target} & modules)


def import_graph() -> dict[str, set[str]]:
    """Each module of the package -> the modules of the package it imports."""
    paths = {_module_name(path): path for path in PACKAGE.rglob('*.py')}
    graph = {}
    for name, path in paths.items():
        package = name if path.name == '__init__.py' else name.rpartition('.')[0]
        tree = ast.parse(path.read_text(encoding='utf-8'))
        graph[name] = set().union(*(_targets(node, package, set(paths))
                                    for node in ast.walk(tree))) - {name}
    return graph


def floor(module: str) -> tuple[int, str]:
    """The (floor, room) of a module: its folder's, or its own as a top-level module."""
    parts = module.split('.')
    return FLOORS[parts[1] if len(parts) > 1 else '__init__']


def test_every_module_has_a_floor():
    """A new folder or top-level module is given its floor here (and in the docs' Layers)."""
    tops = {module.split('.')[1] if '.' in module else '__init__' for module in import_graph()}
    assert not tops - set(FLOORS), f'give these a floor in FLOORS: {sorted(tops - set(FLOORS))}'
    assert not set(FLOORS) - tops, f'no such module any more: {sorted(set(FLOORS) - tops)}'


def test_imports_point_down_only():
    """No arrow up a floor, nor across to a sibling room (tasks <-> runners)."""
    upward = []
    for module, imported in import_graph().items():
        for target in imported:
            (low, room), (high, other) = floor(target), floor(module)
            across = low > high or (low == high and room != other)
            if across and (module, target) not in EXCEPTIONS:
                upward.append(f'{module} -> {target}')
    assert not upward, 'arrows up or across: ' + '; '.join(sorted(upward))


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circle():
    """No module reaches itself through imports (the listed exceptions left out)."""
    graph = {module: {t for t in imported if (module, t) not in EXCEPTIONS}
             for module, imported in import_graph().items()}
    assert not _cycles(graph), _cycles(graph)


def test_every_exception_still_happens():
    """An exception whose arrow is gone is removed from the list."""
    graph = import_graph()
    stale = [pair for pair in EXCEPTIONS if pair[1] not in graph.get(pair[0], set())]
    assert not stale, f'no longer imported, remove from EXCEPTIONS: {stale}'


def test_the_checks_see_an_upward_arrow_and_a_circle():
    """The graph finds a lazy import inside a function, and the circle finder a circle."""
    graph = import_graph()
    assert 'vision_nodes.ros.process.startup' in graph['vision_nodes.ros.node']  # a lazy import
    assert _cycles({'a': {'b'}, 'b': {'c'}, 'c': {'a'}, 'd': {'a'}}) == [['a', 'b', 'c']]
