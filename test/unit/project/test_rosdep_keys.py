"""rosdep keys: every dependency with a key is declared, and every key resolves (issue #33).

``rosdep install --from-paths src --ignore-src -y`` fails on one key it cannot resolve, so each
key of the workspace's ``package.xml`` files is checked against the snapshot of the rosdep rules
and distribution package lists in ``../shared/rosdistro`` (its README says how a key resolves),
for Humble (Ubuntu 22.04), Jazzy and Kilted (Ubuntu 24.04). The package's own imports are
scanned: each third-party module is either a declared key or listed in docs/installing.md
(linked from the README's "Running with ROS 2") with its pip line.
"""

from __future__ import annotations

import ast
import sys
from functools import lru_cache
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
SNAPSHOT = ROOT.parent / 'shared' / 'rosdistro'
#: The distributions the README supports, and the Ubuntu each is released for.
DISTROS = {'humble': 'jammy', 'jazzy': 'noble', 'kilted': 'noble'}
MANIFESTS = [ROOT / 'package.xml', *sorted((ROOT / 'interfaces').glob('*/package.xml'))]
#: Installer names a platform rule may hold instead of a list or per-release rules.
INSTALLERS = {'apt', 'pip', 'source'}
#: Third-party modules the package imports, and the key that provides each.
KEYS = {
    'numpy': 'python3-numpy', 'yaml': 'python3-yaml', 'cv2': 'python3-opencv',
    'PIL': 'python3-pil', 'skimage': 'python3-skimage',
    'onnxruntime': 'python3-onnxruntime-pip', 'simplejpeg': 'python3-simplejpeg-pip',
    'ultralytics': 'python3-ultralytics-pip', 'transformers': 'python3-transformers-pip',
}
#: Modules with no usable key: the pip requirement docs/installing.md gives for each.
NO_KEY = {
    'openvino': 'openvino>=2024.0', 'nncf': 'nncf>=2.10', 'pycocotools': 'pycocotools>=2.0.7',
    'onnx': 'onnx>=1.15', 'onnxslim': 'onnxslim>=0.1.30',
    'onnxconverter_common': 'onnxconverter-common>=1.14', 'lap': 'lap>=0.5',
    'numba': 'numba>=0.58',
    'torch': 'torch>=2.1', 'torchvision': 'torchvision', 'tensorrt': 'tensorrt-cu12',
}

needs_snapshot = pytest.mark.skipif(
    not SNAPSHOT.is_dir(), reason=f'no rosdep snapshot at {SNAPSHOT} (the project\'s shared/ '
    'folder beside the checkout; a clone on its own has none)')


@lru_cache(maxsize=1)
def _rules() -> dict:
    rules: dict = {}
    loader = getattr(yaml, 'CSafeLoader', yaml.SafeLoader)
    for name in ('base.yaml', 'python.yaml'):
        rules.update(yaml.load((SNAPSHOT / name).read_text(), Loader=loader))
    return rules


@lru_cache(maxsize=None)
def _released(distro: str) -> frozenset[str]:
    lines = (SNAPSHOT / f'{distro}-packages.txt').read_text().splitlines()
    return frozenset(line.strip() for line in lines if line.strip() and line[0] != '#')


def unresolved(key: str, distro: str, workspace: set[str]) -> str | None:
    """Why ``key`` does not resolve on ``distro`` (None: it resolves)."""
    if key in workspace or key in _released(distro):
        return None
    rule = _rules().get(key)
    if rule is None:
        return 'neither a rosdep key nor a package released into it'
    platform = rule.get('ubuntu', rule.get('*'))
    if platform is None:
        return 'its rule has nothing for ubuntu'
    if isinstance(platform, dict) and not INSTALLERS & set(platform):
        release = DISTROS[distro]
        platform = platform.get(release, platform.get('*'))
        if platform is None:
            return f'its rule has nothing for ubuntu {release}'
    return None


def _dependencies(manifest: Path) -> list[str]:
    from catkin_pkg.package import parse_package

    package = parse_package(str(manifest))
    groups = (package.build_depends, package.buildtool_depends, package.build_export_depends,
              package.buildtool_export_depends, package.exec_depends, package.test_depends,
              package.doc_depends)
    return sorted({dep.name for group in groups for dep in group})  # every condition's too


def _workspace() -> set[str]:
    from catkin_pkg.package import parse_package

    return {parse_package(str(m)).name for m in MANIFESTS}


def test_an_unknown_key_does_not_resolve():
    """The check itself: a made-up key, a null rule for a release, a key without ubuntu."""
    if not SNAPSHOT.is_dir():
        pytest.skip(f'no rosdep snapshot at {SNAPSHOT}')
    assert unresolved('python3-no-such-thing-pip', 'jazzy', set()) is not None
    assert unresolved('python3-no-such-thing-pip', 'jazzy', {'python3-no-such-thing-pip'}) \
        is None
    assert unresolved('rclpy', 'humble', set()) is None
    assert unresolved('python3-onnxruntime-pip', 'humble', set()) is None
    nulled = [k for k, r in _rules().items() if isinstance(r.get('ubuntu'), dict)
              and 'jammy' in r['ubuntu'] and r['ubuntu']['jammy'] is None][:1]
    if nulled:
        assert 'jammy' in unresolved(nulled[0], 'humble', set())


@needs_snapshot
@pytest.mark.parametrize('distro', sorted(DISTROS))
@pytest.mark.parametrize('manifest', MANIFESTS, ids=lambda m: m.parent.name)
def test_every_key_resolves(manifest, distro):
    """What `rosdep install --from-paths src --ignore-src` would fail on: nothing."""
    workspace = _workspace()
    problems = {key: why for key in _dependencies(manifest)
                if (why := unresolved(key, distro, workspace))}
    assert not problems, f'{manifest.relative_to(ROOT)} on {distro}: {problems}'


def _imports() -> set[str]:
    """Top-level modules the package's code imports (absolute imports, stdlib left out)."""
    found: set[str] = set()
    for path in (ROOT / 'vision_nodes').rglob('*.py'):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split('.')[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module.split('.')[0])
    return found - set(sys.stdlib_module_names) - {'__future__', 'vision_nodes'}


def test_every_import_is_a_declared_key_or_a_documented_pip_line():
    """package.xml declares each import that has a key; docs/installing.md the others."""
    from catkin_pkg.package import parse_package

    declared = set(_dependencies(ROOT / 'package.xml'))
    missing = {name: KEYS.get(name, name) for name in _imports()
               if name not in NO_KEY and KEYS.get(name, name) not in declared}
    assert not missing, f'imported but not declared in package.xml (module: key): {missing}'
    doc = ROOT.joinpath('docs', 'installing.md').read_text()
    section = doc[doc.index('## Dependencies without a rosdep key'):]
    undocumented = {m: line for m, line in NO_KEY.items()
                    if m in _imports() and f'`{line}`' not in section}
    assert not undocumented, f'no pip line in docs/installing.md for: {undocumented}'
    assert parse_package(str(ROOT / 'package.xml')).name == 'vision_nodes'
