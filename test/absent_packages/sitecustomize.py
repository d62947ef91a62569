"""The packages named in $VISION_NODES_TEST_ABSENT are not installed, as far as Python sees.

Put first on a child process's ``PYTHONPATH`` by :func:`absent_packages.absent_env` (Python
imports ``sitecustomize`` at start-up). Every finder of ``sys.meta_path`` is wrapped so that it
finds nothing of those packages: ``import torch`` raises ModuleNotFoundError and
``importlib.util.find_spec('torch')`` is None, as on a machine without them. With
$VISION_NODES_TEST_REPORT set (a folder), the process writes ``<pid>.json`` at exit: which of
them it asked for, which are loaded (none may be) or findable, and its ``__main__`` module.
"""

import atexit
import importlib.util
import json
import os
import sys

_ABSENT = frozenset(filter(None, os.environ.get('VISION_NODES_TEST_ABSENT', '').split(',')))
_ASKED = set()


class _Without:
    """A finder of sys.meta_path that finds nothing of the absent packages."""

    def __init__(self, finder):
        self._finder = finder

    def find_spec(self, name, path=None, target=None):
        """Return None for an absent package's module, else what the wrapped finder finds."""
        if name.partition('.')[0] in _ABSENT:
            _ASKED.add(name)
            return None
        find = getattr(self._finder, 'find_spec', None)
        return None if find is None else find(name, path, target)

    def __getattr__(self, attr):
        return getattr(self._finder, attr)


def _report():
    loaded = sorted(n for n, m in sys.modules.items()
                    if m is not None and n.partition('.')[0] in _ABSENT)
    found = sorted(n for n in _ABSENT if importlib.util.find_spec(n) is not None)
    main = sys.modules['__main__']
    path = os.path.join(os.environ['VISION_NODES_TEST_REPORT'], f'{os.getpid()}.json')
    with open(path, 'w') as out:
        json.dump({'loaded': loaded, 'asked': sorted(_ASKED), 'found': found,
                   'main': main.__spec__.name if getattr(main, '__spec__', None) else ''}, out)


if _ABSENT:
    sys.meta_path[:] = [_Without(finder) for finder in sys.meta_path]
    if os.environ.get('VISION_NODES_TEST_REPORT'):
        atexit.register(_report)
