"""Tracking (vision_nodes/tracking.py): Ultralytics' trackers over a moving sequence.

Three objects move a few pixels per frame (one of them crossing another's path); each must
keep its id on at least 90 % of the frames, ids are unique within a frame, and the state
starts afresh when the frame_id changes, the stamp jumps back, or on reset.
"""

from __future__ import annotations

import os
from collections import Counter

import numpy as np
import pytest

from vision_nodes.tracking import Tracking, TrackerConfigError, tracker_settings

FRAMES = 60
STEP_NS = 33_000_000


def moving_boxes(frame: int) -> np.ndarray:
    """Three boxes: one drifting right, one down, one diagonally up-left (crossing)."""
    return np.array([[20 + 4 * frame, 30, 80 + 4 * frame, 110],
                     [300, 20 + 3 * frame, 360, 90 + 3 * frame],
                     [500 - 5 * frame, 400 - 3 * frame, 560 - 5 * frame, 480 - 3 * frame]],
                    np.float32)


def run(tracking: Tracking, frames: int = FRAMES, start: int = 0, frame_id: str = 'cam',
        stamp0: int = 0) -> list[dict[int, int]]:
    """Track the sequence; per frame, object index → track id."""
    scores = np.array([0.9, 0.8, 0.7], np.float32)
    classes = np.array([0, 0, 2])
    seen = []
    for k in range(start, start + frames):
        boxes = moving_boxes(k)
        # Detections come in score order, not object order: shuffle to prove the mapping.
        order = np.random.default_rng(k).permutation(3)
        index, ids = tracking.update(boxes[order], scores[order], classes[order],
                                     stamp_ns=stamp0 + k * STEP_NS, frame_id=frame_id)
        assert len(set(ids.tolist())) == len(ids), f'duplicate ids in frame {k}'
        seen.append({int(order[i]): int(t) for i, t in zip(index, ids)})
    return seen


@pytest.mark.parametrize('kind', ['bytetrack', 'botsort'])
def test_each_object_keeps_its_id(kind):
    seen = run(Tracking(kind))
    for obj in range(3):
        ids = [frame.get(obj) for frame in seen]
        main, count = Counter(i for i in ids if i is not None).most_common(1)[0]
        assert count >= 0.9 * FRAMES, (obj, ids)
    mains = {Counter(f.get(o) for f in seen).most_common(1)[0][0] for o in range(3)}
    assert len(mains) == 3  # three objects, three ids


def test_the_first_frame_is_tracked_and_ids_are_decimal_from_one():
    seen = run(Tracking('bytetrack'), frames=1)
    assert sorted(seen[0].values()) == [1, 2, 3]


def test_frame_id_change_restarts():
    tracking = Tracking('bytetrack')
    run(tracking, frames=5)
    first = run(tracking, frames=1, start=5, frame_id='other_cam', stamp0=0)
    assert sorted(first[0].values()) == [1, 2, 3]  # a fresh tracker numbers from 1
    assert tracking.restarts == 1


def test_stamp_jumping_back_restarts_but_equal_or_later_does_not():
    tracking = Tracking('bytetrack')
    before = run(tracking, frames=10)
    after = run(tracking, frames=3, start=10)  # stamps go on
    assert after[0] == before[-1] and tracking.restarts == 0
    replay = run(tracking, frames=2, start=0)  # a bag replayed from its start
    assert tracking.restarts == 1 and sorted(replay[0].values()) == [1, 2, 3]


def test_reset_forgets_the_tracks():
    tracking = Tracking('bytetrack')
    run(tracking, frames=3)
    run(tracking, frames=1, start=3)
    tracking.reset()
    again = run(tracking, frames=1, start=4)
    assert sorted(again[0].values()) == [1, 2, 3]


def test_one_state_per_input():
    tracking = Tracking('bytetrack')
    scores, classes = np.array([0.9], np.float32), np.array([0])
    for k in range(5):
        box = moving_boxes(k)[:1]
        a = tracking.update(box, scores, classes, stamp_ns=k * STEP_NS, frame_id='a', key='cam_a')
        b = tracking.update(box + 200, scores, classes, stamp_ns=k * STEP_NS, frame_id='b',
                            key='cam_b')
        assert a[1].tolist() == [1] and b[1].tolist() == [1]
    assert tracking.restarts == 0


def test_no_detections_gives_nothing():
    index, ids = Tracking('bytetrack').update(np.zeros((0, 4), np.float32), np.zeros(0),
                                              np.zeros(0), stamp_ns=0, frame_id='c')
    assert index.shape == (0,) and ids.shape == (0,)


def test_a_tracker_config_overrides_the_defaults(tmp_path):
    path = tmp_path / 'mine.yaml'
    path.write_text('tracker_type: bytetrack\ntrack_buffer: 5\nmatch_thresh: 0.7\n')
    settings = tracker_settings('bytetrack', str(path))
    assert settings['track_buffer'] == 5 and settings['match_thresh'] == 0.7
    assert settings['new_track_thresh'] == tracker_settings('bytetrack')['new_track_thresh']


@pytest.mark.parametrize('text, words', [
    ('track_bufer: 5\n', 'unknown key'),
    ('tracker_type: botsort\n', 'differs from the tracker parameter'),
    ('track_buffer: many\n', 'track_buffer must be an integer'),
    ('- 1\n- 2\n', 'must be a mapping'),
    ('a: [1\n', 'not valid YAML'),
    ('a: &x 1\nb: *x\n', 'tracker configuration'),
])
def test_a_bad_tracker_config_is_refused_in_one_line(tmp_path, text, words):
    path = tmp_path / 'bad.yaml'
    path.write_text(text)
    with pytest.raises(TrackerConfigError) as info:
        Tracking('bytetrack', str(path))
    message = str(info.value)
    assert words in message and '\n' not in message and str(path) in message


def test_reid_and_special_files_are_refused(tmp_path):
    path = tmp_path / 'reid.yaml'
    path.write_text('with_reid: true\n')
    with pytest.raises(TrackerConfigError, match='with_reid'):
        Tracking('botsort', str(path))
    with pytest.raises(TrackerConfigError, match='regular file'):
        Tracking('bytetrack', str(tmp_path))
    with pytest.raises(TrackerConfigError, match='cannot read'):
        Tracking('bytetrack', str(tmp_path / 'missing.yaml'))


def _spec(name: str):
    from vision_nodes.tasks import task_class

    return next(s for s in task_class('detect').params if s.name == name)


def _too_large(path):
    from vision_nodes.limits import MAX_TRACKER_CONFIG_BYTES

    path.write_text('# padding\n' * (MAX_TRACKER_CONFIG_BYTES // 10 + 1))


#: tracker_config values the parameter refuses when set, and a word of each reason.
BAD_CONFIGS = {
    'missing': (lambda p: None, 'cannot read'),
    'fifo': (os.mkfifo, 'a FIFO'),
    'folder': (lambda p: p.mkdir(), 'a folder'),
    'dev_zero': (lambda p: os.symlink('/dev/zero', p), 'regular file'),
    'too_large': (_too_large, 'at most'),
    'broken_yaml': (lambda p: p.write_text('a: [1\n'), 'not valid YAML'),
    'not_a_mapping': (lambda p: p.write_text('- 1\n- 2\n'), 'must be a mapping'),
    'unknown_tracker_type': (lambda p: p.write_text('tracker_type: kalman\n'),
                             "tracker_type 'kalman' is not one of bytetrack, botsort"),
    'unknown_key': (lambda p: p.write_text('track_bufer: 5\n'), 'unknown key'),
    'wrong_type': (lambda p: p.write_text('track_buffer: many\n'), 'track_buffer must be an'),
}


@pytest.mark.parametrize('tracker', ['bytetrack', 'none'])
@pytest.mark.parametrize('case', sorted(BAD_CONFIGS))
def test_the_tracker_config_parameter_refuses_a_bad_file_in_one_line(tmp_path, case, tracker):
    """The parameter's own rule, run when it is set (not when tracking starts): it names the
    parameter, the file and what is wrong, with tracking on or off."""
    make, words = BAD_CONFIGS[case]
    path = tmp_path / 'tracker.yaml'
    make(path)
    reason = _spec('tracker_config').refusal(str(path), {'tracker': tracker})
    assert reason is not None and '\n' not in reason, reason
    assert reason.startswith(f'tracker_config {path}: ') and words in reason, reason


def test_the_tracker_parameters_are_checked_together(tmp_path):
    """A good file is taken; tracker and tracker_config must suit each other whichever is set;
    a tracker outside none/bytetrack/botsort is refused by its choices."""
    bytetrack, botsort = tmp_path / 'bytetrack.yaml', tmp_path / 'botsort.yaml'
    bytetrack.write_text('tracker_type: bytetrack\ntrack_buffer: 5\n')
    botsort.write_text('gmc_method: none\n')  # botsort's key, no tracker_type
    config, tracker = _spec('tracker_config'), _spec('tracker')
    assert config.refusal(str(bytetrack), {'tracker': 'bytetrack'}) is None
    assert config.refusal('', {'tracker': 'botsort'}) is None
    assert config.refusal(str(botsort), {'tracker': 'none'}) is None
    refused = config.refusal(str(botsort), {'tracker': 'bytetrack'})
    assert "unknown key 'gmc_method' for bytetrack" in refused
    refused = tracker.refusal('botsort', {'tracker_config': str(bytetrack)})
    assert refused.startswith("tracker='botsort' does not suit the tracker_config in use")
    assert refused.endswith("; or set tracker_config to a file for botsort (or '') first")
    assert tracker.refusal('bytetrack', {'tracker_config': str(bytetrack)}) is None
    assert tracker.refusal('none', {'tracker_config': str(bytetrack)}) is None
    assert "tracker='kalman' is not one of" in tracker.refusal('kalman', {})
    broken = tmp_path / 'broken.yaml'
    broken.write_text('a: [1\n')  # no tracker can use it: tracker_config's rule names it
    assert tracker.refusal('bytetrack', {'tracker_config': str(broken)}) is None
    assert 'not valid YAML' in config.refusal(str(broken), {'tracker': 'bytetrack'})
    reid = tmp_path / 'reid.yaml'
    reid.write_text('with_reid: true\n')
    assert 'with_reid is not supported' in config.refusal(str(reid), {'tracker': 'none'})


def _write(tmp_path, text: str) -> str:
    path = tmp_path / 'tracker.yaml'
    path.write_text(text)
    return str(path)


def test_a_huge_integer_is_refused_in_one_line_not_a_type_error(tmp_path):
    """#37 finding 1: an int NumPy cannot hold (10**29) was handed to np.isfinite, whose
    TypeError crashed the parameter service and start-up; it is refused like any bad value,
    whichever the tracker, by the rule of the setting it is given to."""
    huge = 10 ** 29
    config = _write(tmp_path, f'track_buffer: {huge}\nmatch_thresh: 0.5\n')
    for tracker in ('bytetrack', 'botsort', 'none'):
        reason = _spec('tracker_config').refusal(config, {'tracker': tracker})
        assert reason is not None and '\n' not in reason, reason
        assert f'track_buffer must be an integer in [1, 3600], got {huge}' in reason, reason
    with pytest.raises(TrackerConfigError, match=str(huge)):
        Tracking('bytetrack', config)
    # A huge int where a float is expected is refused by its range, not by a crash.
    config = _write(tmp_path, f'new_track_thresh: {huge}\n')
    reason = _spec('tracker_config').refusal(config, {'tracker': 'bytetrack'})
    assert f'new_track_thresh must be a number in [0, 1], got {huge}' in reason, reason


#: Settings the tracker cannot use: (tracker, YAML, the words of the refusal).
BAD_SETTINGS = [
    ('bytetrack', 'new_track_thresh: 5.0',
     'new_track_thresh must be a number in [0, 1], got 5.0'),
    ('bytetrack', 'track_high_thresh: -0.1', 'track_high_thresh must be a number in [0, 1]'),
    ('bytetrack', 'track_low_thresh: .inf',
     'track_low_thresh must be a number in [0, 1], got inf'),
    ('bytetrack', 'match_thresh: 1.5', 'match_thresh must be a number in [0, 1]'),
    ('bytetrack', 'match_thresh: .nan', 'match_thresh must be a number in [0, 1], got nan'),
    ('bytetrack', 'match_thresh: true', 'match_thresh must be a number in [0, 1], got True'),
    ('botsort', 'proximity_thresh: 2', 'proximity_thresh must be a number in [0, 1], got 2'),
    ('botsort', 'appearance_thresh: -1', 'appearance_thresh must be a number in [0, 1]'),
    ('bytetrack', 'track_buffer: 0', 'track_buffer must be an integer in [1, 3600], got 0'),
    ('bytetrack', 'track_buffer: -3', 'track_buffer must be an integer in [1, 3600], got -3'),
    ('bytetrack', 'track_buffer: 3601', 'track_buffer must be an integer in [1, 3600]'),
    ('bytetrack', 'track_buffer: 2.5', 'track_buffer must be an integer in [1, 3600], got 2.5'),
    ('bytetrack', 'fuse_score: 1', 'fuse_score must be like True, got 1'),
    ('botsort', 'gmc_method: bogus', "gmc_method must be one of sparseOptFlow, orb, sift, ecc, "
                                     "none, got 'bogus'"),
    ('botsort', 'gmc_method: 3', 'gmc_method must be one of'),
]


@pytest.mark.parametrize('tracker, text, words', BAD_SETTINGS)
def test_a_setting_the_tracker_cannot_use_is_refused_when_set(tmp_path, tracker, text, words):
    """#37 findings 2 and 9: gmc_method: bogus was taken and raised in the tracker's first
    frame; new_track_thresh: 5.0 was taken and every tracked frame had no detection. Each
    is refused by the tracker_config parameter's rule, naming the file, setting, rule and
    value, and by the tracker parameter while that file is in place."""
    config = _write(tmp_path, text + '\n')
    reason = _spec('tracker_config').refusal(config, {'tracker': tracker})
    assert reason is not None and '\n' not in reason, reason
    assert reason.startswith(f'tracker_config {config}: tracker configuration: ')
    assert words in reason, reason
    with pytest.raises(TrackerConfigError, match='must be'):
        Tracking(tracker, config)


@pytest.mark.parametrize('method', ['sparseOptFlow', 'orb', 'sift', 'ecc', 'none', 'None',
                                    'null'])
def test_every_gmc_method_accepted_is_one_botsort_runs(tmp_path, method):
    """The methods the check accepts are those the installed Ultralytics' GMC takes: a
    tracker with each one tracks two frames."""
    config = _write(tmp_path, f'gmc_method: {method}\ntrack_buffer: 3600\nmatch_thresh: 1\n')
    assert _spec('tracker_config').refusal(config, {'tracker': 'botsort'}) is None
    tracking = Tracking('botsort', config)
    image = np.random.default_rng(0).integers(0, 255, (480, 640, 3), np.uint8)
    for k in range(2):
        index, ids = tracking.update(moving_boxes(k), np.array([0.9, 0.8, 0.7]),
                                     np.array([0, 0, 2]), stamp_ns=k, frame_id='c', image=image)
    assert sorted(ids.tolist()) == [1, 2, 3]


def test_a_check_that_breaks_answers_in_one_line(tmp_path, monkeypatch):
    """Whatever goes wrong inside the check, it answers with a refusal: an exception raised
    into the parameter service ends the process."""
    import vision_nodes.tracking as tracking

    def broken(kind):
        raise TypeError('unexpected\nvalue')
    monkeypatch.setattr(tracking, '_packaged_config', broken)
    config = _write(tmp_path, 'track_buffer: 5\n')
    reason = _spec('tracker_config').refusal(config, {'tracker': 'bytetrack'})
    assert 'cannot be checked: TypeError: unexpected' in reason and '\n' not in reason


def test_a_tracker_that_raised_starts_afresh_on_the_next_frame(monkeypatch):
    """Ultralytics' state is half-updated when its update raises: the input's next frame
    gets a fresh tracker (ids from 1) instead of that state."""
    tracking = Tracking('bytetrack')
    run(tracking, frames=3)
    tracker = tracking._streams['image'].tracker

    def fails(*args, **kwargs):
        raise ValueError('broken')
    monkeypatch.setattr(tracker, 'update', fails)
    with pytest.raises(ValueError):
        run(tracking, frames=1, start=3)
    again = run(tracking, frames=1, start=4)
    assert tracking._streams['image'].tracker is not tracker
    assert sorted(again[0].values()) == [1, 2, 3]


def test_gmc_warnings_go_to_warn_not_stdout(capfd):
    """BoT-SORT's camera-motion compensation warned on Ultralytics' stdout on every frame 1
    pixel high (OpenCV fails on it) and on every frame with too few corners to follow,
    outside the node's rate limit. A frame too small is not given to it; what it says goes
    to ``warn``."""
    import logging

    from vision_nodes.loaders.ultralytics import import_ultralytics

    import_ultralytics()
    from ultralytics.utils import LOGGER

    # Ultralytics imported after YOLO_VERBOSE=False (a model loaded first in this process)
    # logs no warnings at all; the routing is checked with them on.
    level = LOGGER.level
    LOGGER.setLevel(logging.INFO)
    try:
        _gmc_warnings_go_to_warn(capfd)
    finally:
        LOGGER.setLevel(level)


def _gmc_warnings_go_to_warn(capfd):
    said: list[str] = []
    tracking = Tracking('botsort', warn=said.append)
    scores, classes = np.array([0.9, 0.8, 0.7]), np.array([0, 0, 2])
    for k in range(4):  # one pixel high: no compensation, nothing said
        thin = np.full((1, 640, 3), 50 * k, np.uint8)
        tracking.update(moving_boxes(k), scores, classes, stamp_ns=k, frame_id='thin',
                        image=thin)
    assert said == []
    for k in range(4):  # one square's four corners: too few to follow, said to warn
        square = np.zeros((480, 640, 3), np.uint8)
        square[100:140, 100 + k:140 + k] = 255
        tracking.update(moving_boxes(k), scores, classes, stamp_ns=k, frame_id='square',
                        image=square)
    assert said and all('\n' not in line for line in said), said
    out = capfd.readouterr()
    assert 'GMC' not in out.out + out.err and 'matching points' not in out.out + out.err
