"""The default model folder with a colcon workspace sourced (issue #33, item 1).

With ``install/`` on ``PYTHONPATH`` the imported ``vision_nodes`` has no ``shared/models``
beside it; a benchmark run from a checkout must still find the checkout's weights.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from vision_nodes import manifest
from vision_nodes.manifest import MODEL_DIR_ENV, use_default_model_dir


def _checkout(root: Path) -> Path:
    """Lay out ``root/checkout`` (a vision_nodes package) with ``root/shared/models``."""
    checkout = root / 'checkout'
    (checkout / 'vision_nodes').mkdir(parents=True)
    (checkout / 'package.xml').write_text('<package format="3"><name>vision_nodes</name>'
                                          '</package>')
    (checkout / 'benchmarks').mkdir()
    (root / 'shared' / 'models').mkdir(parents=True)
    return checkout


def test_a_script_in_a_checkout_finds_the_models_beside_it(tmp_path, monkeypatch):
    """vision_nodes imported from an install (no shared/ beside it), the script's checkout."""
    checkout = _checkout(tmp_path)
    monkeypatch.delenv(MODEL_DIR_ENV, raising=False)
    monkeypatch.setattr(manifest, 'CHECKOUT_MODEL_DIR', tmp_path / 'install' / 'shared' / 'x')
    monkeypatch.setattr(sys, 'argv', [str(checkout / 'benchmarks' / 'bench_detect.py')])
    found = use_default_model_dir()
    assert found == tmp_path / 'shared' / 'models'
    assert manifest.os.environ[MODEL_DIR_ENV] == str(found)  # the nodes it starts inherit it


@pytest.mark.parametrize('argv', [[], [''], ['-c'], ['/nowhere/at/all.py']])
def test_no_checkout_no_folder(tmp_path, monkeypatch, argv):
    """Outside any checkout (python -c, an installed entry point) nothing is guessed."""
    monkeypatch.delenv(MODEL_DIR_ENV, raising=False)
    monkeypatch.setattr(manifest, 'CHECKOUT_MODEL_DIR', tmp_path / 'none')
    monkeypatch.setattr(sys, 'argv', argv)
    assert use_default_model_dir() is None
    assert MODEL_DIR_ENV not in manifest.os.environ
