"""Child processes without some installed packages: a runtime-only install, simulated.

Not a test module. :func:`absent_env` gives the environment in which a child process finds
none of the named packages (``sitecustomize.py`` here, first on its ``PYTHONPATH``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

FOLDER = Path(__file__).resolve().parent


def absent_env(packages: Iterable[str]) -> dict[str, str]:
    """Return the variables that make ``packages`` not installed for a child process."""
    path = [str(FOLDER), *filter(None, [os.environ.get('PYTHONPATH')])]
    return {'PYTHONPATH': os.pathsep.join(path), 'VISION_NODES_TEST_ABSENT': ','.join(packages)}
