#!/usr/bin/env python3
r"""What each reduced precision costs in answers and gains in speed, per backend: one table.

For each model (``--models``) and configuration (``--configs``: ``BACKEND[:PRECISION]``;
default OpenVINO at fp32, fp16 (bf16 on CPUs that have it), int8, and ONNX Runtime at fp32)
that this machine can run (the others are skipped with their reason in one line,
``bench_configs.py``), the model is loaded as the node loads it (``build_pipelines``, the
precision check on) into a fresh engine cache folder, so its first configure is cold, and:

* agreement - what the precision check measured when it was loaded
  (``vision_nodes/precision_check.py``): the reduced precision's answers against the same
  model at fp32 on the same backend, on the default validation set (``precision_check``'s
  own choice: for int8, the calibration folder when it holds 10+ images); fp32 is the
  reference, 1.0 by definition;
* pipeline ms - pre-processing + network + post-processing in this process (no ROS), per
  frame over the default validation set (10 real photographs of 512 x 512 to 1080 x 810),
  the mean per frame of a pass over the set; the median over ``--rounds`` rounds, in which
  every configuration of the model makes one pass, in a shuffled order each round (round 0
  warms up, unrecorded);
* speed-up - the same backend's fp32 time over this one's, per round, its median over rounds
  and a 95 % bootstrap interval (``bench_detect.paired_ratio``).

int8 is calibrated on ``--calibration-dir``, by default a temporary folder holding copies of
the default validation set's images (so the int8 agreement is then measured on its own
calibration images: an optimistic number, said in the output). ``--max-drop`` replaces the
manifest's accuracy budget (``accuracy: {max_drop: ...}``), which makes OpenVINO int8 quantize
within it.

The precision check's price: for the first model on OpenVINO at its reduced precision
(``--cost-precision``; default fp16 on a CPU with bf16 or fp16, else int8), a configure is
timed in fresh processes (imports of OpenVINO and Ultralytics timed apart, before the clock
starts): on a cold cache with the check and without it, then again on each of those caches
(cached), ``--cost-repeats`` times, in alternating order; the check's share is the median over
repeats of the paired ratio, of wall time, of the configure's CPU time (all threads: less hurt
by other load on a shared machine), of the node's configure (wall time plus those imports,
which the node's configure transition pays: it imports no runtime before) and of the whole
process's wall time (Python's start and every import included).

``--labels FOLDER`` (images with same-named YOLO ``.txt`` labels, ``class cx cy w h``
normalised to the image; or a COCO ``instances.json`` in the folder) also gives each
configuration's box mAP50-95 against those labels (pycocotools through
``vision_nodes.accuracy``, the labels as the reference). ``--json PATH`` writes everything
(``bench_report.py``'s shape plus ``check_cost``), ``--plot PATH`` a PNG of agreement against
speed-up. Not a test: nothing is asserted.

    .venv/bin/python benchmarks/bench_accuracy.py --json acc.json --plot acc.png
    .venv/bin/python benchmarks/bench_accuracy.py --configs openvino:fp32 openvino:fp16 \
        --rounds 3 --cost-repeats 0 --labels my_labelled_frames/
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from bench_configs import cannot_run, runnable
from bench_detect import Config, bench_environment, paired_ratio, parse_config
from bench_report import machine_facts, write_json

DEFAULT_CONFIGS = ['openvino:fp32', 'openvino:fp16', 'openvino:int8', 'onnx:fp32']
#: CPU flags that decide which reduced arithmetic runs (printed and in the JSON).
CPU_FLAGS = ('avx2', 'avx512f', 'avx512_vnni', 'avx512_bf16', 'avx512_fp16', 'amx_tile',
             'amx_bf16', 'amx_int8')
LABEL_SUFFIXES = ('.jpg', '.jpeg', '.png')
COCO_FILE = 'instances.json'


@dataclass
class Loaded:
    """One configuration loaded: the model, what its check found, and its timings."""

    name: str
    config: Config
    model: Any
    configure_s: float
    log: list[str]
    rounds: list[list[float]] = field(default_factory=list)


# -- labels -------------------------------------------------------------------------------
def _detections(boxes: list[list[float]], classes: list[int]) -> Any:
    """Return labelled boxes (xyxy, source pixels) as Detections, each scoring 1."""
    from vision_nodes.tasks.detect import Detections

    return Detections(np.asarray(boxes, np.float32).reshape(-1, 4),
                      np.ones(len(classes), np.float32), np.asarray(classes, np.int64))


def _yolo_labels(image: Path, width: int, height: int) -> Any:
    """Return the reference Detections of one image's YOLO ``.txt`` (none: no objects)."""
    text = image.with_suffix('.txt')
    boxes, classes = [], []
    lines = text.read_text().splitlines() if text.is_file() else []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            values = [float(v) for v in line.split()[:5]]
        except ValueError:
            values = []
        if len(values) < 5 or not all(0.0 <= v <= 1.0 for v in values[1:]) or \
                not 0 <= values[0] < 2 ** 31 or values[0] != int(values[0]):
            raise SystemExit(f'--labels {text}: line {number} {line.strip()[:80]!r} is not '
                             "'class cx cy w h' (a class id >= 0, then four values in 0..1)")
        cls, cx, cy, w, h = values
        classes.append(int(cls))
        boxes.append([(cx - w / 2) * width, (cy - h / 2) * height,
                      (cx + w / 2) * width, (cy + h / 2) * height])
    return _detections(boxes, classes)


def _read(image: Path) -> np.ndarray:
    """Return the image as BGR; one line naming the file when OpenCV cannot read it."""
    bgr = cv2.imread(str(image))
    if bgr is None:
        raise SystemExit(f'--labels {image}: not an image OpenCV can read')
    return bgr


def _coco_class(category: dict[str, Any], names: list[str]) -> int:
    """Return the model's class id of a COCO category: its name's index, else its id."""
    name = str(category.get('name', ''))
    return names.index(name) if name in names else int(category['id'])


def _coco_labels(folder: Path, names: list[str]) -> tuple[list[Path], list[Any]]:
    """Return the images of the folder's COCO file and their labels (crowds left out)."""
    data = json.loads((folder / COCO_FILE).read_text())
    classes = {c['id']: _coco_class(c, names) for c in data.get('categories', [])}
    per_image: dict[int, tuple[list, list]] = {im['id']: ([], []) for im in data['images']}
    for note in data.get('annotations', []):
        if note.get('iscrowd'):
            continue
        x, y, w, h = (float(v) for v in note['bbox'])
        boxes, found = per_image[note['image_id']]
        boxes.append([x, y, x + w, y + h])
        found.append(classes.get(note['category_id'], int(note['category_id'])))
    paths = [folder / im['file_name'] for im in data['images']]
    return paths, [_detections(*per_image[im['id']]) for im in data['images']]


def load_labels(folder: Path, names: list[str]) -> tuple[list[Path], list[Any]]:
    """Return a labelled folder's images and their reference Detections (scores 1).

    ``instances.json`` (COCO; a category whose name is one of the model's ``names`` takes
    that class id, another keeps its own id) when the folder has one, else each image's
    same-named YOLO ``.txt`` (an image without one has no objects).
    """
    if (folder / COCO_FILE).is_file():
        try:
            return _coco_labels(folder, names)
        except (KeyError, TypeError, ValueError) as exc:  # JSONDecodeError is a ValueError
            raise SystemExit(f'--labels {folder / COCO_FILE}: not a COCO detection file '
                             f'(images with id and file_name; annotations with image_id, '
                             f'category_id, bbox): {type(exc).__name__} {exc}') from None
    images = sorted(p for p in folder.iterdir() if p.suffix.lower() in LABEL_SUFFIXES)
    if not any(p.with_suffix('.txt').is_file() for p in images):
        raise SystemExit(f'--labels {folder}: no image with a same-named .txt and no '
                         f'{COCO_FILE}: give YOLO labels or a COCO file')
    references = []
    for image in images:
        height, width = _read(image).shape[:2]
        references.append(_yolo_labels(image, width, height))
    return images, references


# -- loading and timing -------------------------------------------------------------------
def _load(manifest: Any, config: Config, calibration: str, cache: str, log: list[str]
          ) -> tuple[Any, float]:
    """Load ``manifest`` as configured into the empty ``cache``; return (model, seconds)."""
    from vision_nodes.pipeline import build_pipelines

    started = time.perf_counter()
    model = build_pipelines(
        [manifest if config.rect else replace(manifest, rect=False)], config.backend,
        cache_dir=cache, precision=config.precision, log=log.append,
        calibration_dir=calibration if config.precision == 'int8' else '',
        check_precision=True).models[0]
    return model, time.perf_counter() - started


def _params(model: Any) -> Any:
    """Return the post-processing parameters the node starts with (the manifest's)."""
    return model.default_params()


def _pass(model: Any, images: list[np.ndarray]) -> float:
    """Run every image through ``model``; return the mean seconds per frame."""
    params = _params(model)
    started = time.perf_counter()
    for image in images:
        model.process(image, 'bgr8', params)
    return (time.perf_counter() - started) / len(images)


def time_rounds(loaded: list[Loaded], images: list[np.ndarray], rounds: int, seed: int) -> None:
    """Fill each configuration's ``rounds``: one pass over ``images`` per round each."""
    order = list(loaded)
    for item in loaded:
        item.rounds = [[] for _ in range(rounds)]
    for index in range(rounds + 1):  # round 0 warms every configuration up, unrecorded
        random.Random(seed + index).shuffle(order)
        for item in order:
            seconds = _pass(item.model, images)
            if index:
                item.rounds[index - 1].append(seconds)


def _agreement(item: Loaded, images: int) -> dict[str, Any]:
    """Return the configuration's agreement with fp32 for the JSON (fp32: 1.0)."""
    check = item.model.precision_check
    compute = item.model.runner.compute_type()
    if compute == 'fp32':
        return {'value': 1.0, 'measure': 'the reference', 'images': images,
                'details': {}, 'note': 'fp32'}
    if check is None or check.agreement is None:
        return {'value': None, 'measure': '', 'images': 0, 'details': {},
                'note': check.note if check is not None else 'not checked'}
    found = check.agreement
    return {'value': found.value, 'measure': found.measure, 'images': found.images,
            'details': found.details, 'note': check.note + (', cached' if check.cached else '')}


def _label_map(item: Loaded, paths: list[Path], references: list[Any]) -> dict[str, float]:
    """Box mAP50-95 (and recall at IoU 0.5) of the configuration against the labels."""
    from vision_nodes.accuracy import detection_agreement

    params = _params(item.model)
    results = [item.model.process(_read(p), 'bgr8', params) for p in paths]
    found = detection_agreement(references, results)
    return {'map50_95': found.value, 'recall50': found.details['recall50'],
            'labels': found.details['reference_detections'], 'images': found.images}


# -- the precision check's price ----------------------------------------------------------
def configure_once(model: str, backend: str, precision: str, cache: str, check: bool) -> None:
    """Time one configure in this (fresh) process and print it as one JSON line."""
    from vision_nodes.loaders.ultralytics import import_ultralytics
    from vision_nodes.tasks import resolve_manifest
    from vision_nodes.pipeline import build_pipelines

    importing = time.perf_counter()
    import openvino  # noqa: F401 - timed apart: the node's configure imports both

    import_ultralytics()
    imports = time.perf_counter() - importing
    manifest = resolve_manifest(model)
    started, cpu = time.perf_counter(), time.process_time()
    lines: list[tuple[float, str]] = []
    pipe = build_pipelines([manifest], backend, cache_dir=cache, precision=precision,
                           check_precision=check,
                           log=lambda line: lines.append((time.perf_counter() - started, line)))
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    print('CONFIGURE ' + json.dumps({
        'seconds': seconds, 'cpu_seconds': cpu, 'import_seconds': imports,
        'compute_type': pipe.models[0].runner.compute_type(),
        'log': [f'{t:6.2f} s {line}' for t, line in lines]}), flush=True)
    pipe.close()


def _configure_in_process(model: str, precision: str, cache: Path, check: bool) -> dict:
    """Run :func:`configure_once` in a fresh process; return its numbers and wall time."""
    args = [sys.executable, str(Path(__file__).resolve()), '--configure-once', str(cache),
            '--models', model, '--cost-precision', precision,
            '--cost-check', 'on' if check else 'off']
    started = time.perf_counter()
    proc = subprocess.run(args, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - started
    found = [line for line in proc.stdout.splitlines() if line.startswith('CONFIGURE ')]
    if proc.returncode or not found:
        raise RuntimeError(f'configure subprocess failed ({proc.returncode}): '
                           f'{proc.stderr.strip()[-600:]}')
    return {**json.loads(found[-1].split(' ', 1)[1]), 'process_seconds': wall}


def check_cost(model: str, precision: str, repeats: int) -> dict[str, Any]:
    """Configure times with and without the check, cold and cached; their paired ratios."""
    times: dict[str, list[list[float]]] = {}
    logs: dict[str, list[str]] = {}
    for repeat in range(repeats):
        work = Path(tempfile.mkdtemp(prefix='bench_accuracy_cost_'))
        try:
            flags = [True, False] if repeat % 2 == 0 else [False, True]
            for phase in ('cold', 'cached'):
                for check in flags:
                    kind = f"{phase}, {'check' if check else 'no check'}"
                    got = _configure_in_process(model, precision, work / str(check), check)
                    times.setdefault(kind, []).append([got['seconds']])
                    times.setdefault(f'{kind}, whole process', []).append(
                        [got['process_seconds']])
                    times.setdefault(f'{kind}, cpu', []).append([got['cpu_seconds']])
                    times.setdefault(f'{kind}, node', []).append(
                        [got['seconds'] + got['import_seconds']])
                    logs.setdefault(kind, got['log'])
                    print(f"  repeat {repeat + 1}: {kind:<17} {got['seconds']:6.2f} s "
                          f"(cpu {got['cpu_seconds']:5.2f} s; the process: "
                          f"{got['process_seconds']:5.2f} s; "
                          f"{got['compute_type']})", flush=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return _cost_summary(model, precision, times, logs)


def _cost_summary(model: str, precision: str, times: dict[str, list[list[float]]],
                  logs: dict[str, list[str]]) -> dict[str, Any]:
    """Return the medians and the check's added share of each kind of configure."""
    out: dict[str, Any] = {'model': model, 'backend': 'openvino', 'precision': precision,
                           'repeats': len(times['cold, check']),
                           'how': 'each configure in a fresh process; OpenVINO and Ultralytics '
                                  "imported before the clock starts ('node': plus those "
                                  "imports, as the node's configure pays them; 'whole "
                                  "process': from its start to its end; 'cpu': the "
                                  "configure's CPU time, all threads, less hurt than wall "
                                  'time by other load on a shared machine)',
                           'seconds': {k: statistics.median(x[0] for x in v)
                                       for k, v in times.items()},
                           'log_cold_check': logs.get('cold, check', []),
                           'log_cold_no_check': logs.get('cold, no check', [])}
    for phase in ('cold', 'cached'):
        for suffix, key in (('', phase), (', whole process', f'{phase}_process'),
                            (', cpu', f'{phase}_cpu'), (', node', f'{phase}_node')):
            check, without = f'{phase}, check{suffix}', f'{phase}, no check{suffix}'
            if check in times:
                out[f'{key}_added_percent'] = _added(times[check], times[without])
    return out


def _added(check: list[list[float]], without: list[list[float]]) -> dict[str, float]:
    """Return the percentage ``check`` adds to ``without``, paired by repeat [95 %]."""
    ratio = paired_ratio(check, without)
    return {'median': 100 * (ratio.value - 1), 'low': 100 * (ratio.low - 1),
            'high': 100 * (ratio.high - 1)}


# -- the report ---------------------------------------------------------------------------
def _speedup(item: Loaded, loaded: list[Loaded]) -> dict[str, float] | None:
    """Return the same backend's fp32 time over this one's, by round (None: no fp32)."""
    backend = item.model.runner.config.backend
    base = next((o for o in loaded if o.model.runner.config.backend == backend
                 and o.config.precision == 'fp32' and o.config.rect == item.config.rect),
                None)
    if base is None:
        return None
    if base is item:
        return {'median': 1.0, 'low': 1.0, 'high': 1.0, 'over': base.name}
    ratio = paired_ratio(base.rounds, item.rounds)
    return {'median': ratio.value, 'low': ratio.low, 'high': ratio.high, 'over': base.name}


def _row(item: Loaded, loaded: list[Loaded], images: int) -> dict[str, Any]:
    """Return one configuration's line of the JSON's ``configs``."""
    runner = item.model.runner
    return {'model': item.model.manifest.name, 'backend': runner.config.backend,
            'precision': item.config.precision, 'compute_type': runner.compute_type(),
            'agreement': _agreement(item, images),
            'pipeline_ms': 1000 * statistics.median(r[0] for r in item.rounds),
            'speedup': _speedup(item, loaded), 'configure_s': item.configure_s,
            'precision_log': [line for line in item.log
                              if line.startswith(('precision', 'warning'))]}


def table_lines(configs: dict[str, dict[str, Any]]) -> list[str]:
    """Return the printed table, one line per configuration."""
    width = max([len(n) for n in configs] + [13])
    lines = [f"{'configuration':<{width}} {'runs':>5} {'agreement':>9} {'measure':<14} "
             f"{'ms/frame':>8} {'speed-up [95 %]':>22} {'labels mAP':>10} {'configure':>9}"]
    for name, row in configs.items():
        value = row['agreement']['value']
        speed = row['speedup']
        labels = row.get('labels')
        lines.append(
            f"{name:<{width}} {row['compute_type']:>5} "
            f"{'-' if value is None else f'{value:9.3f}':>9} "
            f"{row['agreement']['measure'][:14]:<14} {row['pipeline_ms']:8.1f} "
            + (f"{speed['median']:6.3f} [{speed['low']:5.3f}, {speed['high']:5.3f}]"
               if speed else f"{'-':>22}")
            + (f" {labels['map50_95']:10.3f}" if labels else f"{'-':>11}")
            + f" {row['configure_s']:8.1f}s")
    return lines


def _panel(axis: Any, configs: dict[str, dict[str, Any]], label: str, value: Any) -> None:
    """Draw one point per configuration: ``value(row)`` against its speed-up [95 %]."""
    for offset, (name, row) in enumerate(configs.items()):
        y, speed = value(row), row['speedup']
        if y is None or speed is None:
            continue
        x = speed['median']
        axis.errorbar([x], [y], xerr=[[x - speed['low']], [speed['high'] - x]], fmt='o',
                      capsize=3)
        axis.annotate(f"{name} ({row['compute_type']}, {row['pipeline_ms']:.0f} ms)", (x, y),
                      fontsize=8, xytext=(6, 6 - 12 * (offset % 2)), textcoords='offset points')
    axis.margins(x=0.35, y=0.1)  # room for the labels right of the fastest point
    axis.set_xlabel("speed-up over the same backend's fp32 (pipeline, median [95 %])")
    axis.set_ylabel(label)
    axis.grid(alpha=0.3)


def write_plot(path: Path, configs: dict[str, dict[str, Any]], budget: float, title: str
               ) -> None:
    """Write a PNG: agreement with fp32 (and mAP against labels) against the speed-up."""
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    panels = [('agreement with fp32', lambda r: r['agreement']['value'])]
    if any(r.get('labels') for r in configs.values()):
        panels.append(('box mAP50-95 against the labels',
                       lambda r: (r.get('labels') or {}).get('map50_95')))
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 5), squeeze=False)
    for axis, (label, value) in zip(axes[0], panels):
        _panel(axis, configs, label, value)
    axes[0][0].axhline(1 - budget, color='grey', linestyle='--',
                       label=f'the manifest budget (max_drop {budget:g})')
    axes[0][0].legend(fontsize=8, loc='lower left')
    fig.suptitle('\n'.join(textwrap.fill(line, 55 * len(panels)) for line in title.split('\n')),
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def cpu_flags() -> list[str]:
    """Return the :data:`CPU_FLAGS` this CPU has (from ``/proc/cpuinfo``)."""
    try:
        text = Path('/proc/cpuinfo').read_text()
    except OSError:
        return []
    flags = next((line.split(':', 1)[1].split() for line in text.splitlines()
                  if line.startswith('flags')), [])
    return [f for f in CPU_FLAGS if f in flags]


# -- the run ------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    """Return the command line (``--configure-once``: the check's price, one process)."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--models', nargs='+', default=['yolov8n'])
    parser.add_argument('--configs', nargs='+', default=DEFAULT_CONFIGS,
                        help='BACKEND[:PRECISION][:square] (default: %(default)s)')
    parser.add_argument('--labels', type=Path, default=None,
                        help='a labelled folder (YOLO .txt or COCO instances.json)')
    parser.add_argument('--calibration-dir', type=Path, default=None,
                        help='int8 calibration images (default: copies of the validation set)')
    parser.add_argument('--max-drop', type=float, default=None,
                        help="replaces the manifests' accuracy.max_drop (int8 quantizes "
                             'within it)')
    parser.add_argument('--rounds', type=int, default=5)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--cost-repeats', type=int, default=3,
                        help="repeats of the check's price (0: not measured)")
    parser.add_argument('--cost-precision', default='',
                        help='default: fp16 where the CPU has bf16/fp16, else int8')
    parser.add_argument('--json', type=Path, default=None)
    parser.add_argument('--plot', type=Path, default=None)
    parser.add_argument('--configure-once', default='', help=argparse.SUPPRESS)
    parser.add_argument('--cost-check', choices=('on', 'off'), default='on',
                        help=argparse.SUPPRESS)
    return parser


def _calibration(given: Path | None, images: list[Path]) -> tuple[str, str]:
    """Return the int8 calibration folder and how the output names it."""
    if given is not None:
        return str(given.resolve()), str(given)
    folder = Path(tempfile.mkdtemp(prefix='bench_accuracy_calibration_'))
    atexit.register(shutil.rmtree, folder, True)
    for image in images:
        shutil.copy(image, folder / image.name)
    return str(folder), (f'a temporary copy of the {len(images)} default validation images '
                         '(int8 is then measured on its own calibration images)')


def _manifest(name: str, max_drop: float | None) -> Any:
    """Return the model's manifest, its accuracy budget replaced by ``--max-drop``."""
    from vision_nodes.manifest import AccuracyBudget
    from vision_nodes.tasks import resolve_manifest

    manifest = resolve_manifest(name)
    if max_drop is None:
        return manifest
    return replace(manifest, accuracy=AccuracyBudget(max_drop=max_drop, strict=False,
                                                     declared=True))


def _load_all(manifest: Any, configs: list[Config], calibration: str,
              skipped: dict[str, str]) -> list[Loaded]:
    """Load each configuration (cold cache); one that fails is skipped with its reason."""
    from vision_nodes.text import clip

    loaded = []
    for config in configs:
        name = f'{manifest.name} {config.spec}'
        log: list[str] = []
        cache = tempfile.mkdtemp(prefix='bench_accuracy_cache_')
        atexit.register(shutil.rmtree, cache, True)  # a fresh, cold cache per configuration
        try:
            model, seconds = _load(manifest, config, calibration, cache, log)
        except Exception as exc:  # noqa: BLE001 - one configuration failing ends no run
            skipped[name] = f'failed to load: {clip(exc, 400)}'
            print(f'skipped {name}: {skipped[name]}', flush=True)
            continue
        loaded.append(Loaded(name, config, model, seconds, log))
        print(f"loaded {name} in {seconds:.1f} s (cold cache): runs "
              f"{model.runner.compute_type()}" + ''.join(
                  f'\n  {line}' for line in log if line.startswith(('precision', 'warning'))),
              flush=True)
    return loaded


def _measure_model(name: str, args: argparse.Namespace, calibration: str,
                   images: list[np.ndarray], skipped: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Load, time and compare every runnable configuration of one model."""
    manifest = _manifest(name, args.max_drop)
    configs, not_here = runnable(
        [parse_config(s) for s in args.configs],
        lambda c: cannot_run(manifest, c.backend, c.precision, calibration_dir=calibration),
        name=lambda c: f'{manifest.name} {c.spec}')
    skipped.update(not_here)
    loaded = _load_all(manifest, configs, calibration, skipped)
    time_rounds(loaded, images, args.rounds, args.seed)
    labels = load_labels(args.labels, loaded[0].model.labels) if args.labels and loaded \
        else None
    rows = {}
    for item in loaded:
        rows[item.name] = _row(item, loaded, len(images))
        if labels is not None:
            rows[item.name]['labels'] = _label_map(item, *labels)
    for item in loaded:
        item.model.close()
    return rows


def _cost_precision(given: str) -> str:
    """Return the precision whose check is priced: the fast reduced type of this CPU."""
    from vision_nodes.platform.cpu import cpu_info

    return given or ('fp16' if cpu_info().bf16 else 'int8')


def _print_cost(cost: dict[str, Any]) -> None:
    """Print the check's price: the medians, then its share of each configure."""
    print(f"\nthe precision check ({cost['model']}, openvino {cost['precision']}, "
          f"{cost['repeats']} repeats, {cost['how']}):")
    for kind, seconds in cost['seconds'].items():
        print(f'  {kind:<32} {seconds:6.2f} s (median)')

    def share(key: str) -> str:
        added = cost.get(f'{key}_added_percent')
        if added is None:
            return 'n/a'
        return f"{added['median']:.0f} % [{added['low']:.0f}, {added['high']:.0f}]"
    print(f"check adds {share('cold')} to a first configure, {share('cached')} to a cached "
          f"one (targets: <= 25 % and ~0); in CPU time {share('cold_cpu')} and "
          f"{share('cached_cpu')}; to the node's configure (which imports OpenVINO and "
          f"Ultralytics) {share('cold_node')} and {share('cached_node')}; to the whole "
          f"process {share('cold_process')} and {share('cached_process')}")


def _run(args: argparse.Namespace) -> int:
    """Measure every model and configuration, then the check's price; report them."""
    from vision_nodes.artifacts.validation import validation_set

    chosen = validation_set()
    paths = list(chosen.images)
    images = [_read(p) for p in paths]
    calibration, said = _calibration(args.calibration_dir, paths)
    machine = {**machine_facts(), 'cpu_flags': cpu_flags(), 'load_average': os.getloadavg()}
    print(f"{machine['cpu']}; flags {' '.join(machine['cpu_flags'])}\n"
          f'validation: {chosen.source}, {len(paths)} images; int8 calibration: {said}; '
          f"{args.rounds} rounds; load average {machine['load_average'][0]:.1f}", flush=True)
    skipped: dict[str, str] = {}
    configs: dict[str, dict[str, Any]] = {}
    for name in args.models:
        configs.update(_measure_model(name, args, calibration, images, skipped))
    cost = None
    if args.cost_repeats > 0:
        precision = _cost_precision(args.cost_precision)
        print(f'\nthe precision check\'s price ({args.models[0]}, openvino {precision}):',
              flush=True)
        cost = check_cost(args.models[0], precision, args.cost_repeats)
    _report(args, machine, configs, skipped, cost, said)
    return 0 if configs else 1


def _report(args: argparse.Namespace, machine: dict[str, Any], configs: dict[str, Any],
            skipped: dict[str, str], cost: dict[str, Any] | None, calibration: str) -> None:
    """Print the table and the check's price; write the JSON and the plot if asked."""
    print()
    print('\n'.join(table_lines(configs)) if configs else 'nothing could run')
    if cost is not None:
        _print_cost(cost)
    ratios = {f"{name} speed-up over {row['speedup']['over']}": row['speedup']
              for name, row in configs.items() if row['speedup']}
    budget = _manifest(args.models[0], args.max_drop).accuracy.max_drop
    if args.json:
        write_json(args.json, machine, configs, None, ratios, skipped,
                   extra={'check_cost': cost, 'calibration': calibration,
                          'load_average_end': os.getloadavg(),
                          'rounds': args.rounds, 'max_drop': budget})
        print(f'wrote {args.json}')
    if args.plot:
        write_plot(args.plot, configs, budget,
                   f"{machine['cpu']}\n{' '.join(machine['cpu_flags'])}; {args.rounds} "
                   'rounds, the default validation set')
        print(f'wrote {args.plot}')


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (or, with ``--configure-once``, time one configure)."""
    args = _parser().parse_args(argv)
    bench_environment('default')
    if args.configure_once:
        configure_once(args.models[0], 'openvino', _cost_precision(args.cost_precision),
                       args.configure_once, args.cost_check == 'on')
        return 0
    return _run(args)


if __name__ == '__main__':
    sys.exit(main())
