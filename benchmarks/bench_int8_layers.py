#!/usr/bin/env python3
"""Where OpenVINO's int8 model wins or loses against the float model, convolution by convolution.

Issue #21 asks for ``openvino:int8`` at <= 0.8x the bf16 node on CPUs with AMX or AVX512-BF16.
This compiles the runner's own two models (the float one: ``precision fp16``, bf16, on such
CPUs, ``fp32`` on others; ``precision int8``: the NNCF IR the artifact chain quantizes, with
its float tail) for one frame's rect shape, with the runners' compile settings plus
OpenVINO's per-layer counters (``PERF_COUNT``), and prints:

* the whole network, timed without the counters, in interleaved rounds (paired ratio with a
  95 % bootstrap interval, as in ``bench_detect.py``);
* each convolution's time in both models (median over the frames), its kernel, its input
  channels and the kernel OpenVINO picked (``exec_type``), and the same summed by kernel size
  and input-channel count (an AMX tile row holds 64 int8 values but 32 bf16 ones, so a
  convolution with few input channels may fill less of it in int8);
* the sum of the better of the two per convolution: what a per-layer choice of precision
  could at most save, before the conversions between the layers' types.

    .venv/bin/python benchmarks/bench_int8_layers.py --json benchmarks/results/int8_layers.json
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_detect import bus_and_calibration, paired_ratio  # noqa: E402

#: The two models compared: the float one (fp16 where the CPU has bf16, else fp32) and int8.
MODELS = ('float', 'int8')


def _conv_name(node_name: str) -> str:
    """Return the float model's convolution name that an executed layer's name starts with."""
    return node_name.split('/WithoutBiases')[0]


def _conv_shapes(model: Any) -> dict[str, tuple[int, int]]:
    """Convolution name -> (kernel size, input channels), from the float model."""
    shapes = {}
    for op in model.get_ordered_ops():
        if op.get_type_name() == 'Convolution':
            weights = op.input(1).get_partial_shape()
            shapes[_conv_name(op.get_friendly_name())] = (weights[2].get_length(),
                                                          weights[1].get_length())
    return shapes


def _layer_times(request: Any, tensor: Any, frames: int) -> dict[str, tuple[float, str]]:
    """Convolution name -> (median µs over ``frames``, OpenVINO's kernel) of a profiled request."""
    samples: dict[str, list[float]] = collections.defaultdict(list)
    kernels: dict[str, str] = {}
    for _ in range(frames):
        request.infer({0: tensor}, share_inputs=True)
        per_frame: dict[str, float] = collections.Counter()
        for info in request.profiling_info:
            if info.node_type == 'Convolution':
                name = _conv_name(info.node_name)
                per_frame[name] += info.real_time.total_seconds() * 1e6
                kernels[name] = info.exec_type
        for name, value in per_frame.items():
            samples[name].append(value)
    return {name: (statistics.median(values), kernels[name]) for name, values in samples.items()}


def main(argv: list[str] | None = None) -> int:
    """Profile both models and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--model', default='yolov8n')
    parser.add_argument('--rounds', type=int, default=12)
    parser.add_argument('--frames', type=int, default=5)
    parser.add_argument('--profile-frames', type=int, default=30)
    parser.add_argument('--calibration-dir', type=Path, default=None)
    parser.add_argument('--json', type=Path, default=None)
    args = parser.parse_args(argv)

    from bench_report import machine_facts

    from vision_nodes.tasks import resolve_manifest  # first: keeps the runtimes' telemetry off
    from vision_nodes.pipeline import build_pipeline
    from vision_nodes.platform import openvino as facts
    import openvino as ov

    bgr, calibration = bus_and_calibration('bench_int8_layers_', args.calibration_dir)
    manifest = resolve_manifest(args.model)
    float_precision = 'fp16' if facts.fast_reduced_type('CPU') else 'fp32'
    pipelines = {m: build_pipeline(manifest, 'openvino',
                                   precision=float_precision if m == 'float' else m,
                                   calibration_dir=str(calibration)) for m in MODELS}
    reference = pipelines['float']
    shape = reference.input_shape(bgr.shape[:2])
    tensor = reference.task.preprocess(bgr, 'bgr8', shape)[0]
    core = ov.Core()
    words = {m: pipelines[m].runner.describe()['inference_type'] for m in MODELS}
    print(f'OpenVINO {ov.get_version()}; {machine_facts()["cpu"]}; {args.model} at '
          f'{shape[1]}x{shape[0]}; float: precision {float_precision}, runs as '
          f'{words["float"]}; int8 runs as {words["int8"]}', flush=True)

    requests, profiled = {}, {}
    for name, pipeline in pipelines.items():
        runner = pipeline.runner
        model = (runner._u8_model() if runner.takes_u8 else runner._model).clone()
        model.reshape({model.inputs[0]: list(tensor.shape)})
        props = dict(runner._properties)
        requests[name] = core.compile_model(model, 'CPU', props).create_infer_request()
        profiled[name] = core.compile_model(
            model, 'CPU', {**props, 'PERF_COUNT': True}).create_infer_request()
        for request in (requests[name], profiled[name]):
            for _ in range(3):
                request.infer({0: tensor}, share_inputs=True)

    by_round = {m: [[] for _ in range(args.rounds)] for m in MODELS}
    order = list(MODELS)
    for round_index in range(args.rounds):
        random.Random(round_index).shuffle(order)
        for name in order:
            for _ in range(args.frames):
                start = time.perf_counter()
                requests[name].infer({0: tensor}, share_inputs=True)
                by_round[name][round_index].append(time.perf_counter() - start)
    whole = {m: statistics.median(x for r in by_round[m] for x in r) * 1000 for m in MODELS}
    ratio = paired_ratio(by_round['int8'], by_round['float'])
    target = ' (target <= 0.8 where the float model is bf16)' \
        if float_precision == 'fp16' else ''
    print(f'\nwhole network: float {whole["float"]:.2f} ms, int8 {whole["int8"]:.2f} ms; '
          f'int8 / float = {ratio}{target}')

    layers = {m: _layer_times(profiled[m], tensor, args.profile_frames) for m in MODELS}
    shapes = _conv_shapes(reference.runner._model)
    rows = []
    for name in sorted(set(layers['float']) & set(layers['int8']),
                       key=lambda n: -layers['float'][n][0]):
        kernel, channels = shapes.get(name, (0, 0))
        rows.append({'name': name, 'kernel': kernel, 'in_channels': channels,
                     'float_us': layers['float'][name][0], 'int8_us': layers['int8'][name][0],
                     'float_kernel': layers['float'][name][1],
                     'int8_kernel': layers['int8'][name][1]})
    print(f"\n{'convolution':<44} {'k':>2} {'in':>4} {'float µs':>8} {'int8 µs':>8} "
          f"{'int8/float':>9}  int8 kernel")
    for row in rows:
        print(f"{row['name'][-44:]:<44} {row['kernel']:>2} {row['in_channels']:>4} "
              f"{row['float_us']:8.0f} {row['int8_us']:8.0f} "
              f"{row['int8_us'] / row['float_us']:9.2f}  {row['int8_kernel']}")

    groups: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for row in rows:
        size = 'in < 64' if row['in_channels'] < 64 else \
            'in 64-127' if row['in_channels'] < 128 else 'in >= 128'
        group = groups[f"{row['kernel']}x{row['kernel']}, {size}"]
        group[0] += row['float_us']
        group[1] += row['int8_us']
        group[2] += 1
    print(f"\n{'convolutions':<24} {'count':>5} {'float µs':>8} {'int8 µs':>8} "
          f"{'int8/float':>9}")
    for label, (in_float, in_int8, count) in sorted(groups.items()):
        print(f'{label:<24} {count:>5} {in_float:8.0f} {in_int8:8.0f} '
              f'{in_int8 / in_float:9.2f}')
    total = {m: sum(r[f'{m}_us'] for r in rows) for m in MODELS}
    best = sum(min(r['float_us'], r['int8_us']) for r in rows)
    print(f"{'all':<24} {len(rows):>5} {total['float']:8.0f} {total['int8']:8.0f} "
          f"{total['int8'] / total['float']:9.2f}")
    print(f"the better of the two per convolution: {best:.0f} µs = "
          f"{best / total['float']:.2f} of float's convolutions")

    if args.json:
        args.json.write_text(json.dumps({
            'machine': machine_facts(), 'model': args.model, 'shape': list(shape),
            'inference_types': words, 'whole_ms': whole,
            'int8_over_float': {'median': ratio.value, 'low': ratio.low, 'high': ratio.high},
            'convolutions': rows,
            'groups': {k: {'count': v[2], 'float_us': v[0], 'int8_us': v[1]}
                       for k, v in groups.items()},
            'best_per_layer_over_float': best / total['float']}, indent=2) + '\n')
        print(f'wrote {args.json}')
    for pipeline in pipelines.values():
        pipeline.close()
    return 0


if __name__ == '__main__':
    sys.exit(main())
