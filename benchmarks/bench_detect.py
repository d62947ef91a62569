#!/usr/bin/env python3
"""Detection latency, measured side by side in one run, printed as a table and as ratios.

For each configuration (``--backends``: ``BACKEND[:PRECISION][:square]``; default: ONNX
Runtime, PyTorch, OpenVINO at fp32, fp16 (bf16 on CPUs that have it), int8 and fp16 without
rect inference, and ``auto``, which picks backend and precision as the node's default would):

* bare runner   - ``runner.infer`` on an already-preprocessed tensor (the network alone);
* pipeline      - preprocess + infer + decode/NMS in this process (no ROS);
* node path     - a ``sensor_msgs/Image`` published to a ``vision_node`` running in its own
                  process, until its ``Detection2DArray`` for that frame comes back (DDS both
                  ways, conversion, pre/post-processing, message building). The clock starts
                  before ``publish()`` (so the sender's conversion and serialisation count)
                  and stops when DDS delivers the answer to this process's reader (its
                  ``received_timestamp``), before this harness's own Python executor wakes up
                  to run the callback; that wake-up (~1 ms here) is printed separately;

plus ``ultralytics.YOLO(<the same exported .onnx>).predict`` on the same image, that
``predict`` in a minimal ROS node, and Ultralytics' default ``YOLO('yolov8n.pt').predict``
(PyTorch, with the thread count Ultralytics itself sets), the usual way to run the model.

The node times its own stages (receive, conversion, pre-processing, inference,
post-processing, message building, publish: ``vision_nodes/stage_times.py``) and publishes
their medians as diagnostics values; after the rounds the benchmark reads them from
``/diagnostics`` and prints them per configuration, with what no node timer sees (the node
path less their sum). ``--json PATH`` writes every median, the stages, the machine and the
ratios (shape in ``benchmarks/bench_report.py``), ``--plot PATH`` a PNG of the same.

Rect inference is on unless ``:square`` is given (the network input follows the image's aspect
ratio: 640 x 480 for bus.jpg). int8 quantizes once into the engine cache, calibrated on
``--calibration-dir`` (default: 8 flips and crops of the bundled images, enough to run, not
for accuracy). Each node path's last answer is compared with Ultralytics' ``.pt`` predict:
the same objects (score >= 0.5, same class, IoU >= 0.9) or not.

Configurations are measured in interleaved rounds, in a shuffled order each round (B A C,
C B A, ...), so that drift in machine load hits them alike. The table gives the medians of all
frames. A ratio is computed per round (median over median, the two measured seconds apart)
and reported as the median over rounds with a 95 % bootstrap interval over rounds; a target
counts as met or missed only when the whole interval is on one side of it, otherwise the run
could not tell at that machine's noise. Not a test: nothing is asserted, the numbers
are for reading. A configuration this machine cannot run (``openvino:fp16`` on a CPU without
native bf16 or fp16, a backend without its runtime or device) is skipped with its reason in
one line, also in the JSON (``"skipped"``), and the others are measured
(``bench_configs.py``).

    scripts/dev demo   # once, to build the environment; then:
    .venv/bin/python benchmarks/bench_detect.py --dds-profile large-images
    .venv/bin/python benchmarks/bench_detect.py --backends onnx openvino:int8 auto --rounds 20 \
        --json bench.json --plot bench.png
"""

from __future__ import annotations

import argparse
import atexit
from dataclasses import dataclass
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import yaml

#: What the default run compares.
DEFAULT_CONFIGS = ['onnx', 'cpu', 'openvino:fp32', 'openvino:fp16', 'openvino:int8',
                   'openvino:fp16:square', 'auto']
ULTRA_PT = "ultralytics YOLO('yolov8n.pt').predict"
ULTRA_ONNX = 'ultralytics predict (same .onnx)'
ULTRA_NODE = 'ultralytics in a ROS node (same .onnx)'
#: Configurations whose node path / bare runner (<= 1.10) and pipeline / bare runner
#: (<= 1.04) are targets.
OVERHEAD_TARGETS = ('auto', 'openvino:int8', 'onnx')


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000.0


@dataclass(frozen=True)
class Ratio:
    """A ratio of two configurations' latencies, paired by round."""

    value: float  # median over rounds of the per-round ratio
    low: float    # 95 % bootstrap interval of that median, resampling rounds
    high: float

    def __str__(self) -> str:
        return f'{self.value:5.3f} [{self.low:5.3f}, {self.high:5.3f}]'


def bench_environment(dds_profile: str) -> None:
    """Set up this process (and the node processes it starts) the way every benchmark does.

    ``dds_profile``: 'default', 'large-images' (config/fastdds_large_images.xml) or a profile
    XML path. DDS stays on this machine in a domain of its own, Ultralytics offline, and the
    allocator settings are vision_node's, so in-process configurations (bare runner,
    pipeline, decoders, Ultralytics predict) get the same benefit as the node.
    """
    if dds_profile != 'default':
        profile = Path(__file__).resolve().parent.parent / 'config' / \
            'fastdds_large_images.xml' if dds_profile == 'large-images' else Path(dds_profile)
        os.environ['FASTDDS_DEFAULT_PROFILES_FILE'] = str(profile)
    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    os.environ.setdefault('ROS_DOMAIN_ID', str(150 + os.getpid() % 50))
    os.environ.setdefault('YOLO_OFFLINE', '1')
    if not os.environ.get('YOLO_CONFIG_DIR'):  # a settings folder of its own, gone at exit
        folder = tempfile.mkdtemp(prefix='bench_yolo_')
        atexit.register(shutil.rmtree, folder, True)
        os.environ['YOLO_CONFIG_DIR'] = folder
    from vision_nodes.manifest import use_default_model_dir

    use_default_model_dir()

    from vision_nodes.platform.allocator import keep_freed_buffers

    keep_freed_buffers()


def paired_ratio(numerator: list[list[float]], denominator: list[list[float]],
                 resamples: int = 4000, seed: int = 0) -> Ratio:
    """Per-round ratio of medians, its median over rounds and a bootstrap interval."""
    per_round = np.array([statistics.median(a) / statistics.median(b)
                          for a, b in zip(numerator, denominator) if a and b])
    picks = np.random.default_rng(seed).integers(
        0, per_round.size, size=(resamples, per_round.size))
    low, high = np.percentile(np.median(per_round[picks], axis=1), [2.5, 97.5])
    return Ratio(float(np.median(per_round)), float(low), float(high))


def verdict(ratio: Ratio, limit: float, strict: bool) -> str:
    """Whether ``ratio`` is below ``limit`` (``strict``: < , else <=), given its interval."""
    below = (ratio.high < limit) if strict else (ratio.high <= limit)
    above = (ratio.low >= limit) if strict else (ratio.low > limit)
    target = f"{'<' if strict else '<='} {limit:g}"
    if below:
        return f'target {target}: met'
    if above:
        return f'target {target}: missed'
    return f'target {target}: undecided (the interval spans {limit:g})'


@dataclass(frozen=True)
class Config:
    """One configuration of the node: backend, precision, rect inference."""

    spec: str
    backend: str
    precision: str
    rect: bool


def parse_config(spec: str) -> Config:
    """``BACKEND[:PRECISION][:square]`` → Config (precision: fp32, or auto for ``auto``)."""
    parts = spec.split(':')
    rect = parts[-1] != 'square'
    parts = parts if rect else parts[:-1]
    if not 1 <= len(parts) <= 2:
        raise SystemExit(f'bad configuration {spec!r}: use BACKEND[:PRECISION][:square]')
    from vision_nodes.backends import BACKEND_CHOICES, PRECISIONS

    backend = parts[0]
    precision = parts[1] if len(parts) == 2 else ('auto' if backend == 'auto' else 'fp32')
    if backend not in BACKEND_CHOICES or precision not in PRECISIONS:
        raise SystemExit(f'bad configuration {spec!r}: BACKEND is one of '
                         f"{', '.join(BACKEND_CHOICES)}; PRECISION one of {', '.join(PRECISIONS)}")
    return Config(spec, backend, precision, rect)


def same_objects(a: tuple, b: tuple, min_score: float = 0.5, min_iou: float = 0.9) -> str:
    """'yes', or what differs: each confident detection of one has a match in the other.

    ``a`` and ``b`` are (boxes xyxy, scores, class ids); :func:`vision_nodes.boxes.unmatched`.
    """
    from types import SimpleNamespace

    from vision_nodes.boxes import unmatched

    first, second = (SimpleNamespace(boxes=x[0], scores=x[1], class_ids=x[2]) for x in (a, b))
    problems = (unmatched(first, second, min_score, min_iou, 'only in the first: ')
                + unmatched(second, first, min_score, min_iou, 'only in the second: '))
    return 'yes' if not problems else 'NO: ' + '; '.join(problems)


def _message_arrays(msg: Any) -> tuple:
    """Detection2DArray → (boxes xyxy, scores, class ids)."""
    rows = [(d.bbox.center.position.x - d.bbox.size_x / 2,
             d.bbox.center.position.y - d.bbox.size_y / 2,
             d.bbox.center.position.x + d.bbox.size_x / 2,
             d.bbox.center.position.y + d.bbox.size_y / 2,
             d.results[0].hypothesis.score, int(d.results[0].hypothesis.class_id))
            for d in msg.detections]
    table = np.array(rows, dtype=np.float64).reshape(-1, 6)
    return table[:, :4], table[:, 4], table[:, 5].astype(int)


def _bench_manifests(model: str, calibration_dir: Path, folder: Path) -> tuple[Path, Path]:
    """Write the model's manifest with absolute weights and calibration folder, and a square twin.

    The node processes load these files, exactly what the in-process pipelines load
    (same cache keys: the entries built here are hits for the nodes).
    """
    from vision_nodes.tasks import resolve_manifest

    manifest = resolve_manifest(model)
    data = yaml.safe_load(manifest.source.read_text())
    data['weights'] = str(manifest.weights_path())
    data['calibration_dir'] = str(calibration_dir)
    rect_path, square_path = folder / f'{manifest.name}.yaml', folder / f'{manifest.name}_sq.yaml'
    rect_path.write_text(yaml.safe_dump(data))
    square_path.write_text(yaml.safe_dump({**data, 'rect': False}))
    return rect_path, square_path


def _default_calibration(folder: Path, images: list[Path]) -> Path:
    """Eight flips and crops of the bundled images (enough to run int8, not to tune it)."""
    folder.mkdir(parents=True, exist_ok=True)
    for path in images:
        image = cv2.imread(str(path))
        height, width = image.shape[:2]
        for suffix, variant in {'': image, '_flip': image[:, ::-1],
                                '_top': image[:height * 3 // 4],
                                '_right': image[:, width // 4:]}.items():
            cv2.imwrite(str(folder / f'{path.stem}{suffix}.jpg'), variant)
    return folder


def bus_and_calibration(prefix: str, calibration_dir: Path | None) -> tuple[np.ndarray, Path]:
    """Return bus.jpg (bgr) and the int8 calibration folder (default: flips and crops).

    Points the manifests at the default model folder first, as the demo does; a default
    calibration folder lives in a temporary folder removed at exit.
    """
    from vision_nodes.manifest import use_default_model_dir
    from vision_nodes.tools.demo import bundled_images

    use_default_model_dir()
    images = bundled_images()
    bgr = cv2.imread(str(next(p for p in images if p.name == 'bus.jpg')))
    if calibration_dir is not None:
        return bgr, calibration_dir
    work = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, work, True)
    return bgr, _default_calibration(work / 'calibration', images)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--backends', nargs='+', default=DEFAULT_CONFIGS,
                        help='configurations, BACKEND[:PRECISION][:square], e.g. onnx '
                             'openvino:int8 openvino:fp16:square auto')
    parser.add_argument('--frames', type=int, default=5, help='frames per round and config')
    parser.add_argument('--rounds', type=int, default=12)
    parser.add_argument('--seed', type=int, default=0, help='seed of the per-round order')
    parser.add_argument('--image', type=Path, default=None, help='default: ultralytics bus.jpg')
    parser.add_argument('--model', default='yolov8n')
    parser.add_argument('--calibration-dir', type=Path, default=None,
                        help='int8 calibration images (default: flips and crops of the bundled '
                             'images)')
    parser.add_argument('--no-ultralytics', action='store_true')
    parser.add_argument('--json', type=Path, default=None,
                        help='write the results (machine, per-configuration medians and stage '
                             'breakdown, Ultralytics, ratios) to this JSON file')
    parser.add_argument('--plot', type=Path, default=None,
                        help='write a PNG: the node path by stage, node vs bare vs Ultralytics')
    parser.add_argument('--dds-profile', default='default',
                        help="'default' (Fast DDS built-in transports), 'large-images' "
                             '(config/fastdds_large_images.xml) or a profile XML path; used '
                             'by this process and the node processes alike')
    args = parser.parse_args(argv)
    configs_wanted = [parse_config(spec) for spec in dict.fromkeys(args.backends)]
    from bench_configs import cannot_run, runnable, with_ultralytics_opencv
    from bench_report import breakdown_lines, machine_facts, with_outside, write_json, write_plot

    bench_environment(args.dds_profile)

    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Image
    from vision_msgs.msg import Detection2DArray

    from vision_nodes.tools.client import NodeProcess, VisionNodeClient, wait_for
    from vision_nodes.tools.demo import bundled_images
    from vision_nodes.ros.inputs.conversion import numpy_to_image
    from vision_nodes.tasks import load_manifest
    from vision_nodes.pipeline import build_pipeline
    from vision_nodes.tasks.detect import DetectionParams

    image_path = args.image or next(p for p in bundled_images() if p.name == 'bus.jpg')
    bgr = cv2.imread(str(image_path))
    work = Path(tempfile.mkdtemp(prefix='bench_detect_'))
    atexit.register(shutil.rmtree, work, True)
    calibration = args.calibration_dir or _default_calibration(work / 'calibration',
                                                               bundled_images())
    rect_file, square_file = _bench_manifests(args.model, calibration, work)
    manifests = {True: load_manifest(rect_file), False: load_manifest(square_file)}
    manifest = manifests[True]
    configs_wanted, skipped = runnable(
        configs_wanted, lambda cfg: cannot_run(manifests[cfg.rect], cfg.backend, cfg.precision,
                                               calibration_dir=str(calibration)),
        name=lambda cfg: cfg.spec)
    if not configs_wanted:
        print('no configuration can run on this machine', flush=True)
        return 1
    params = DetectionParams(manifest.thresholds.confidence, manifest.thresholds.iou,
                             manifest.thresholds.max_detections)
    print(f'image {image_path.name} {bgr.shape[1]}x{bgr.shape[0]}, model {manifest.name} '
          f'{manifest.input_size[1]}x{manifest.input_size[0]}, {os.cpu_count()} CPUs; '
          f'{args.rounds} rounds x {args.frames} frames per configuration; '
          f'DDS profile: {args.dds_profile}; int8 calibration: {calibration} '
          f"({len([p for p in Path(calibration).iterdir() if p.is_file()])} files)", flush=True)

    # ---- in-process pipelines (also export / convert / quantize into the engine cache, so
    # the nodes find every artifact built)
    pipelines, tensors = {}, {}
    for cfg in configs_wanted:
        started = time.monotonic()
        pipeline = build_pipeline(manifests[cfg.rect], cfg.backend, precision=cfg.precision,
                                  calibration_dir=str(calibration))
        shape = pipeline.input_shape(bgr.shape[:2])
        pipeline.runner.prepare_shape(shape)
        tensors[cfg.spec] = pipeline.task.preprocess(bgr, 'bgr8', shape)[0]
        pipelines[cfg.spec] = pipeline
        runner = pipeline.runner
        print(f'  {cfg.spec}: {runner.config.backend} at {runner.config.precision}, input '
              f'{shape[1]}x{shape[0]}, loaded in {time.monotonic() - started:.1f} s', flush=True)
    # PyTorch's thread count is process-wide and Ultralytics changes it (see below): each
    # configuration runs with the count its own code would choose.
    torch_threads: dict[str, int] = {}
    default_threads = sys.modules['torch'].get_num_threads() if 'torch' in sys.modules else 0

    # ---- one node process per configuration, each on its own topics
    reliable = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
    nodes, clients, pubs, queues, names = {}, {}, {}, {}, {}
    for index, cfg in enumerate(configs_wanted):
        name = names[cfg.spec] = f'bench_{index}'
        nodes[cfg.spec] = NodeProcess(
            {'backend': cfg.backend, 'precision': cfg.precision,
             'model': str(rect_file if cfg.rect else square_file)},
            node_name=name, namespace=f'/{name}')
        clients[cfg.spec] = VisionNodeClient(f'/{name}/{name}', f'{name}_client')
    for cfg in configs_wanted:
        client, name = clients[cfg.spec], names[cfg.spec]
        client.wait_for_node(60)
        if not (client.change_state('configure', 600) and client.change_state('activate')):
            print(nodes[cfg.spec].output())
            return 1
        queues[cfg.spec] = client.subscribe(Detection2DArray, f'/{name}/detections', 10)
        pubs[cfg.spec] = client.publisher(Image, f'/{name}/image', reliable)
    msg = numpy_to_image(bgr, 'bgr8')
    # Harness latency after DDS delivered an answer: its reception → this process's callback.
    wakeups: list[float] = []
    last_answer: dict[str, Any] = {}

    def node_frame(key: str, seq: int) -> float:
        seconds, arrival, last_answer[key] = time_node_frame(
            pubs[key], queues[key], msg, f'{key}_{seq}', 30.0)
        wakeups.append((arrival.callback_ns - arrival.received_ns) / 1e9)
        return seconds

    ultra_pt = ultra = ultra_proc = None
    first_client = clients[configs_wanted[0].spec]
    if not args.no_ultralytics:
        import subprocess

        from vision_nodes.loaders.ultralytics import import_ultralytics

        import torch

        default_threads = default_threads or torch.get_num_threads()
        YOLO = import_ultralytics().YOLO
        # Ultralytics' default way: the .pt on PyTorch, its own device and thread choice.
        ultra_pt = YOLO(str(manifest.weights_path()))
        ultra_pt.predict(bgr, conf=params.confidence, iou=params.iou, verbose=False)
        # Ultralytics' CPU device setup calls torch.set_num_threads(cpu_count - 1).
        torch_threads[ULTRA_PT] = torch.get_num_threads()
        onnx_spec = next((c.spec for c in configs_wanted
                          if c.backend == 'onnx' and c.precision == 'fp32'), None)
        if onnx_spec is not None:
            onnx_path = str(pipelines[onnx_spec].runner.model_path)
            ultra = YOLO(onnx_path, task='detect')
            ultra.predict(bgr, imgsz=manifest.input_size[0], verbose=False, device='cpu')
            torch_threads[ULTRA_ONNX] = torch.get_num_threads()
            # The same .onnx behind Ultralytics in a plain ROS node, on the same DDS path.
            ultra_proc = subprocess.Popen(
                [sys.executable, str(Path(__file__).with_name('ultralytics_reference_node.py')),
                 onnx_path, '--ros-args', '-r', '__ns:=/bench_ultra'],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            queues['ultra'] = first_client.subscribe(Detection2DArray,
                                                     '/bench_ultra/detections', 10)
            pubs['ultra'] = first_client.publisher(Image, '/bench_ultra/image', reliable)

    configs: dict[str, object] = {}
    for cfg in configs_wanted:
        p, tensor = pipelines[cfg.spec], tensors[cfg.spec]
        configs[f'{cfg.spec}: bare runner'] = lambda p=p, t=tensor: p.runner.infer(t)
        configs[f'{cfg.spec}: pipeline'] = lambda p=p: p.process(bgr, 'bgr8', params)
        configs[f'{cfg.spec}: node path'] = cfg.spec
    if ultra_pt is not None:
        configs[ULTRA_PT] = with_ultralytics_opencv(lambda: ultra_pt.predict(
            bgr, conf=params.confidence, iou=params.iou, verbose=False))
    if ultra is not None:
        configs[ULTRA_ONNX] = with_ultralytics_opencv(lambda: ultra.predict(
            bgr, imgsz=manifest.input_size[0], conf=params.confidence, iou=params.iou,
            verbose=False, device='cpu'))
        configs[ULTRA_NODE] = 'ultra'

    for key, pub in pubs.items():
        if not wait_for(lambda pub=pub: pub.get_subscription_count() > 0, 60.0):
            raise RuntimeError(f'nothing subscribed to the {key} image topic')

    # The nodes' own stage medians (their diagnostics values), read after the rounds.
    diagnostics = first_client.subscribe(DiagnosticArray, '/diagnostics', 100)
    by_round: dict[str, list[list[float]]] = {k: [[] for _ in range(args.rounds)]
                                              for k in configs}
    seq = 0
    order = list(configs)
    shuffle = random.Random(args.seed).shuffle
    for round_index in range(args.rounds + 1):  # round 0 warms every path up, unrecorded
        # A fresh order each round, so no configuration always follows the same one (and
        # inherits its cache, thread and process state); the first frame of every block is
        # a warm-up: the numbers are steady-state per-frame latencies, as for a camera stream.
        shuffle(order)
        for label in order:
            fn = configs[label]
            if default_threads:
                sys.modules['torch'].set_num_threads(torch_threads.get(label, default_threads))
            for frame in range(1 + (args.frames if round_index else 2)):
                seq += 1
                if isinstance(fn, str):
                    elapsed = node_frame(fn, seq)
                else:
                    start = time.perf_counter()
                    fn()
                    elapsed = time.perf_counter() - start
                if round_index and frame:
                    by_round[label][round_index - 1].append(elapsed)

    measured_stages = node_stages(diagnostics, {c.spec: f'/{names[c.spec]}/{names[c.spec]}'
                                                for c in configs_wanted})
    chosen: dict[str, list[str]] = {}
    for cfg in configs_wanted:
        clients[cfg.spec].change_state('deactivate')
        clients[cfg.spec].close()
        nodes[cfg.spec].stop()
        chosen[cfg.spec] = [line.split(']: ', 1)[-1] for line in
                            nodes[cfg.spec].output().splitlines()
                            if "auto: chose" in line or 'precision auto:' in line
                            or 'openvino: device' in line]
    for p in pipelines.values():
        p.close()
    if ultra_proc is not None:
        ultra_proc.terminate()
        ultra_proc.wait()

    samples = {k: [x for frames in rounds for x in frames] for k, rounds in by_round.items()}
    med = {k: _median_ms(v) for k, v in samples.items()}
    width = max(len(k) for k in med)
    print(f"\n{'configuration':<{width}}  median ms   p90 ms")
    for label, values in samples.items():
        p90 = sorted(values)[int(0.9 * (len(values) - 1))] * 1000
        print(f'{label:<{width}}  {med[label]:9.1f}  {p90:7.1f}')
    print(f'\nnode paths end at DDS delivery to this process; its executor then took '
          f'{_median_ms(wakeups):.2f} ms (median) more to run the callback, not counted')
    print('\nwhat the nodes ran (their log):')
    for spec, lines in chosen.items():
        for line in lines:
            print(f'  {spec}: {line}')

    if ultra_pt is not None:
        ref = ultra_pt.predict(bgr, conf=params.confidence, iou=params.iou, verbose=False)[0]
        ref_arrays = (ref.boxes.xyxy.numpy(), ref.boxes.conf.numpy(),
                      ref.boxes.cls.numpy().astype(int))
        print(f'\nsame objects as {ULTRA_PT} (score >= 0.5, same class, IoU >= 0.9), '
              'last node answer:')
        for cfg in configs_wanted:
            answer = last_answer.get(cfg.spec)
            verdict_text = same_objects(_message_arrays(answer), ref_arrays) \
                if answer is not None else 'no answer kept'
            print(f'  {cfg.spec:<24} {verdict_text}')

    print(f'\nratios (paired by round: median of {args.rounds} rounds [95 % interval]):')

    def show(name: str, num: str, den: str, limit: float | None = None,
             strict: bool = False) -> None:
        if num not in by_round or den not in by_round:
            return
        ratio = paired_ratio(by_round[num], by_round[den])
        ratios[name] = {'median': ratio.value, 'low': ratio.low, 'high': ratio.high}
        aim = f'   {verdict(ratio, limit, strict)}' if limit is not None else ''
        print(f'  {name:<{name_width}} = {ratio}{aim}')

    ratios: dict[str, dict[str, float]] = {}
    name_width = max(len(c.spec) for c in configs_wanted) + 40
    if args.rounds < 10:
        print('  (fewer than 10 rounds: the intervals are rough)')
    onnx_node = 'onnx: node path'
    for cfg in configs_wanted:
        spec = cfg.spec
        # Targets of issue #21 for the default, the int8 and the ONNX Runtime paths.
        aimed = spec in OVERHEAD_TARGETS
        show(f'{spec}: node path / bare runner', f'{spec}: node path', f'{spec}: bare runner',
             1.10 if aimed else None)
        show(f'{spec}: pipeline / bare runner', f'{spec}: pipeline', f'{spec}: bare runner',
             1.04 if aimed else None)
    for cfg in configs_wanted:
        if cfg.spec != 'onnx':
            show(f'{cfg.spec} node path / onnx node path', f'{cfg.spec}: node path', onnx_node,
                 0.45 if cfg.spec == 'openvino:int8' else None)
    for cfg in configs_wanted:
        show(f'{cfg.spec} node path / ultralytics .pt predict', f'{cfg.spec}: node path',
             ULTRA_PT, {'auto': 1 / 4, 'openvino:int8': 1 / 5}.get(cfg.spec))
    show('openvino:int8 node path / auto node path', 'openvino:int8: node path',
         'auto: node path', 0.8 if _has_bf16() else None)
    show('onnx node path / ultralytics predict', onnx_node, ULTRA_ONNX, 1.0, strict=True)
    show('onnx node path / ultralytics node', onnx_node, ULTRA_NODE)

    report = {cfg.spec: {
        'bare_ms': med.get(f'{cfg.spec}: bare runner'),
        'pipeline_ms': med.get(f'{cfg.spec}: pipeline'),
        'node_ms': med.get(f'{cfg.spec}: node path'),
        'stages_ms': (with_outside(measured_stages[cfg.spec], med[f'{cfg.spec}: node path'])
                      if measured_stages.get(cfg.spec) else None),
        'backend': pipelines[cfg.spec].runner.config.backend,
        'precision': pipelines[cfg.spec].runner.config.precision}
        for cfg in configs_wanted}
    print("\nthe node path by stage (ms, medians; the node's own timers, its diagnostics "
          'values; outside: what no node timer sees, the sender\'s publish() and the answer '
          'back):')
    for line in breakdown_lines(report):
        print('  ' + line)
    if args.json:
        write_json(args.json, machine_facts(), report, med.get(ULTRA_PT), ratios, skipped)
        print(f'\nwrote {args.json}')
    if args.plot:
        write_plot(args.plot, report, med.get(ULTRA_PT),
                   f"{machine_facts()['cpu']}, {image_path.name}, DDS {args.dds_profile}")
        print(f'wrote {args.plot}')
    return 0


def time_node_frame(pub: Any, answers: Any, msg: Any, frame_id: str,
                    timeout: float) -> tuple[float, Any, Any]:
    """Publish ``msg`` as frame ``frame_id`` and wait for the node's answer to it.

    Return the seconds from publishing to the answer's DDS reception in this process (the
    node path: transport both ways, the executor, the node's work), the arrival's
    timestamps and the answer. ``answers`` is the harness queue of the node's output topic.
    """
    msg.header.frame_id = frame_id
    start = time.time_ns()  # DDS reception timestamps are system-clock nanoseconds
    pub.publish(msg)
    got = answers.get_stamped(timeout=timeout,
                              predicate=lambda m: m.header.frame_id == frame_id)
    if got is None:
        raise RuntimeError(f'no answer to frame {frame_id} within {timeout:g} s')
    return (got[0].received_ns - start) / 1e9, got[0], got[1]


def _has_bf16() -> bool:
    from vision_nodes.platform.cpu import cpu_info

    return cpu_info().bf16


def node_stages(diagnostics: Any, nodes: dict[str, str], seconds: float = 2.5
                ) -> dict[str, dict[str, float] | None]:
    """Each node's latest stage medians from ``/diagnostics`` (1 Hz), listening ``seconds``."""
    from bench_report import stages_from_status

    latest: dict[str, dict[str, str]] = {}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        msg = diagnostics.get(max(0.01, deadline - time.monotonic()))
        for status in (msg.status if msg is not None else ()):
            latest[status.name] = {kv.key: kv.value for kv in status.values}
    return {spec: stages_from_status(latest.get(name, {})) for spec, name in nodes.items()}


if __name__ == '__main__':
    sys.exit(main())
