"""The package's ByteTrack (vision_nodes/bytetrack.py): Ultralytics' track ids, without torch.

On the same detections it must give the ids Ultralytics' ``BYTETracker`` gives, frame by
frame, for the same detections (indices and ids equal): on seeded synthetic sequences that
reach each of its rules, under several settings, and on a real detector's boxes over a camera
panning across bus.jpg and zidane.jpg. It runs with torch and ultralytics unimportable, and
its defaults are Ultralytics' ``bytetrack.yaml``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from absent_packages import absent_env
from tracking_sequences import pan, synthetic
from vision_nodes.bytetrack import DEFAULTS, ByteTrack

TEST = Path(__file__).resolve().parents[2]
ROOT = TEST.parent
WEIGHTS = ROOT.parent / 'shared' / 'models' / 'yolov8n.pt'
#: Settings to compare under, and the rules their synthetic sequences must reach.
VARIANTS = {
    'defaults': ({}, {'second', 'refound', 'expired', 'duplicate'}),
    'no_fuse_short_buffer': (dict(fuse_score=False, track_buffer=3, match_thresh=0.6),
                             {'second', 'refound', 'expired', 'duplicate', 'lingering'}),
    'high_thresholds': (dict(track_high_thresh=0.5, track_low_thresh=0.2,
                             new_track_thresh=0.6), {'second', 'refound', 'expired'}),
    'buffer_1_match_1': (dict(track_buffer=1, match_thresh=1.0, new_track_thresh=0.1),
                         {'second', 'refound', 'expired', 'lingering'}),
    # Few matches, many births beside lost tracks; float32(0.7) is below 0.7.
    'tight_match': (dict(match_thresh=0.3, new_track_thresh=0.7, track_buffer=10),
                    {'second', 'refound', 'expired', 'duplicate'}),
}
SEEDS = range(15)


def _reference(settings: dict):
    pytest.importorskip('ultralytics.trackers', reason='Ultralytics (the reference)')
    from tracking_sequences import UltralyticsByteTrack

    return UltralyticsByteTrack(settings)


def _compare(frames, settings: dict, label: str):
    """Track ``frames`` with both; assert equal indices and ids; return the reference."""
    reference, mine = _reference(settings), ByteTrack(**settings)
    for k, frame in enumerate(frames):
        want, got = reference.update(*frame), mine.update(*frame)
        assert np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1]), (
            f'{label} frame {k}: Ultralytics {want[0].tolist()} ids {want[1].tolist()}, '
            f'ours {got[0].tolist()} ids {got[1].tolist()}')
    return reference


def test_the_defaults_are_ultralytics_bytetrack_yaml():
    spec = importlib.util.find_spec('ultralytics')
    if spec is None:
        pytest.skip('ultralytics is not installed')
    path = Path(next(iter(spec.submodule_search_locations))) / 'cfg/trackers/bytetrack.yaml'
    assert yaml.safe_load(path.read_text()) == DEFAULTS


@pytest.mark.parametrize('variant', sorted(VARIANTS))
def test_ids_match_ultralytics_on_synthetic_sequences(variant):
    """15 sequences of 120 frames each; together they reach every rule the variant has."""
    changes, rules = VARIANTS[variant]
    settings = {**DEFAULTS, **changes}
    reached = set()
    for seed in SEEDS:
        reference = _compare(synthetic(seed), settings, f'{variant} seed {seed}')
        reached |= {rule for rule, count in reference.events.items() if count}
    assert rules <= reached, f'the sequences never reached {sorted(rules - reached)}'


@pytest.fixture(scope='module')
def panned() -> dict[str, list]:
    """Return yolov8n's boxes (conf 0.05) on 48 frames panning over bus.jpg, zidane.jpg."""
    pytest.importorskip('torch', reason='PyTorch is not installed (the detector)')
    ultralytics = pytest.importorskip('ultralytics', reason='Ultralytics (the detector)')
    import cv2

    from tracking_sequences import detect

    if not WEIGHTS.is_file():
        pytest.skip(f'no {WEIGHTS}')
    assets = Path(ultralytics.__file__).parent / 'assets'
    return {name: detect(WEIGHTS, list(pan(cv2.imread(str(assets / name)), 48)))
            for name in ('bus.jpg', 'zidane.jpg')}


@pytest.mark.parametrize('changes', [{}, dict(track_high_thresh=0.5, track_low_thresh=0.2,
                                              new_track_thresh=0.6, track_buffer=5)],
                         ids=['defaults', 'high_thresholds'])
def test_ids_match_ultralytics_on_a_detector_over_a_panning_camera(panned, changes):
    settings = {**DEFAULTS, **changes}
    for name, frames in panned.items():
        reference = _compare(frames, settings, name)
        assert reference.events['second'] and reference.events['expired'], reference.events
    ids = ByteTrack(**settings)
    seen = {int(i) for frame in panned['bus.jpg'] for i in ids.update(*frame)[1]}
    assert len(seen) >= 4  # people and the bus, tracked


#: Run where torch and ultralytics are not installed as far as Python sees
#: (test/absent_packages): the tracker path as a runtime-only install has it.
_WITHOUT_TORCH = r'''
import json, sys

sys.path.insert(0, sys.argv[1])
from tracking_sequences import synthetic
from vision_nodes.tracking import Tracking, TrackerConfigError

tracking, frames = Tracking('bytetrack'), []
for k, (boxes, scores, classes) in enumerate(synthetic(int(sys.argv[2]))):
    index, ids = tracking.update(boxes, scores, classes, stamp_ns=k, frame_id='cam')
    frames.append([index.tolist(), ids.tolist()])
try:
    Tracking('botsort')
    refusal = None
except TrackerConfigError as exc:
    refusal = str(exc)
try:
    import torch
    blocked = False
except ImportError:
    blocked = True
loaded = sorted(m for m in sys.modules if m.partition('.')[0] in ('torch', 'ultralytics'))
print(json.dumps({'frames': frames, 'refusal': refusal, 'blocked': blocked,
                  'loaded': loaded}))
'''
SEED_WITHOUT_TORCH = 3


@pytest.fixture(scope='module')
def without_torch() -> dict:
    """Return what the tracker path did in a process where torch and ultralytics cannot import."""
    done = subprocess.run([sys.executable, '-c', _WITHOUT_TORCH, str(TEST),
                           str(SEED_WITHOUT_TORCH)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**os.environ, **absent_env(('torch', 'ultralytics'))})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_bytetrack_runs_without_torch_and_botsort_is_refused_in_one_line(without_torch):
    assert without_torch['blocked'] and without_torch['loaded'] == []
    assert sum(len(ids) for _, ids in without_torch['frames']) > 100
    refusal = without_torch['refusal']
    assert refusal is not None and '\n' not in refusal, refusal
    assert 'botsort needs the ultralytics package' in refusal
    assert 'bytetrack runs without it' in refusal


def test_without_torch_the_ids_are_ultralytics(without_torch):
    reference = _reference(dict(DEFAULTS))
    for k, frame in enumerate(synthetic(SEED_WITHOUT_TORCH)):
        index, ids = reference.update(*frame)
        assert [index.tolist(), ids.tolist()] == without_torch['frames'][k], f'frame {k}'


def _box(x: float, score: float = 0.9) -> tuple[np.ndarray, np.ndarray]:
    return np.array([[x, 100, x + 50, 200]], np.float32), np.array([score], np.float32)


def test_confirmation_the_second_association_and_the_buffer():
    """Rules that hold without the reference: the first frame's tracks are published, a later
    track from its second frame; a low-score box keeps a track; a lost track comes back
    within track_buffer frames and is forgotten after."""
    tracker = ByteTrack(track_buffer=3)
    assert tracker.update(*_box(0))[1].tolist() == [1]
    late = ByteTrack()
    late.update(np.zeros((0, 4)), np.zeros(0))
    assert late.update(*_box(0))[1].tolist() == [] and late.update(*_box(2))[1].tolist() == [1]
    assert tracker.update(*_box(2, 0.15))[1].tolist() == [1]  # second association
    for _ in range(3):
        assert tracker.update(np.zeros((0, 4)), np.zeros(0))[1].tolist() == []
    assert tracker.update(*_box(4))[1].tolist() == [1]  # lost 3 frames: back
    for _ in range(5):
        tracker.update(np.zeros((0, 4)), np.zeros(0))
    assert tracker.update(*_box(6))[1].tolist() == []  # expired: a new, unconfirmed track
    assert tracker.update(*_box(6))[1].tolist() == [2]
