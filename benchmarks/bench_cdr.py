#!/usr/bin/env python3
"""The node's ends of DDS: take an image (typed vs raw), publish one (message vs bytes).

One process, one reader and one writer on one topic (Fast DDS, the large-images profile by
default), the allocator tuned as in the node; each round runs every variant in turn:

* take    - rclpy's ``take_message`` of a ``bgr8`` image (640x480, 1080x810, 1920x1080) as a
            typed ``sensor_msgs/Image`` then :func:`image_to_array`'s view, against the raw
            take (the serialized bytes) then
            :func:`vision_nodes.ros.wire.cdr_reader.read_image` and the same view: what the
            node's image subscription does per frame, less the executor; and the raw take
            against rcl's own take into a pooled buffer
            (:class:`vision_nodes.ros.process.rcl_take.RclTake`, what the inference thread
            does when it takes a single camera's frames itself);
* publish - ``Publisher.publish`` of the node's outputs (810x1080 ``32FC1`` depth,
            ``mono16`` instance mask, ``bgr8`` annotated image; a Keypoints2DArray of 1-100
            people; a Detection3DArray of 1-100 boxes) built as a message (the typed
            builders of test/reference_messages.py, loaded by path) against the bytes of
            :mod:`vision_nodes.ros.wire.image_cdr`,
            :mod:`~vision_nodes.ros.wire.keypoints_cdr` and
            :mod:`~vision_nodes.ros.wire.detection3d_cdr`.

Medians over rounds and their ratio (bytes / message, rcl / raw); ``--json PATH`` writes them
in ``bench_report.py``'s shape. Not a test: nothing is asserted.

    .venv/bin/python benchmarks/bench_cdr.py [--rounds 400] [--dds-profile default] [--json P]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import time
from pathlib import Path
from typing import Callable

import numpy as np

SIZES = {'640x480': (480, 640), '1080x810': (810, 1080), '1920x1080': (1080, 1920)}
ROOT = Path(__file__).resolve().parent.parent


def _reference():
    """Load test/reference_messages.py (the typed builders) by its path."""
    spec = importlib.util.spec_from_file_location(
        'reference_messages', ROOT / 'test' / 'reference_messages.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: name -> (median ms of the first variant, of the second, their ratio second / first).
RESULTS: dict[str, dict[str, float]] = {}


def _take(sub, mode: str, convert: Callable, rcl_take) -> float | None:
    """Take one message (None: nothing there) and view its pixels; return the seconds."""
    with sub.handle:
        start = time.perf_counter()
        if mode == 'rcl':
            got = rcl_take.take(sub.handle.pointer)
        else:
            got = sub.handle.take_message(sub.msg_type, sub.raw)
        if got is None:
            return None
        convert(got[0], mode)
        return time.perf_counter() - start


def bench_take(node, rounds: int) -> None:
    """Typed take + view against raw take + read + view, and the raw take against rcl's."""
    from rclpy.qos import QoSProfile
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import Image

    from vision_nodes.ros.inputs.conversion import image_to_array, numpy_to_image
    from vision_nodes.ros.process.rcl_take import RclTake
    from vision_nodes.ros.wire.cdr_reader import read_image

    def convert(msg, mode):
        image_to_array(msg if mode == 'typed' else read_image(msg))

    rcl_take = RclTake.load()
    modes = ('typed', 'raw') + (('rcl',) if rcl_take is not None else ())
    if rcl_take is None:
        print('rcl take: off (VISION_NODES_RCL_TAKE=0, or rcl not loaded)')
    pub = node.create_publisher(Image, 'bench_cdr_image', QoSProfile(depth=1))
    subs = {mode: node.create_subscription(Image, 'bench_cdr_image', lambda *_: None,
                                           QoSProfile(depth=1), raw=mode != 'typed')
            for mode in modes}
    time.sleep(1.0)
    rng = np.random.default_rng(0)
    for size, (height, width) in SIZES.items():
        data = serialize_message(numpy_to_image(
            rng.integers(0, 256, (height, width, 3), np.uint8), 'bgr8'))
        spent: dict[str, list[float]] = {mode: [] for mode in subs}
        for index in range(rounds):
            pub.publish(data)
            for mode in (modes if index % 2 else modes[::-1]):
                deadline = time.monotonic() + 5.0
                while time.monotonic() < deadline:
                    seconds = _take(subs[mode], mode, convert, rcl_take)
                    if seconds is not None:
                        spent[mode].append(seconds)
                        break
                    time.sleep(0.0002)
        _report(f'take {size} bgr8', spent['typed'], spent['raw'], 'typed', 'raw')
        if rcl_take is not None:
            _report(f'take {size} bgr8 raw', spent['raw'], spent['rcl'], 'rclpy', 'rcl')
    if rcl_take is not None:
        rcl_take.close()


def _report(name: str, old: list[float], new: list[float], old_name: str, new_name: str
            ) -> None:
    a, b = statistics.median(old) * 1e3, statistics.median(new) * 1e3
    RESULTS[name] = {f'{old_name}_ms': a, f'{new_name}_ms': b, 'ratio': b / a}
    print(f'{name:32s} {old_name} {a:7.3f} ms  {new_name} {b:7.3f} ms  ratio {b / a:5.3f}',
          flush=True)


def _publish_pair(node, msg_type, name: str, build_msg: Callable, build_cdr: Callable,
                  rounds: int) -> None:
    """Time build + publish of the message against build + publish of the bytes."""
    from rclpy.qos import QoSProfile

    pub = node.create_publisher(msg_type, 'bench_cdr_out', QoSProfile(depth=1))
    sub = node.create_subscription(msg_type, 'bench_cdr_out', lambda *_: None,
                                   QoSProfile(depth=1), raw=True)
    time.sleep(0.5)
    spent: dict[str, list[float]] = {'message': [], 'bytes': []}
    for index in range(rounds):
        for mode in (('message', 'bytes') if index % 2 else ('bytes', 'message')):
            start = time.perf_counter()
            pub.publish(build_msg() if mode == 'message' else build_cdr())
            spent[mode].append(time.perf_counter() - start)
            with sub.handle:
                sub.handle.take_message(sub.msg_type, True)
    node.destroy_subscription(sub)
    node.destroy_publisher(pub)
    _report(f'publish {name}', spent['message'], spent['bytes'], 'message', 'bytes')


def bench_publish(node, rounds: int) -> None:
    """Publish the node's image and keypoint outputs as messages and as bytes."""
    from sensor_msgs.msg import Image
    from std_msgs.msg import Header
    from vision_nodes_msgs.msg import Keypoints2DArray

    from vision_nodes.ros.wire.image_cdr import encode_image
    from vision_nodes.ros.inputs.conversion import numpy_to_image
    from vision_nodes.ros.outputs.depth_outputs import depth_to_cdr
    from vision_nodes.ros.outputs.pose_outputs import keypoints_to_cdr
    from vision_nodes.tasks.depth import DepthResult
    from vision_nodes.tasks.instances import PoseResult

    reference = _reference()
    header = Header(frame_id='camera')
    rng = np.random.default_rng(1)
    depth = DepthResult(rng.random((810, 1080), dtype=np.float32), True, 'depth')
    _publish_pair(node, Image, 'depth 1080x810 32FC1',
                  lambda: reference.depth_to_msg(depth, header),
                  lambda: depth_to_cdr(depth, header), rounds)
    for name, pixels, encoding in (
            ('mask 1080x810 mono16', np.zeros((810, 1080), np.uint16), 'mono16'),
            ('annotated 1080x810 bgr8', np.zeros((810, 1080, 3), np.uint8), 'bgr8'),
            ('annotated 1920x1080 bgr8', np.zeros((1080, 1920, 3), np.uint8), 'bgr8')):
        _publish_pair(node, Image, name, lambda: numpy_to_image(pixels, encoding, header),
                      lambda: encode_image(pixels, encoding, header), rounds)
    names = tuple(f'keypoint_{i}' for i in range(17))
    for people in (1, 5, 20, 100):
        result = PoseResult(np.zeros((people, 4), np.float32), np.zeros(people, np.float32),
                            np.zeros(people, np.int64),
                            (rng.random((people, 17, 3)) * 500).astype(np.float32), names)
        ids = [str(i) for i in range(people)]
        _publish_pair(node, Keypoints2DArray, f'keypoints {people} people',
                      lambda: reference.keypoints_to_msg(result, header, ids),
                      lambda: keypoints_to_cdr(result, header, ids), rounds)
    bench_publish_3d(node, rounds)


def bench_publish_3d(node, rounds: int) -> None:
    """Publish Detection3DArrays of 1-100 boxes as messages and as bytes."""
    from std_msgs.msg import Header
    from vision_msgs.msg import Detection3DArray

    from vision_nodes.geometry3d import Boxes3D
    from vision_nodes.ros.outputs.detection3d_outputs import detections_3d_to_cdr
    from vision_nodes.tasks.detect import Detections

    reference = _reference()
    header = Header(frame_id='camera_optical_frame')
    rng = np.random.default_rng(2)
    for count in (1, 5, 20, 100):
        dets = Detections(rng.random((count, 4)).astype(np.float32),
                          rng.random(count).astype(np.float32), rng.integers(0, 80, count))
        boxes = Boxes3D(np.arange(count), rng.random((count, 3)), rng.random((count, 3)))
        _publish_pair(node, Detection3DArray, f'detections_3d {count} boxes',
                      lambda: reference.detections_3d_to_msg(dets, boxes, header),
                      lambda: detections_3d_to_cdr(dets, boxes, header), rounds)


def start_ros(dds_profile: str):
    """Set this process up as the node's (DDS profile, local discovery, allocator); init rclpy.

    ``dds_profile``: 'large-images' (config/fastdds_large_images.xml) or 'default'. Returns
    the ``rclpy`` module, initialised.
    """
    if dds_profile == 'large-images':
        os.environ['FASTDDS_DEFAULT_PROFILES_FILE'] = str(
            ROOT / 'config' / 'fastdds_large_images.xml')
    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    os.environ.setdefault('ROS_DOMAIN_ID', str(150 + os.getpid() % 50))
    from vision_nodes.platform.allocator import keep_freed_buffers

    keep_freed_buffers()
    import rclpy

    rclpy.init()
    return rclpy


def main(argv: list[str] | None = None) -> None:
    """Run both parts and print their medians and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--rounds', type=int, default=400)
    parser.add_argument('--dds-profile', default='large-images',
                        help="'large-images' (config/fastdds_large_images.xml) or 'default'")
    parser.add_argument('--json', type=Path, help='write the medians and ratios here')
    args = parser.parse_args(argv)
    rclpy = start_ros(args.dds_profile)
    node = rclpy.create_node('bench_cdr')
    try:
        print(f'{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}; DDS profile '
              f'{args.dds_profile}; {args.rounds} rounds', flush=True)
        bench_take(node, args.rounds)
        bench_publish(node, args.rounds)
        print(f'load average {os.getloadavg()[0]:.2f}')
        if args.json:
            from bench_report import machine_facts, write_json

            write_json(args.json, machine_facts(), RESULTS, None,
                       {name: result['ratio'] for name, result in RESULTS.items()},
                       extra={'dds_profile': args.dds_profile, 'rounds': args.rounds})
            print(f'wrote {args.json}')
    finally:
        node.destroy_node()
        rclpy.shutdown()


if __name__ == '__main__':
    main()
