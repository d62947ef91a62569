"""Multi-object tracking of a model's detections: ByteTrack and BoT-SORT. ROS-free.

ByteTrack is the package's own (:mod:`.bytetrack`: NumPy and ``lap``, no torch, the same ids
as Ultralytics' on the same detections), so it runs with ONNX Runtime or OpenVINO alone;
BoT-SORT (camera-motion compensation with OpenCV) is Ultralytics' (``ultralytics.trackers``)
and needs the torch install. This module feeds a tracker one frame's detections and reads back
which detection each confirmed track took, so the published detections carry a stable track
id. Like Ultralytics' own ``model.track``, a detection the tracker has not confirmed (a new
object on its first frame, a low-score box matching no track) is left out of a tracked frame.

One tracker state per input (:class:`Tracking` is keyed by the input's name, so a node with
several cameras keeps one per camera). A state starts afresh when its input's ``frame_id``
changes or its stamp jumps backwards (a replayed bag, a restarted camera), and when the
owner calls :meth:`Tracking.reset` (the node does at deactivate and cleanup).
"""

from __future__ import annotations

import importlib.util
import logging
import math
import threading
import types
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import numpy as np

from .bytetrack import DEFAULTS as BYTETRACK_DEFAULTS
from .bytetrack import ByteTrack
from .files import read_regular
from .limits import MAX_TRACKER_CONFIG_BYTES
from .text import clip, clip_path, show
from .yaml_safety import safe_yaml, yaml_problem

#: Values of the ``tracker`` parameter ('none' turns tracking off).
TRACKERS = ('none', 'bytetrack', 'botsort')


class TrackerConfigError(ValueError):
    """A tracker configuration that cannot be used (one line, naming the fix)."""


def _packaged_config(kind: str) -> dict[str, Any]:
    """Return ``kind``'s default settings (those a ``tracker_config`` overrides).

    ByteTrack's are the package's own (:data:`.bytetrack.DEFAULTS`); BoT-SORT's are
    Ultralytics' YAML, found without importing ultralytics (a parameter check must stay
    quick).
    """
    if kind == 'bytetrack':
        return dict(BYTETRACK_DEFAULTS)
    try:
        spec = importlib.util.find_spec('ultralytics')
    except (ImportError, ValueError):  # a finder that refuses it, a module without a spec
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise TrackerConfigError(f'tracker {kind} needs the ultralytics package (the torch '
                                 'install: requirements/torch.txt), which is not installed; '
                                 'tracker bytetrack runs without it')
    folder = Path(next(iter(spec.submodule_search_locations))) / 'cfg' / 'trackers'
    return _read_yaml(folder / f'{kind}.yaml', TrackerConfigError)


def _read_yaml(path: Path, error: Callable[[str], Exception]) -> dict[str, Any]:
    text = read_regular(path, MAX_TRACKER_CONFIG_BYTES, 'tracker configuration', error)
    try:
        data = safe_yaml(text.decode('utf-8'))
    except (ValueError, UnicodeDecodeError) as exc:
        raise error(f'{clip_path(path)}: tracker configuration: {clip(exc)}') from None
    except Exception as exc:  # noqa: BLE001 - yaml.YAMLError, described in one line
        raise error(f'{clip_path(path)}: tracker configuration is not valid YAML: '
                    f'{yaml_problem(exc)}') from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise error(f'{clip_path(path)}: tracker configuration must be a mapping of settings '
                    '(as ultralytics/cfg/trackers/bytetrack.yaml)')
    return data


#: The trackers' thresholds: scores (``track_*_thresh``, ``new_track_thresh``) and
#: similarities (``match_thresh``, BoT-SORT's ``proximity_thresh``, ``appearance_thresh``),
#: all in [0, 1]; one no score reaches (``new_track_thresh: 5.0``) would publish nothing.
UNIT_SETTINGS = frozenset({'track_high_thresh', 'track_low_thresh', 'new_track_thresh',
                           'match_thresh', 'proximity_thresh', 'appearance_thresh'})
#: BoT-SORT's camera-motion compensation methods: those ``GMC`` in Ultralytics'
#: ``trackers/utils/gmc.py`` accepts (it also takes ``None`` and ``null``); another makes the
#: tracker raise on its first frame.
GMC_METHODS = ('sparseOptFlow', 'orb', 'sift', 'ecc', 'none')
#: Most frames a lost track is kept (``track_buffer``). Every lost track is matched against
#: each frame's detections until it expires, so the buffer bounds that work and the tracks
#: held; 3600 frames are two minutes at 30 Hz, long past the point where a constant-velocity
#: Kalman prediction still says where an object is.
MAX_TRACK_BUFFER = 3600
#: Smallest side (pixels) of an image BoT-SORT's camera-motion compensation is given: it
#: halves the image and follows corners in it; in a thinner one OpenCV fails on every frame
#: (the tracker goes on without compensation, as it does with ``gmc_method: none``).
MIN_GMC_SIDE = 16


def _is_number(value: Any) -> bool:
    """Say whether ``value`` is a finite int or float, not a bool (an int of any size)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return isinstance(value, int) or math.isfinite(value)


def _setting_rule(key: str, default: Any, value: Any) -> str | None:
    """Return the rule ``value`` breaks as tracker setting ``key`` (None: it keeps them all)."""
    if key in UNIT_SETTINGS:
        return None if _is_number(value) and 0 <= value <= 1 else 'must be a number in [0, 1]'
    if key == 'track_buffer':
        ok = isinstance(value, int) and not isinstance(value, bool) \
            and 1 <= value <= MAX_TRACK_BUFFER
        return None if ok else f'must be an integer in [1, {MAX_TRACK_BUFFER}]'
    if key == 'gmc_method':
        ok = value is None or value == 'None' or value in GMC_METHODS
        return None if ok else f"must be one of {', '.join(GMC_METHODS)}"
    if isinstance(default, bool) or isinstance(value, bool):
        ok = isinstance(default, bool) and isinstance(value, bool)
    elif isinstance(default, (int, float)):
        ok = _is_number(value)
    else:
        ok = isinstance(value, type(default))
    return None if ok else f'must be like {default!r}'


def _read_config(config: str) -> dict[str, Any]:
    """Read a ``tracker_config`` file; refuse a ``tracker_type`` that names no tracker."""
    data = _read_yaml(Path(config), TrackerConfigError)
    named = data.get('tracker_type')
    if 'tracker_type' in data and named not in TRACKERS[1:]:
        raise TrackerConfigError(
            f"{clip(config)}: tracker_type {clip(repr(named), 60)} is not one of "
            f"{', '.join(TRACKERS[1:])}: set it to one of them or remove it")
    return data


def _apply(kind: str, config: str, data: dict[str, Any]) -> dict[str, Any]:
    """Return ``kind``'s defaults with ``data`` (read from ``config``) on top, or refuse."""
    settings = _packaged_config(kind)
    where = clip(config)
    for key, value in data.items():
        if key not in settings:
            raise TrackerConfigError(
                f'{where}: tracker configuration: unknown key {clip(key)!r} for {kind} '
                f"(known: {', '.join(sorted(settings))})")
        if key == 'tracker_type' and value != kind:
            raise TrackerConfigError(
                f'{where}: tracker_type {clip(value)!r} differs from the tracker parameter '
                f'({kind}): set tracker to {clip(value)} or remove tracker_type')
        rule = _setting_rule(key, settings[key], value)
        if rule is not None:
            raise TrackerConfigError(
                f'{where}: tracker configuration: {key} {rule}, got {show(value, 60)}')
        settings[key] = value
    if settings.get('with_reid'):
        raise TrackerConfigError(f'{where}: with_reid is not supported here (it needs '
                                 'appearance features): set with_reid: false')
    return settings


def tracker_settings(kind: str, config: str = '') -> dict[str, Any]:
    """Return the settings of tracker ``kind``: its defaults, ``config``'s on top.

    ``config`` (a YAML file, read bounded through :mod:`.files`) may set any of the defaults'
    keys with a value of the same type, a threshold in [0, 1], ``track_buffer`` an integer in
    [1, :data:`MAX_TRACK_BUFFER`], ``gmc_method`` one of :data:`GMC_METHODS`; another key or
    value, a ``tracker_type`` naming another tracker, or ReID (which needs appearance features
    this node does not compute) is refused in one line naming the file and the fix.
    """
    if kind not in TRACKERS[1:]:
        raise TrackerConfigError(f"tracker {clip(kind)!r} is not one of "
                                 f"{', '.join(TRACKERS[1:])}")
    if not config:
        return _packaged_config(kind)
    return _apply(kind, config, _read_config(config))


def tracker_config_problem(tracker: str, config: str) -> str | None:
    """Why ``config`` cannot set up ``tracker`` (None: it can), in one line naming the fix.

    The rules of :func:`tracker_settings`; with ``tracker`` 'none' the file must suit the
    tracker its ``tracker_type`` names, or one of them when it names none, so that turning
    tracking on later finds it usable. An empty ``config`` always can (the defaults).
    """
    if not config:
        return None
    try:
        data = _read_config(config)
        named = data.get('tracker_type')
        kinds = [tracker] if tracker in TRACKERS[1:] else [named] if named else TRACKERS[1:]
        # The reason shown is that of a tracker that knows every key, if one does.
        kinds = sorted(kinds, key=lambda kind: not _knows_every_key(kind, data))
        problems = []
        for kind in kinds:
            try:
                _apply(kind, config, data)
                return None
            except TrackerConfigError as exc:
                problems.append(str(exc))
        return problems[0]
    except TrackerConfigError as exc:
        return str(exc)
    except Exception as exc:  # noqa: BLE001 - a check answers; it never raises into a service
        return (f'{clip_path(config)}: tracker configuration cannot be checked: '
                f'{type(exc).__name__}: {clip(exc)}')


def _knows_every_key(kind: str, data: Mapping[str, Any]) -> bool:
    """Say whether ``kind`` has a setting of each key of ``data`` (no when they are unknown)."""
    try:
        return set(data) <= set(_packaged_config(kind))
    except TrackerConfigError:  # BoT-SORT without ultralytics
        return False


def check_tracker(value: str, values: Mapping[str, Any]) -> str | None:
    """Check the ``tracker`` parameter: it must suit the ``tracker_config`` in place.

    A file no tracker can use is left to :func:`check_tracker_config`, so it is named once.
    """
    config = values.get('tracker_config', '')
    problem = tracker_config_problem(value, config)
    if problem is None or tracker_config_problem('none', config) is not None:
        return None
    return (f'tracker={clip(value)!r} does not suit the tracker_config in use: {problem}; '
            f"or set tracker_config to a file for {clip(value)} (or '') first")


def check_tracker_config(value: str, values: Mapping[str, Any]) -> str | None:
    """Check the ``tracker_config`` parameter: a usable file for the ``tracker`` set."""
    problem = tracker_config_problem(values.get('tracker', 'none'), value)
    return None if problem is None else f'tracker_config {problem}'


class _Boxes:
    """What an Ultralytics tracker reads from a frame's detections: conf, cls, xywh."""

    def __init__(self, boxes_xyxy: np.ndarray, scores: np.ndarray, class_ids: np.ndarray
                 ) -> None:
        boxes = np.asarray(boxes_xyxy, dtype=np.float32).reshape(-1, 4)
        self.xyxy = boxes
        self.xywh = np.concatenate([(boxes[:, :2] + boxes[:, 2:]) / 2,
                                    boxes[:, 2:] - boxes[:, :2]], axis=1)
        self.conf = np.asarray(scores, dtype=np.float32).reshape(-1)
        self.cls = np.asarray(class_ids).reshape(-1)

    def __len__(self) -> int:
        return int(self.conf.shape[0])

    def __getitem__(self, index: Any) -> '_Boxes':
        out = object.__new__(_Boxes)
        out.xyxy, out.xywh = self.xyxy[index], self.xywh[index]
        out.conf, out.cls = self.conf[index], self.cls[index]
        return out


class _UltralyticsLog(logging.Filter):
    """Ultralytics' log records, on a thread inside :meth:`Tracking.update`, to its ``warn``.

    BoT-SORT's camera-motion compensation logs a warning on every frame it cannot use (a
    featureless or tiny image) to Ultralytics' stdout handler: outside the node's logger and
    its rate limit. On the thread that runs a tracker these records go to the tracking's
    ``warn`` instead; every other thread's records go on as before.
    """

    def __init__(self) -> None:
        super().__init__()
        self._local = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        sink = getattr(self._local, 'sink', None)
        if sink is None:
            return True
        sink(record.getMessage())
        return False

    @contextmanager
    def to(self, sink: Callable[[str], None] | None) -> Iterator[None]:
        """Send this thread's records to ``sink`` meanwhile (None: where they went)."""
        self._local.sink = sink
        try:
            yield
        finally:
            self._local.sink = None


_LOG = _UltralyticsLog()


def _make_tracker(kind: str, settings: dict[str, Any]) -> Any:
    """Return a fresh tracker: the package's ByteTrack, or Ultralytics' BoT-SORT."""
    if kind == 'bytetrack':
        return ByteTrack(**settings)
    from .loaders.ultralytics import import_ultralytics

    import_ultralytics()
    from ultralytics.trackers import BOTSORT
    from ultralytics.utils import LOGGER

    if _LOG not in LOGGER.filters:
        LOGGER.addFilter(_LOG)
    args = types.SimpleNamespace(**settings)
    return BOTSORT(args)


def _gmc_image(image: np.ndarray | None) -> np.ndarray | None:
    """``image`` if camera-motion compensation can use it, else None (the tracker skips it)."""
    if image is None or min(image.shape[:2]) < MIN_GMC_SIDE:
        return None
    return image


def _botsort_update(tracker: Any, dets: _Boxes, image: np.ndarray | None,
                    warn: Callable[[str], None] | None) -> tuple[np.ndarray, np.ndarray]:
    """Track one frame with Ultralytics' BoT-SORT; return (detection indices, track ids)."""
    with _LOG.to(warn):
        out = tracker.update(dets, image)
    if len(out) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    order = np.argsort(out[:, -1], kind='stable')
    return out[order, -1].astype(np.int64), out[order, 4].astype(np.int64)


@dataclass
class _Stream:
    """The tracker state of one input, and what tells a new sequence from the next frame."""

    tracker: Any
    frame_id: str
    stamp_ns: int


class Tracking:
    """Track ids for one model's detections, with one tracker state per input."""

    def __init__(self, kind: str, config: str = '',
                 warn: Callable[[str], None] | None = None) -> None:
        """Check ``config`` for tracker ``kind`` now (:func:`tracker_settings`).

        ``warn`` gets what Ultralytics logs while BoT-SORT tracks a frame (None: its own
        handler prints it); the package's ByteTrack logs nothing.
        """
        self.kind = kind
        self.config = config
        self._settings = tracker_settings(kind, config)
        self._warn = warn
        self._streams: dict[str, _Stream] = {}
        #: How many times a state started afresh because of its input (not :meth:`reset`).
        self.restarts = 0

    def reset(self) -> None:
        """Forget every track (ids start at 1 again)."""
        self._streams.clear()

    def update(self, boxes_xyxy: np.ndarray, scores: np.ndarray, class_ids: np.ndarray, *,
               stamp_ns: int, frame_id: str, key: str = 'image',
               image: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Track one frame; return (indices of the tracked detections, their track ids).

        Indices point into the given detections, in their order; ``image`` (BGR) is used by
        BoT-SORT's camera-motion compensation when its ``gmc_method`` is not ``none`` and
        the image has :data:`MIN_GMC_SIDE` pixels a side. A tracker that raises is left
        half-updated: the input's next frame starts a fresh one.
        """
        stream = self._stream(key, frame_id, stamp_ns)
        try:
            if self.kind == 'bytetrack':
                return stream.tracker.update(boxes_xyxy, scores, class_ids)
            return _botsort_update(stream.tracker, _Boxes(boxes_xyxy, scores, class_ids),
                                   _gmc_image(image), self._warn)
        except BaseException:
            self._streams.pop(key, None)
            raise

    def _stream(self, key: str, frame_id: str, stamp_ns: int) -> _Stream:
        """Return input ``key``'s state: a fresh one for a new frame_id or a stamp gone back."""
        stream = self._streams.get(key)
        if stream is None or stream.frame_id != frame_id or stamp_ns < stream.stamp_ns:
            if stream is not None:
                self.restarts += 1
            stream = self._streams[key] = _Stream(
                _make_tracker(self.kind, dict(self._settings)), frame_id, stamp_ns)
        stream.stamp_ns = stamp_ns
        return stream
