"""Code style, the way the ament linters check it (flake8, pep257) over the package and tests.

Uses ament_flake8 / ament_pep257 where ROS provides them, else the same tools from PyPI with
the same settings (max line length 99; pep257 with ament's default ignores).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PATHS = [str(ROOT / p) for p in ('vision_nodes', 'launch', 'test', 'benchmarks', 'setup.py')
         if (ROOT / p).exists()]
# ament_pep257's default ignore list.
PEP257_IGNORE = 'D100,D101,D102,D103,D104,D105,D106,D107,D203,D212,D404'


def _run(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-m', module, *args], capture_output=True,
                          text=True, cwd=ROOT)


@pytest.mark.linter
def test_flake8():
    """No flake8 findings (max line length 99)."""
    pytest.importorskip('flake8', reason='flake8 is not installed (requirements/test.txt)')
    result = _run('flake8', '--max-line-length', '99', '--extend-ignore', 'E203', *PATHS)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.linter
def test_pep257():
    """No pydocstyle findings under ament_pep257's settings."""
    pytest.importorskip('pydocstyle', reason='pydocstyle is not installed (requirements/test.txt)')
    result = _run('pydocstyle', '--convention=pep257', f'--add-ignore={PEP257_IGNORE}', *PATHS)
    assert result.returncode == 0, result.stdout + result.stderr
