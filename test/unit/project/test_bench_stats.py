"""The benchmark's paired ratios and target verdicts (benchmarks/bench_detect.py)."""

import importlib.util
import json
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


def test_report_has_the_stage_breakdown_json_shape_and_a_plot(bench, tmp_path):
    sys.path.insert(0, str(_PATH.parent))
    try:
        import bench_report
    finally:
        sys.path.remove(str(_PATH.parent))
    from vision_nodes.stage_times import STAGES, StageTimes

    times = StageTimes()
    times.add({stage: 0.001 * (i + 1) for i, stage in enumerate(STAGES)})
    stages = bench_report.stages_from_status(times.diagnostic_values())
    assert stages == pytest.approx({s: i + 1.0 for i, s in enumerate(STAGES)})
    assert bench_report.stages_from_status(StageTimes().diagnostic_values()) is None
    row = {'bare_ms': 20.0, 'pipeline_ms': 21.0, 'node_ms': 60.0, 'backend': 'openvino',
           'precision': 'int8', 'stages_ms': bench_report.with_outside(stages, 60.0)}
    assert row['stages_ms']['outside'] == pytest.approx(60.0 - sum(range(1, len(STAGES) + 1)))
    ratio = bench.paired_ratio([[1.1]] * 3, [[1.0]] * 3)
    bench_report.write_json(tmp_path / 'r.json', {'cpu': 'x'}, {'openvino:int8': row}, 80.0,
                            {'a': {'median': ratio.value, 'low': ratio.low,
                                   'high': ratio.high}})
    data = json.loads((tmp_path / 'r.json').read_text())
    assert set(data) == {'machine', 'configs', 'ultralytics_pt_ms', 'ratios', 'skipped'}
    assert set(data['configs']['openvino:int8']) == {'bare_ms', 'pipeline_ms', 'node_ms',
                                                     'stages_ms', 'backend', 'precision'}
    assert set(data['ratios']['a']) == {'median', 'low', 'high'}
    assert bench_report.breakdown_lines(data['configs'])[1].split()[0] == 'openvino:int8'
    bench_report.write_plot(tmp_path / 'r.png', data['configs'], 80.0, 'test')
    assert (tmp_path / 'r.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
