"""The OpenMP spin count the vision_node program sets before PyTorch loads GNU OpenMP."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from vision_nodes.platform.openmp import OPENMP_SPIN_COUNT, bound_openmp_spinning


@pytest.fixture
def clean_env(monkeypatch):
    """No OpenMP setting in the environment (the test session sets a wait policy)."""
    monkeypatch.delenv('GOMP_SPINCOUNT', raising=False)
    monkeypatch.delenv('OMP_WAIT_POLICY', raising=False)
    return monkeypatch


def test_the_program_bounds_the_spin_count(clean_env):
    bound_openmp_spinning()
    assert os.environ['GOMP_SPINCOUNT'] == OPENMP_SPIN_COUNT == '10000'


@pytest.mark.parametrize('name, value', [('GOMP_SPINCOUNT', '300000'),
                                         ('OMP_WAIT_POLICY', 'ACTIVE')])
def test_a_users_setting_is_kept(clean_env, name, value):
    clean_env.setenv(name, value)
    bound_openmp_spinning()
    assert os.environ[name] == value
    if name == 'OMP_WAIT_POLICY':  # a wait policy alone decides: no count added
        assert 'GOMP_SPINCOUNT' not in os.environ


def test_the_setting_comes_before_openmp_is_loaded():
    """Importing the program loads neither PyTorch nor rclpy nor GNU OpenMP (libgomp reads
    the variable once, when it is loaded)."""
    probe = ('import json, sys; import vision_nodes.ros.main, vision_nodes.platform.openmp; '
             'maps = open("/proc/self/maps").read() if sys.platform == "linux" else ""; '
             'print(json.dumps({"torch": "torch" in sys.modules, '
             '"rclpy": "rclpy" in sys.modules, "libgomp": "libgomp" in maps}))')
    out = subprocess.run([sys.executable, '-c', probe], capture_output=True, text=True,
                         timeout=120, check=True)
    loaded = json.loads(out.stdout.splitlines()[-1])
    assert loaded == {'torch': False, 'rclpy': False, 'libgomp': False}
