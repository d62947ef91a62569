"""Multi-object tracking of a model's detections: Ultralytics' ByteTrack and BoT-SORT. ROS-free.

The trackers themselves (Kalman filter, two-stage assignment with ``lap``) are Ultralytics'
(``ultralytics.trackers``); this module feeds them one frame's detections and reads back which
detection each confirmed track took, so the published detections carry a stable track id.
Like Ultralytics' own ``model.track``, a detection the tracker has not confirmed (a new object
on its first frame, a low-score box matching no track) is left out of a tracked frame.

One tracker state per input (:class:`Tracking` is keyed by the input's name, so a node with
several cameras keeps one per camera). A state starts afresh when its input's ``frame_id``
changes or its stamp jumps backwards (a replayed bag, a restarted camera), and when the
owner calls :meth:`Tracking.reset` (the node does at deactivate and cleanup).
"""

from __future__ import annotations

import importlib.util
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from .files import read_regular
from .limits import MAX_TRACKER_CONFIG_BYTES
from .text import clip, clip_path

#: Values of the ``tracker`` parameter ('none' turns tracking off).
TRACKERS = ('none', 'bytetrack', 'botsort')


class TrackerConfigError(ValueError):
    """A tracker configuration that cannot be used (one line, naming the fix)."""


def _packaged_config(kind: str) -> dict[str, Any]:
    """Ultralytics' own YAML for ``kind`` (the defaults a ``tracker_config`` overrides).

    Found without importing ultralytics (a parameter check must stay quick).
    """
    spec = importlib.util.find_spec('ultralytics')
    if spec is None or not spec.submodule_search_locations:
        raise TrackerConfigError('tracking needs the ultralytics package, which is not '
                                 'installed (requirements/)')
    folder = Path(next(iter(spec.submodule_search_locations))) / 'cfg' / 'trackers'
    return _read_yaml(folder / f'{kind}.yaml', TrackerConfigError)


def _read_yaml(path: Path, error: Callable[[str], Exception]) -> dict[str, Any]:
    from .manifest import safe_yaml, yaml_problem

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


def _same_kind(default: Any, value: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, (int, float)):
        return isinstance(value, (int, float)) and np.isfinite(value)
    return isinstance(value, type(default))


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
        if not _same_kind(settings[key], value):
            raise TrackerConfigError(
                f'{where}: tracker configuration: {key} must be like {settings[key]!r}, got '
                f'{clip(repr(value), 60)}')
        settings[key] = value
    if settings.get('with_reid'):
        raise TrackerConfigError(f'{where}: with_reid is not supported here (it needs '
                                 'appearance features): set with_reid: false')
    return settings


def tracker_settings(kind: str, config: str = '') -> dict[str, Any]:
    """Return the settings of tracker ``kind``: Ultralytics' defaults, ``config``'s on top.

    ``config`` (a YAML file, read bounded through :mod:`.files`) may set any of the defaults'
    keys with a value of the same type; another key, a ``tracker_type`` naming another tracker,
    or ReID (which needs appearance features this node does not compute) is refused in one
    line naming the file and the fix.
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
        kinds = sorted(kinds, key=lambda kind: not set(data) <= set(_packaged_config(kind)))
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


def _make_tracker(kind: str, settings: dict[str, Any]) -> Any:
    from .loaders.ultralytics import import_ultralytics

    import_ultralytics()
    from ultralytics.trackers import BOTSORT, BYTETracker

    args = types.SimpleNamespace(**settings)
    return BOTSORT(args) if kind == 'botsort' else BYTETracker(args)


@dataclass
class _Stream:
    """The tracker state of one input, and what tells a new sequence from the next frame."""

    tracker: Any
    frame_id: str
    stamp_ns: int


class Tracking:
    """Track ids for one model's detections, with one tracker state per input."""

    def __init__(self, kind: str, config: str = '') -> None:
        self.kind = kind
        self.config = config
        self._settings = tracker_settings(kind, config)
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
        BoT-SORT's camera-motion compensation when its ``gmc_method`` is not ``none``.
        """
        stream = self._streams.get(key)
        if stream is None or stream.frame_id != frame_id or stamp_ns < stream.stamp_ns:
            if stream is not None:
                self.restarts += 1
            stream = self._streams[key] = _Stream(
                _make_tracker(self.kind, dict(self._settings)), frame_id, stamp_ns)
        stream.stamp_ns = stamp_ns
        dets = _Boxes(boxes_xyxy, scores, class_ids)
        out = stream.tracker.update(dets, image)
        if len(out) == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        order = np.argsort(out[:, -1], kind='stable')
        return out[order, -1].astype(np.int64), out[order, 4].astype(np.int64)
