"""Code style, the way the ament linters check it (flake8, pep257) over the package and tests.

Uses ament_flake8 / ament_pep257 where ROS provides them, else the same tools from PyPI with
the same settings (max line length 99; pep257 with ament's default ignores). Also checks that
nothing needs a Python newer than 3.10, the Python of ROS 2 Humble (Ubuntu 22.04).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PATHS = [str(ROOT / p) for p in ('vision_nodes', 'launch', 'test', 'benchmarks', 'setup.py')
         if (ROOT / p).exists()]
# ament_pep257's default ignore list.
PEP257_IGNORE = 'D100,D101,D102,D103,D104,D105,D106,D107,D203,D212,D404'


def _run(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-m', module, *args], capture_output=True,
                          text=True, cwd=ROOT)


@pytest.mark.linter
def test_flake8():
    """No flake8 findings (ament_flake8 on ROS; else flake8 with max line length 99)."""
    try:
        from ament_flake8.main import main_with_errors
    except ImportError:
        pytest.importorskip('flake8', reason='neither ament_flake8 nor flake8 is installed')
        result = _run('flake8', '--max-line-length', '99', '--extend-ignore', 'E203', *PATHS)
        assert result.returncode == 0, result.stdout + result.stderr
    else:
        rc, errors = main_with_errors(argv=PATHS)
        assert rc == 0, f'{len(errors)} flake8 findings:\n' + '\n'.join(map(str, errors))


@pytest.mark.linter
def test_pep257():
    """No docstring findings (ament_pep257 on ROS; else pydocstyle with its settings)."""
    try:
        from ament_pep257.main import main
    except ImportError:
        pytest.importorskip('pydocstyle',
                            reason='neither ament_pep257 nor pydocstyle is installed')
        result = _run('pydocstyle', '--convention=pep257', f'--add-ignore={PEP257_IGNORE}',
                      *PATHS)
        assert result.returncode == 0, result.stdout + result.stderr
    else:
        assert main(argv=PATHS) == 0, 'pep257 findings (see output above)'


@pytest.mark.linter
def test_runs_on_python_310():
    """No language feature, module or API newer than Python 3.10 (vermin)."""
    pytest.importorskip('vermin', reason='vermin is not installed (requirements/test.txt)')
    # vermin has no __main__ module; call its entry point the way its console script does.
    result = subprocess.run(
        [sys.executable, '-c', 'import sys, vermin; sys.exit(vermin.main())', '--no-tips',
         '--violations', '--eval-annotations', '-t=3.10-', *PATHS],
        capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
