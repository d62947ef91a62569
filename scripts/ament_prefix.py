"""Make a venv an ament prefix of the editable vision_nodes, as ``colcon build --symlink-install``.

``pip install -e .`` puts the package on ``sys.path`` and its console scripts in ``bin/`` but
leaves out what ROS tools look up through the ament index: ``setup.py``'s data files (the
index entry, ``share/vision_nodes/package.xml``, the launch files, the configuration) and the
executables in ``lib/vision_nodes/`` where ``launch_ros`` and ``ros2 run`` look for them. This
links each of them into the venv (a symlink per file, so an edit in the checkout is live and
``ros2 launch``, which walks the share folder without following linked folders, finds every
launch file); links into the checkout that no longer name a data file are removed. With the
venv root on ``AMENT_PREFIX_PATH`` (test/conftest.py puts it there), ``ros2 launch vision_nodes
detect.launch.py`` and the launch tests run the checkout's code.

Usage: python scripts/ament_prefix.py VENV        (scripts/setup_env.sh runs it every time)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent


def setup_arguments() -> dict:
    """The keyword arguments ``setup.py`` gives to ``setup()`` (it is run, nothing built)."""
    import setuptools

    captured: dict = {}
    here = os.getcwd()
    os.chdir(ROOT)  # setup.py globs relative paths
    try:
        with mock.patch.object(setuptools, 'setup', lambda **kw: captured.update(kw)):
            code = compile((ROOT / 'setup.py').read_text(), str(ROOT / 'setup.py'), 'exec')
            exec(code, {'__name__': '__main__', '__file__': str(ROOT / 'setup.py')})
    finally:
        os.chdir(here)
    return captured


def wanted_links(venv: Path) -> dict[Path, Path]:
    """Each link to make in ``venv`` and what it points to."""
    args = setup_arguments()
    links: dict[Path, Path] = {}
    for folder, files in args.get('data_files', []):
        for name in files:
            links[venv / folder / Path(name).name] = ROOT / name
    package = args['name']
    for entry in args.get('entry_points', {}).get('console_scripts', []):
        script = entry.split('=')[0].strip()
        links[venv / 'lib' / package / script] = venv / 'bin' / script
    return links


def link(venv: Path) -> int:
    """Make the links; remove stale ones into the checkout; return how many changed."""
    links = wanted_links(venv)
    changed = 0
    for folder in {path.parent for path in links}:
        for path in folder.iterdir() if folder.is_dir() else ():
            target = os.readlink(path) if path.is_symlink() else None
            if target and path not in links and Path(target).is_relative_to(ROOT):
                path.unlink()
                changed += 1
    for path, target in links.items():
        if path.is_symlink() and Path(os.readlink(path)) == target:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink() or path.exists():
            path.unlink()
        path.symlink_to(target)
        changed += 1
    return changed


def main() -> int:
    """Link the venv given on the command line."""
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    changed = link(Path(sys.argv[1]).absolute())
    if changed:
        print(f'ament prefix: {changed} link(s) made or removed in {sys.argv[1]}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
