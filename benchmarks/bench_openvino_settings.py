#!/usr/bin/env python3
"""OpenVINO compile settings for one camera stream, measured side by side: why the runner's.

The OpenVINO runner compiles with the ``LATENCY`` hint, one stream and one infer request (all
cores on each frame), unpinned CPU threads, a static input shape, and, for the float layers of
an int8 model on a CPU, bf16 where the CPU has it natively, else f32. This compares each
alternative with the runner's own settings (read from a loaded runner, so they cannot drift
apart) on the bare network (YOLOv8n, bus.jpg at its rect shape), in interleaved shuffled
rounds, as paired ratios with a 95 % bootstrap interval over rounds (see ``bench_detect.py``);
below 1 means the alternative is faster. It also times compiling a shape with and without
OpenVINO's model cache (``CACHE_DIR``).

    .venv/bin/python benchmarks/bench_openvino_settings.py --rounds 20
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_detect import bus_and_calibration, paired_ratio  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """Measure the settings and print medians and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--rounds', type=int, default=12)
    parser.add_argument('--frames', type=int, default=5)
    parser.add_argument('--model', default='yolov8n')
    parser.add_argument('--calibration-dir', type=Path, default=None)
    args = parser.parse_args(argv)

    from vision_nodes.tasks import resolve_manifest  # first: keeps the runtimes' telemetry off
    from vision_nodes.pipeline import build_pipeline
    from vision_nodes.platform.cpu import cpu_info
    import openvino as ov

    bgr, calibration = bus_and_calibration('bench_ov_', args.calibration_dir)
    manifest = resolve_manifest(args.model)
    fp32 = build_pipeline(manifest, 'openvino', precision='fp32')
    int8 = build_pipeline(manifest, 'openvino', precision='int8',
                          calibration_dir=str(calibration))
    shape = fp32.input_shape(bgr.shape[:2])
    tensor = fp32.task.preprocess(bgr, 'bgr8', shape)[0]
    core = ov.Core()
    info = cpu_info()
    print(f'OpenVINO {ov.get_version()}, {info.model}, {info.logical_cores} cores '
          f'(bf16 {info.bf16}, AMX {info.amx}); YOLOv8n at {shape[1]}x{shape[0]}; '
          f'{args.rounds} rounds x {args.frames} frames', flush=True)

    def static(model):
        model = model.clone()
        model.reshape({model.inputs[0]: list(tensor.shape)})  # NCHW float or NHWC u8
        return model

    # The runner's own settings at each precision, and one change at a time against them.
    f32 = dict(fp32.runner._properties)
    bf16 = {**f32, 'INFERENCE_PRECISION_HINT': 'bf16'}
    int8_props = dict(int8.runner._properties)
    # What the runners compile: the u8-input twin (pre-processing in the model) where they take
    # u8 frames, which is what ``tensor`` is then.
    float_model, int8_model = (p.runner._u8_model() if p.runner.takes_u8 else p.runner._model
                               for p in (fp32, int8))
    # The int8 runner's float layers run bf16 on CPUs with native bf16, else f32
    # (platform/cpu.int8_float_type); the alternative is the other type.
    int8_float = str(int8_props.get('INFERENCE_PRECISION_HINT', 'f32')).lower()
    int8_float = 'bf16' if 'bf' in int8_float else 'f32'
    other_float = 'f32' if int8_float == 'bf16' else 'bf16'
    chosen, chosen_bf16, chosen_int8 = ('runner (f32)', 'runner, bf16 (precision fp16)',
                                        f'runner, int8 ({int8_float} elsewhere)')
    # name -> (model, compile properties, the variant it is compared with)
    variants = {
        chosen: (static(float_model), f32, chosen),
        'THROUGHPUT hint, streams per core': (
            static(float_model), {**{k: v for k, v in f32.items() if k != 'NUM_STREAMS'},
                                  'PERFORMANCE_HINT': 'THROUGHPUT'}, chosen),
        'one thread': (static(float_model), {**f32, 'INFERENCE_NUM_THREADS': 1}, chosen),
        'CPU pinning on': (static(float_model), {**f32, 'ENABLE_CPU_PINNING': True}, chosen),
        'dynamic-shape compile': (float_model, f32, chosen),
    }
    native_bf16 = 'BF16' in core.get_property('CPU', 'OPTIMIZATION_CAPABILITIES')
    if native_bf16:
        variants[chosen_bf16] = (static(float_model), bf16, chosen_bf16)
        variants['bf16, CPU pinning on'] = (
            static(float_model), {**bf16, 'ENABLE_CPU_PINNING': True}, chosen_bf16)
        variants['bf16 / f32'] = (static(float_model), bf16, chosen)
    variants[chosen_int8] = (static(int8_model), int8_props, chosen_int8)
    if native_bf16:
        variants[f'int8, {other_float} elsewhere'] = (
            static(int8_model), {**int8_props, 'INFERENCE_PRECISION_HINT': other_float},
            chosen_int8)
        variants['int8 / bf16'] = (static(int8_model), int8_props, chosen_bf16)
    variants['int8 / f32'] = (static(int8_model), int8_props, chosen)
    requests = {}
    for name, (model, props, _) in variants.items():
        compiled = core.compile_model(model, 'CPU', props)
        requests[name] = compiled.create_infer_request()
        streams = compiled.get_property('NUM_STREAMS')
        threads = compiled.get_property('INFERENCE_NUM_THREADS')
        print(f'  {name}: {streams} stream(s), {threads} thread(s), pinned '
              f"{compiled.get_property('ENABLE_CPU_PINNING')}, "
              f"{compiled.get_property('INFERENCE_PRECISION_HINT')}", flush=True)

    by_round = {name: [[] for _ in range(args.rounds)] for name in requests}
    order = list(requests)
    shuffle = random.Random(0).shuffle
    for round_index in range(args.rounds + 1):
        shuffle(order)
        for name in order:
            request = requests[name]
            for frame in range(1 + args.frames):
                start = time.perf_counter()
                request.infer({0: tensor}, share_inputs=True)
                if round_index and frame:
                    by_round[name][round_index - 1].append(time.perf_counter() - start)

    print(f"\n{'setting':<40} median ms   ratio [95 % interval] to")
    for name, rounds in by_round.items():
        median = statistics.median(x for r in rounds for x in r) * 1000
        reference = variants[name][2]
        ratio = paired_ratio(rounds, by_round[reference])
        print(f'{name:<40} {median:8.1f}   {ratio}  {reference}')

    print('\ncompiling one new shape (median of 5):')
    with tempfile.TemporaryDirectory() as cache_dir:
        for label, props in (('no model cache', f32),
                             ('CACHE_DIR, first (writes the blob)', {**f32,
                                                                     'CACHE_DIR': cache_dir}),
                             ('CACHE_DIR, later (reads the blob)', {**f32,
                                                                    'CACHE_DIR': cache_dir})):
            times = []
            for _ in range(5 if 'first' not in label else 1):
                model = static(float_model)  # a fresh model: OpenVINO keys the blob on it
                start = time.perf_counter()
                core.compile_model(model, 'CPU', props)
                times.append(time.perf_counter() - start)
            print(f'  {label:<40} {statistics.median(times) * 1000:7.0f} ms')
    fp32.close()
    int8.close()
    return 0


if __name__ == '__main__':
    sys.exit(main())
