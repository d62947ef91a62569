#!/usr/bin/env python3
"""Compressed camera images: JPEG decoders side by side, bytes on the wire, node paths.

Three parts, each measured in one run:

* decoders    - ``cv2.imdecode`` (OpenCV), ``simplejpeg.decode_jpeg`` (libjpeg-turbo, straight
                to RGB), the same with its fast DCT and upsampling (lower quality, shown for
                reference, not used), PyTurboJPEG when its system library ``libturbojpeg``
                loads, and ``vision_nodes.image_codecs.decode_compressed`` (the node's path: header
                check + end-of-image check + the default decoder), on the bundled bus.jpg and
                zidane.jpg and on 1920x1080 and 640x480 frames encoded at quality 80/90/95.
                Decoders take turns in a shuffled order each round; each ratio to OpenCV is
                paired by round (median over rounds, 95 % bootstrap interval);
* wire bytes  - bytes per frame raw (``sensor_msgs/Image`` data) against JPEG at quality
                80/90/95 and PNG, and OpenCV's encode time (the camera side's cost);
* node paths  - the same frame to a ``vision_node`` as a raw ``Image`` on ``image`` and, to
                a second node with ``image_transport: compressed``, as a JPEG
                ``CompressedImage`` on ``image/compressed``, until its ``Detection2DArray``
                comes back (clock from before ``publish()`` to DDS delivery, as in
                bench_detect.py). Skipped with a message when the node has no
                ``image_transport`` parameter or refuses ``compressed``.

The 1920x1080 and 640x480 frames are bundled images resized: smoother than a camera's, so
they compress better than real frames; pass ``--image`` with a camera frame to check.
Not a test: nothing is asserted.

    .venv/bin/python benchmarks/bench_compressed.py [--no-node] [--dds-profile large-images]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import cv2
import numpy as np

_HERE = Path(__file__).resolve().parent


def _bench_detect():
    """Import bench_detect.py (same folder) for its paired ratios."""
    spec = importlib.util.spec_from_file_location('bench_detect', _HERE / 'bench_detect.py')
    module = importlib.util.module_from_spec(spec)
    sys.modules['bench_detect'] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _jpeg(bgr: np.ndarray, quality: int) -> bytes:
    return cv2.imencode('.jpg', bgr, [cv2.IMWRITE_JPEG_QUALITY, quality])[1].tobytes()


def _frames(image: Path | None) -> dict[str, tuple[np.ndarray, bytes]]:
    """Frames to decode: name -> (BGR pixels, JPEG bytes)."""
    from vision_nodes.tools.demo import bundled_images

    paths = {p.name: p for p in bundled_images()}
    frames = {}
    for name in ('bus.jpg', 'zidane.jpg'):
        if name in paths:
            data = paths[name].read_bytes()
            frames[name] = (cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR), data)
    wide = cv2.resize(cv2.imread(str(paths['zidane.jpg'])), (1920, 1080),
                      interpolation=cv2.INTER_CUBIC)
    small = cv2.resize(cv2.imread(str(paths['bus.jpg'])), (640, 480),
                       interpolation=cv2.INTER_AREA)
    for quality in (80, 90, 95):
        frames[f'1920x1080 q{quality}'] = (wide, _jpeg(wide, quality))
    for quality in (80, 90):
        frames[f'640x480 q{quality}'] = (small, _jpeg(small, quality))
    if image is not None:
        data = image.read_bytes()
        bgr = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
        if bgr is None:
            raise SystemExit(f'{image}: not an image OpenCV can read')
        frames[image.name] = (bgr, data if data[:2] == b'\xff\xd8' else _jpeg(bgr, 90))
    return frames


def _decoders() -> tuple[dict[str, Callable[[bytes], object]], list[str]]:
    """Available decoders (name -> decode function) and notes on the missing ones."""
    from vision_nodes.image_codecs import decode_compressed, default_jpeg_decoder

    decoders: dict[str, Callable] = {
        'opencv imdecode': lambda d: cv2.imdecode(np.frombuffer(d, np.uint8), cv2.IMREAD_COLOR)}
    notes = []
    try:
        import simplejpeg
    except ImportError:
        notes.append('simplejpeg: not installed')
    else:
        decoders['simplejpeg'] = lambda d: simplejpeg.decode_jpeg(d, colorspace='RGB',
                                                                  strict=False)
        decoders['simplejpeg fastdct+fastupsample'] = lambda d: simplejpeg.decode_jpeg(
            d, colorspace='RGB', fastdct=True, fastupsample=True, strict=False)
    try:
        from turbojpeg import TJPF_RGB, TurboJPEG

        turbo = TurboJPEG()
    except Exception as exc:  # noqa: BLE001 - the reason is the measurement's result
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        notes.append(f'PyTurboJPEG: unavailable ({first})')
    else:
        decoders['PyTurboJPEG'] = lambda d: turbo.decode(d, pixel_format=TJPF_RGB)
    decoders[f'decode_compressed ({default_jpeg_decoder()})'] = \
        lambda d: decode_compressed(d, 'jpeg')
    return decoders, notes


def _time_rounds(configs: dict[str, Callable[[], object]], rounds: int, reps: int,
                 seed: int) -> dict[str, list[list[float]]]:
    """Per configuration and round, ``reps`` timings; a shuffled order every round."""
    by_round = {k: [[] for _ in range(rounds)] for k in configs}
    order = list(configs)
    shuffle = random.Random(seed).shuffle
    for round_index in range(rounds + 1):  # round 0 warms up, unrecorded
        shuffle(order)
        for label in order:
            fn = configs[label]
            for _ in range(reps if round_index else 2):
                start = time.perf_counter()
                fn()
                elapsed = time.perf_counter() - start
                if round_index:
                    by_round[label][round_index - 1].append(elapsed)
    return by_round


def decoder_part(frames, rounds: int, reps: int, seed: int, paired_ratio) -> None:
    """Print the decoder comparison."""
    decoders, notes = _decoders()
    print('\n== JPEG decoders (median ms per frame; ratio to OpenCV paired by round '
          f'[95 % interval], {rounds} rounds x {reps} decodes)')
    for note in notes:
        print(f'  {note}')
    names = list(decoders)
    width = max(len(n) for n in names)
    for frame_name, (bgr, data) in frames.items():
        configs = {n: (lambda fn=decoders[n], d=data: fn(d)) for n in names}
        by_round = _time_rounds(configs, rounds, reps, seed)
        print(f'\n  {frame_name}: {bgr.shape[1]}x{bgr.shape[0]}, {len(data) / 1024:.0f} KiB')
        for name in names:
            flat = [x for r in by_round[name] for x in r]
            ratio = '' if name == names[0] else \
                f'  {paired_ratio(by_round[name], by_round[names[0]])}'
            print(f'    {name:<{width}}  {statistics.median(flat) * 1e3:7.2f}{ratio}')


def wire_part(frames) -> None:
    """Print bytes per frame raw against JPEG and PNG, and the encoder's time."""
    print('\n== bytes per frame (raw = sensor_msgs/Image data, 3 B a pixel); encode ms '
          '(OpenCV, the camera side)')
    print(f"  {'frame':<12} {'raw KiB':>8} {'q80 KiB':>8} {'q90 KiB':>8} {'q95 KiB':>8} "
          f"{'png KiB':>8}  {'raw/q90':>7}  {'enc q90 ms':>10}")
    seen = set()
    for name, (bgr, _) in frames.items():
        key = bgr.shape
        if key in seen:
            continue
        seen.add(key)
        sizes = [len(_jpeg(bgr, q)) for q in (80, 90, 95)]
        png = len(cv2.imencode('.png', bgr, [cv2.IMWRITE_PNG_COMPRESSION, 3])[1])
        times = []
        for _ in range(7):
            start = time.perf_counter()
            _jpeg(bgr, 90)
            times.append(time.perf_counter() - start)
        label = f'{bgr.shape[1]}x{bgr.shape[0]}'
        print(f'  {label:<12} {bgr.nbytes / 1024:8.0f} ' +
              ' '.join(f'{s / 1024:8.0f}' for s in sizes) +
              f' {png / 1024:8.0f}  {bgr.nbytes / sizes[1]:7.1f}  '
              f'{statistics.median(times) * 1e3:10.2f}')


def node_part(bgr: np.ndarray, args, bench_detect) -> int:
    """Raw vs compressed node path on the same frame; 0 when done or skipped."""
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import CompressedImage, Image
    from vision_msgs.msg import Detection2DArray

    from vision_nodes.image_codecs import decode_compressed
    from vision_nodes.ros.inputs.conversion import numpy_to_compressed
    from vision_nodes.ros.inputs.conversion import numpy_to_image
    from vision_nodes.tools.client import NodeProcess, VisionNodeClient, wait_for

    print(f'\n== node path: {bgr.shape[1]}x{bgr.shape[0]} frame, backend {args.backend}, raw '
          f'Image vs JPEG q{args.quality} CompressedImage ({args.rounds} rounds x '
          f'{args.frames} frames)')
    nodes, clients = {}, {}
    try:
        for kind in ('raw', 'compressed'):
            name = f'bench_{kind}'
            nodes[kind] = NodeProcess({'backend': args.backend}, node_name=name,
                                      namespace=f'/{name}')
            clients[kind] = VisionNodeClient(f'/{name}/{name}', f'{name}_client')
        for client in clients.values():
            client.wait_for_node(60)
        current = clients['compressed'].get_parameters('image_transport').get('image_transport')
        if current is None:
            print('  skipped: this vision_node has no image_transport parameter (compressed '
                  'input is not wired into the node yet)')
            return 0
        result = clients['compressed'].set_parameters(image_transport='compressed')[0]
        if not result.successful:
            print(f'  skipped: the node refused image_transport=compressed: {result.reason}')
            return 0
        for kind, client in clients.items():
            if not (client.change_state('configure', 600) and client.change_state('activate')):
                print(f'  {kind} node failed to start:\n{nodes[kind].output()[-2000:]}')
                return 1
        reliable = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
        queues = {k: c.subscribe(Detection2DArray, f'/bench_{k}/detections', 10)
                  for k, c in clients.items()}
        pubs = {'raw': clients['raw'].publisher(Image, '/bench_raw/image', reliable),
                'compressed': clients['compressed'].publisher(
                    CompressedImage, '/bench_compressed/image/compressed', reliable)}
        msgs = {'raw': numpy_to_image(bgr, 'bgr8'),
                'compressed': numpy_to_compressed(bgr, 'bgr8', 'jpeg', args.quality)}
        for kind, pub in pubs.items():
            if not wait_for(lambda pub=pub: pub.get_subscription_count() > 0, 60.0):
                print(f'  nothing subscribed to the {kind} image topic:\n'
                      f'{nodes[kind].output()[-2000:]}')
                return 1
        seq = [0]

        def frame(kind: str) -> float:
            seq[0] += 1
            return bench_detect.time_node_frame(pubs[kind], queues[kind], msgs[kind],
                                                f'{kind}_{seq[0]}', 30.0)[0]

        by_round = {k: [[] for _ in range(args.rounds)] for k in pubs}
        order = list(pubs)
        shuffle = random.Random(args.seed).shuffle
        for round_index in range(args.rounds + 1):
            shuffle(order)
            for kind in order:
                for index in range(1 + (args.frames if round_index else 2)):
                    elapsed = frame(kind)
                    if round_index and index:
                        by_round[kind][round_index - 1].append(elapsed)
        data = bytes(msgs['compressed'].data)
        decode_times = []
        for _ in range(20):
            start = time.perf_counter()
            decode_compressed(data, msgs['compressed'].format)
            decode_times.append(time.perf_counter() - start)
        for kind in pubs:
            flat = [x for r in by_round[kind] for x in r]
            size = len(msgs[kind].data)
            print(f'  {kind:<10} {statistics.median(flat) * 1e3:7.1f} ms median, '
                  f'{sorted(flat)[int(0.9 * (len(flat) - 1))] * 1e3:7.1f} ms p90, '
                  f'{size / 1024:6.0f} KiB a frame')
        print(f"  compressed / raw node path = "
              f"{bench_detect.paired_ratio(by_round['compressed'], by_round['raw'])}")
        print(f'  (decode_compressed of that frame in this process: '
              f'{statistics.median(decode_times) * 1e3:.2f} ms median)')
        for client in clients.values():
            client.change_state('deactivate')
        return 0
    finally:
        for client in clients.values():
            client.close()
        for node in nodes.values():
            node.stop()


def main(argv: list[str] | None = None) -> int:
    """Run the parts asked for and print their tables."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--rounds', type=int, default=10)
    parser.add_argument('--reps', type=int, default=10, help='decodes per round and decoder')
    parser.add_argument('--frames', type=int, default=5, help='node frames per round and path')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--image', type=Path, default=None,
                        help='an extra frame (e.g. a camera JPEG); the node path uses it')
    parser.add_argument('--quality', type=int, default=90, help='JPEG quality, node path')
    parser.add_argument('--backend', default='onnx')
    parser.add_argument('--no-node', action='store_true', help='decoders and sizes only')
    parser.add_argument('--no-decoders', action='store_true')
    parser.add_argument('--dds-profile', default='default',
                        help="'default', 'large-images' (config/fastdds_large_images.xml) or "
                             'a profile XML path; this process and the nodes alike')
    args = parser.parse_args(argv)
    # The node's allocator settings among them: without them OpenCV's output buffer is
    # page-faulted in afresh on every decode and imdecode looks ~2x slower than in the node.
    bench_detect = _bench_detect()
    bench_detect.bench_environment(args.dds_profile)
    paired_ratio = bench_detect.paired_ratio
    frames = _frames(args.image)
    print(f'{os.cpu_count()} CPUs; OpenCV {cv2.__version__}; DDS profile: {args.dds_profile}')
    if not args.no_decoders:
        decoder_part(frames, args.rounds, args.reps, args.seed, paired_ratio)
    wire_part(frames)
    if args.no_node:
        return 0
    node_frame = frames[args.image.name][0] if args.image else frames['bus.jpg'][0]
    return node_part(node_frame, args, bench_detect)


if __name__ == '__main__':
    sys.exit(main())
