#!/usr/bin/env python3
"""Depth latency and memory, measured side by side in one run.

Configurations, each a real ``vision_node`` process fed by this process over DDS (the
large-images Fast DDS profile on both sides), taking turns in a shuffled order each round:

* depth bare runner  - ``runner.infer`` of the depth model in this process (network only);
* depth node path    - a ``sensor_msgs/Image`` published to a node running the depth model,
                       until its ``depth`` image (32FC1 at the camera's resolution: the resize
                       back included) reaches this process;
* one node           - a node running ``models: [yolov8n, <depth>]``: until both the
                       detections and the depth image of the frame have arrived;
* two nodes          - a detection node and a depth node on the same image topic: until both
                       answers of the frame have arrived.

Prints the median latencies, the paired ratios (median over rounds, 95 % bootstrap interval)
against the targets (depth node path <= 1.15 x bare runner; one node faster than two), and
the resident memory of the one node against the two nodes together. No depth weights are
reachable here: the depth model is the real architecture with random weights (timing does not
depend on the weights). Not a test: nothing is asserted.

    .venv/bin/python benchmarks/bench_depth.py                     # YOLO26n-depth, auto
    .venv/bin/python benchmarks/bench_depth.py --depth da_small --backend onnx
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
PROFILE = ROOT / 'config' / 'fastdds_large_images.xml'


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _depth_manifest(kind: str, folder: Path) -> str:
    """Write the depth model (random weights) and its manifest; return the manifest path."""
    weights = _load(ROOT / 'test' / 'depth_weights.py', 'depth_weights')
    if kind == 'yolo26n':
        pt = weights.yolo_depth_pt(folder / 'yolo26n-depth-random.pt')
        data = yaml.safe_load((ROOT / 'config' / 'models' / 'yolo26n_depth.yaml').read_text())
        data.update(name='depth_model', weights=str(pt))
    else:
        small = weights.depth_anything_folder(folder / 'da_small', small=True)
        data = yaml.safe_load(
            (ROOT / 'config' / 'models' / 'depth_anything_v2_small.yaml').read_text())
        data.update(name='depth_model', weights=str(small))
    path = folder / 'depth_model.yaml'
    path.write_text(yaml.safe_dump(data))
    return str(path)


def _rss_mb(pid: int) -> float:
    with open(f'/proc/{pid}/status') as status:
        for line in status:
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) / 1024.0
    return float('nan')


def main() -> int:
    """Run the benchmark; return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--depth', choices=('yolo26n', 'da_small'), default='yolo26n')
    parser.add_argument('--backend', default='auto')
    parser.add_argument('--rounds', type=int, default=10)
    parser.add_argument('--frames', type=int, default=4)
    parser.add_argument('--image', type=Path, default=None, help='default: bus.jpg')
    args = parser.parse_args()
    os.environ['FASTDDS_DEFAULT_PROFILES_FILE'] = str(PROFILE)
    from vision_nodes.manifest import use_default_model_dir

    use_default_model_dir()

    import cv2
    from sensor_msgs.msg import Image
    from vision_msgs.msg import Detection2DArray

    from vision_nodes.tasks import load_manifest, resolve_manifest
    from vision_nodes.pipeline import build_pipeline
    from vision_nodes.platform.allocator import keep_freed_buffers
    from vision_nodes.ros.inputs.conversion import numpy_to_image
    from vision_nodes.tools.client import NodeProcess, VisionNodeClient, publish_until_answered
    from vision_nodes.tools.demo import bundled_images

    keep_freed_buffers()
    bench_stats = _load(Path(__file__).with_name('bench_detect.py'), 'bench_detect')
    scratch = Path(tempfile.mkdtemp(prefix='bench_depth_'))
    depth = _depth_manifest(args.depth, scratch)
    cache = scratch / 'cache'
    image_path = args.image or next(p for p in bundled_images() if p.name == 'bus.jpg')
    bgr = cv2.imread(str(image_path))
    msg = numpy_to_image(bgr, 'bgr8')

    backend = args.backend if args.backend != 'auto' else 'openvino'
    # Every artifact is built here first, so no node process exports (and imports PyTorch,
    # which would dwarf the memory compared below).
    build_pipeline(resolve_manifest('yolov8n'), backend, cache_dir=cache,
                   precision='auto').close()
    bare = build_pipeline(load_manifest(depth), backend, cache_dir=cache, precision='auto')
    tensor, _ = bare.task.preprocess(bgr, 'bgr8', bare.input_shape(bgr.shape[:2]))
    base = {'backend': args.backend, 'engine_cache_dir': str(cache)}
    nodes = {
        'depth node': NodeProcess({**base, 'model': depth}, node_name='bd_depth',
                                  namespace='/d'),
        'one node': NodeProcess({**base, 'models': ['yolov8n', depth]}, node_name='bd_both',
                                namespace='/b'),
        'two: detect': NodeProcess({**base, 'model': 'yolov8n'}, node_name='bd_det',
                                   namespace='/t'),
        'two: depth': NodeProcess({**base, 'model': depth}, node_name='bd_dep2',
                                  namespace='/t'),
    }
    client = VisionNodeClient('/d/bd_depth', 'bench_depth_client')
    try:
        for name, node in nodes.items():
            target = f'{node_ns(node)}'
            c = VisionNodeClient(target, f'bench_depth_{target.replace("/", "_")}')
            c.wait_for_node(60)
            if not (c.change_state('configure', timeout=900) and c.change_state('activate')):
                print(f'{name}: configure/activate failed:\n{node.output()[-2000:]}')
                return 1
            c.close()
        topics = {
            'depth node': [('/d/depth/image', Image)],
            'one node': [('/b/yolov8n/detections', Detection2DArray),
                         ('/b/depth_model/depth/image', Image)],
            'two nodes': [('/t/detections', Detection2DArray), ('/t/depth/image', Image)],
        }
        images = {'depth node': client.publisher(Image, '/d/image', 10),
                  'one node': client.publisher(Image, '/b/image', 10),
                  'two nodes': client.publisher(Image, '/t/image', 10)}
        queues = {k: [client.subscribe(t, topic, 10) for topic, t in v]
                  for k, v in topics.items()}
        for key in topics:
            msg.header.frame_id = f'warm_{key}'
            for q in queues[key]:
                if publish_until_answered(images[key], msg, q, 120.0) is None:
                    print(f'{key}: no answer')
                    return 1
        rss = {name: _rss_mb(node.process.pid) for name, node in nodes.items()}
        rounds: dict[str, list[list[float]]] = {k: [] for k in
                                                ('bare runner', *topics)}
        rng = random.Random(0)
        for r in range(args.rounds):
            order = list(rounds)
            rng.shuffle(order)
            for key in order:
                samples = []
                for i in range(args.frames):
                    if key == 'bare runner':
                        start = time.perf_counter()
                        bare.runner.infer(tensor)
                        samples.append(time.perf_counter() - start)
                        continue
                    msg.header.frame_id = f'{key}_{r}_{i}'
                    msg.header.stamp = client.node.get_clock().now().to_msg()
                    for q in queues[key]:
                        q.clear()
                    start = time.time_ns()
                    images[key].publish(msg)
                    ends = []
                    for q in queues[key]:
                        got = q.get_stamped(30.0, lambda m: m.header.frame_id ==
                                            msg.header.frame_id)
                        if got is None:
                            break
                        ends.append(got[0].received_ns)
                    if len(ends) == len(queues[key]):
                        samples.append((max(ends) - start) / 1e9)
                    time.sleep(0.05)
                rounds[key].append(samples)
        print(f'depth model {args.depth} (random weights), backend {args.backend}, image '
              f'{image_path.name} {bgr.shape[1]}x{bgr.shape[0]}; {args.rounds} rounds x '
              f'{args.frames} frames')
        for key, per_round in rounds.items():
            flat = [s for rnd in per_round for s in rnd]
            print(f'  {key:12s} median {statistics.median(flat) * 1e3:7.1f} ms')
        ratio = bench_stats.paired_ratio(rounds['depth node'], rounds['bare runner'])
        print(f'  depth node path / bare runner       = {ratio}   '
              f'{bench_stats.verdict(ratio, 1.15, strict=False)}')
        ratio = bench_stats.paired_ratio(rounds['one node'], rounds['two nodes'])
        print(f'  one node / two nodes (both answers) = {ratio}   '
              f'{bench_stats.verdict(ratio, 1.0, strict=True)}')
        two = rss['two: detect'] + rss['two: depth']
        print(f"  resident memory: one node {rss['one node']:.0f} MiB, two nodes "
              f"{rss['two: detect']:.0f} + {rss['two: depth']:.0f} = {two:.0f} MiB "
              f"(one / two = {rss['one node'] / two:.2f})")
        return 0
    finally:
        client.close()
        bare.close()
        for node in nodes.values():
            node.stop()


def node_ns(node) -> str:
    """Return the node's fully qualified name, read from its process's command line."""
    cmd = node.process.args
    name = next(a.split(':=', 1)[1] for a in cmd if a.startswith('__node:='))
    ns = next((a.split(':=', 1)[1] for a in cmd if a.startswith('__ns:=')), '')
    return f"{ns.rstrip('/')}/{name}"


if __name__ == '__main__':
    sys.exit(main())
