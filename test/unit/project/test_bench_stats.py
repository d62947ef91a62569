"""The benchmark's paired ratios and target verdicts (benchmarks/bench_detect.py)."""

import importlib.util
from pathlib import Path
import random
import sys

import pytest

_PATH = Path(__file__).resolve().parents[3] / 'benchmarks' / 'bench_detect.py'


@pytest.fixture(scope='module')
def bench():
    spec = importlib.util.spec_from_file_location('bench_detect', _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_exact_ratio_has_a_point_interval(bench):
    den = [[0.060 + 0.001 * i, 0.061 + 0.001 * i, 0.059 + 0.001 * i] for i in range(10)]
    num = [[1.05 * x for x in frames] for frames in den]
    ratio = bench.paired_ratio(num, den)
    assert ratio.value == pytest.approx(1.05)
    assert ratio.low == pytest.approx(1.05) and ratio.high == pytest.approx(1.05)


def test_pairing_removes_drift_shared_by_both_configurations(bench):
    # The host slows down by up to 40 % over the run; both configurations see it alike, so
    # the per-round ratio stays near its true 0.97 although their frame times overlap widely.
    rng = random.Random(1)
    den, num = [], []
    for i in range(12):
        load = 1.0 + 0.4 * (i % 4) / 3
        den.append([0.065 * load * rng.uniform(0.99, 1.01) for _ in range(5)])
        num.append([0.97 * 0.065 * load * rng.uniform(0.99, 1.01) for _ in range(5)])
    assert max(map(max, num)) > 1.3 * min(map(min, den))
    ratio = bench.paired_ratio(num, den)
    assert ratio.low <= 0.97 <= ratio.high
    assert ratio.high < 1.0
    assert bench.verdict(ratio, 1.0, strict=True) == 'target < 1: met'


def test_verdict_needs_the_whole_interval_on_one_side(bench):
    assert bench.verdict(bench.Ratio(1.08, 1.06, 1.10), 1.10, strict=False) == \
        'target <= 1.1: met'
    assert bench.verdict(bench.Ratio(1.0, 1.0, 1.0), 1.0, strict=True) == \
        'target < 1: missed'
    assert bench.verdict(bench.Ratio(1.12, 1.101, 1.15), 1.10, strict=False) == \
        'target <= 1.1: missed'
    assert bench.verdict(bench.Ratio(0.99, 0.97, 1.01), 1.0, strict=True) == \
        'target < 1: undecided (the interval spans 1)'
    assert str(bench.Ratio(0.99, 0.97, 1.01)) == '0.990 [0.970, 1.010]'
