"""Run ``vision_node`` end to end on still images and show what it publishes.

Starts the node in its own process, configures and activates it through the real lifecycle
services, publishes each image as ``sensor_msgs/Image``, prints the ``Detection2DArray`` that
comes back (class names from ``label_info``) and writes an annotated PNG per image. With a
depth model (``--depth``; by default Depth Anything V2 Small when its weights are in the model
folder) the same node runs it beside the detector and the demo writes the colourised depth
next to the detections.

    python -m vision_nodes.tools.demo              # YOLOv8n, backend auto (fastest here)
    python -m vision_nodes.tools.demo --backend onnx --images my.jpg --out out/
    python -m vision_nodes.tools.demo --depth yolo26n_depth --model-dir /path/to/weights
    python -m vision_nodes.tools.demo --track --images frame_*.jpg   # track ids across frames
    python -m vision_nodes.tools.demo --task segment                 # masks (or: --task pose)
    python -m vision_nodes.tools.demo --task obb                     # rotated boxes
    python -m vision_nodes.tools.demo --task classify                # the top 5 classes
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np
import yaml
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image
from vision_msgs.msg import Classification, Detection2DArray, LabelInfo

from .client import NodeProcess, VisionNodeClient, publish_until_answered
from ..ros.inputs.conversion import image_to_numpy, numpy_to_image
from ..manifest import ManifestError, use_default_model_dir
from ..tasks import resolve_manifest
from ..loaders.ultralytics import import_ultralytics
from .. import drawing


#: The depth model the demo runs when its weights are in the model folder.
DEFAULT_DEPTH = 'depth_anything_v2_small'
#: The manifest each ``--task`` runs unless ``--model`` names one.
TASK_MODELS = {'detect': 'yolov8n', 'segment': 'yolov8n_seg', 'pose': 'yolov8n_pose',
               'obb': 'yolov8n_obb', 'classify': 'yolov8n_cls'}


def bundled_images() -> list[Path]:
    """Return the sample images that ship inside the ultralytics package, if it is installed."""
    # Located, not imported: importing ultralytics pulls in PyTorch and changes thread settings.
    spec = importlib.util.find_spec('ultralytics')
    if spec is None or spec.origin is None:
        return []
    return sorted((Path(spec.origin).parent / 'assets').glob('*.jpg'))


def _weights_manifest(model: str, weights: str, folder: Path) -> str:
    """Write a copy of the manifest whose weights point at ``weights``; return its path."""
    manifest = resolve_manifest(model)
    path = Path(weights).expanduser()
    if not path.is_file():
        path = _fetch_with_ultralytics(weights)
    data = yaml.safe_load(Path(manifest.source).read_text())
    data['weights'] = str(path.resolve())
    out = folder / f'{manifest.name}_custom.yaml'
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(out)


def _fetch_with_ultralytics(name: str) -> Path:
    """Let ultralytics download named weights (connected machines only; tests never do)."""
    os.environ.pop('YOLO_OFFLINE', None)
    model = import_ultralytics(online=True).YOLO(name)
    path = Path(getattr(model, 'ckpt_path', '') or name)
    if not path.is_file():
        raise SystemExit(f"weights '{name}' are not a file and ultralytics could not fetch them")
    return path


def box_corners(det) -> np.ndarray:
    """Return a Detection2D's four corners: ``cv2.boxPoints`` of its centre, size and theta.

    The order of Ultralytics' ``xyxyxyxy`` (OpenCV gives them reversed); an axis-aligned box
    (theta 0) has its corners too.
    """
    box = det.bbox
    return cv2.boxPoints(((box.center.position.x, box.center.position.y),
                          (box.size_x, box.size_y), math.degrees(box.center.theta)))[::-1]


def _names(labels: dict[int, str]) -> list[str]:
    return [labels.get(i, str(i)) for i in range(max(labels, default=-1) + 1)]


def draw(image_bgr: np.ndarray, msg: Detection2DArray, labels: dict[int, str],
         tracked: bool = False) -> np.ndarray:
    """Return a copy of the image with the detections drawn as the node's ``annotated`` does.

    ``tracked``: the messages' ids are track ids (drawn as ``#id``). Rotated boxes (theta not
    0: an obb model's) are drawn as their polygons.
    """
    boxes = np.array([[d.bbox.center.position.x - d.bbox.size_x / 2,
                       d.bbox.center.position.y - d.bbox.size_y / 2,
                       d.bbox.center.position.x + d.bbox.size_x / 2,
                       d.bbox.center.position.y + d.bbox.size_y / 2]
                      for d in msg.detections]).reshape(-1, 4)
    rotated = any(d.bbox.center.theta for d in msg.detections)
    polygons = np.array([box_corners(d) for d in msg.detections]) if rotated else None
    hyps = [d.results[0].hypothesis for d in msg.detections]
    ids = [int(d.id) for d in msg.detections] if tracked else None
    return drawing.draw(image_bgr, boxes, np.array([h.score for h in hyps]),
                        np.array([int(h.class_id) for h in hyps], np.int64), _names(labels),
                        ids, polygons=polygons)


def format_detections(msg: Detection2DArray, labels: dict[int, str],
                      tracked: bool = False) -> list[str]:
    """One line per detection: (track id,) name, score, box corners in pixels.

    A rotated box (an obb model's) is its centre, size and angle instead.
    """
    lines = []
    for det in sorted(msg.detections, key=lambda d: -d.results[0].hypothesis.score):
        hyp = det.results[0].hypothesis
        cx, cy = det.bbox.center.position.x, det.bbox.center.position.y
        w, h = det.bbox.size_x, det.bbox.size_y
        track = f'#{det.id:<4} ' if tracked else ''
        where = (f'cx={cx:7.1f} cy={cy:7.1f} w={w:6.1f} h={h:6.1f} '
                 f'angle={math.degrees(det.bbox.center.theta):6.1f} deg'
                 if det.bbox.center.theta else
                 f'x1={cx - w / 2:7.1f} y1={cy - h / 2:7.1f} '
                 f'x2={cx + w / 2:7.1f} y2={cy + h / 2:7.1f}')
        lines.append(f'  {track}{labels.get(int(hyp.class_id), hyp.class_id):<14} '
                     f'{hyp.score:5.2f}   {where}')
    return lines


def format_classes(msg: Classification, labels: dict[int, str]) -> list[str]:
    """One line per class of a classification, highest probability first."""
    return [f'  {labels.get(int(r.class_id), r.class_id):<14} {r.score:6.3f}'
            for r in msg.results]


def draw_classes(image_bgr: np.ndarray, msg: Classification,
                 labels: dict[int, str]) -> np.ndarray:
    """Return a copy of the image with the classes written as the node's ``annotated`` does."""
    return drawing.draw_classes(image_bgr, [int(r.class_id) for r in msg.results],
                                [r.score for r in msg.results], _names(labels))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--model', default='',
                        help='manifest name or path (default: the --task\'s YOLOv8n manifest)')
    parser.add_argument('--task', default='detect', choices=tuple(TASK_MODELS),
                        help='segment, pose, obb and classify also write the node\'s '
                             'annotated picture (masks, skeletons, rotated boxes, the top '
                             'classes) as <image>_<task>.png')
    parser.add_argument('--weights', default='',
                        help='weights file to use instead of the manifest\'s (on a connected '
                             'machine a name such as yolov8s.pt is fetched by ultralytics)')
    parser.add_argument('--model-dir', default='', help='folder for relative weights paths')
    parser.add_argument('--backend', default='auto',
                        help='backend (default: auto, the fastest this machine runs)')
    parser.add_argument('--depth', default=None,
                        help='a depth manifest to run in the same node (default: '
                             'depth_anything_v2_small if its weights are in the model folder; '
                             "'none' to skip)")
    parser.add_argument('--track', nargs='?', const='bytetrack', default=None,
                        choices=('bytetrack', 'botsort'),
                        help='track the detections across the images (default tracker: '
                             'bytetrack); the pictures show the track ids')
    parser.add_argument('--images', nargs='*', type=Path, default=None,
                        help='images to run (default: the ones bundled with ultralytics)')
    parser.add_argument('--out', type=Path, default=Path('out'),
                        help='folder for annotated PNGs (default: ./out)')
    parser.add_argument('--confidence', type=float, default=None,
                        help="confidence threshold (default: the manifest's)")
    parser.add_argument('--timeout', type=float, default=180.0,
                        help='seconds to wait for configure (first run exports ONNX)')
    args = parser.parse_args(argv)
    if args.task == 'classify' and args.track:
        parser.error('--track: a classification has no boxes to track (--task classify)')
    args.model = args.model or TASK_MODELS[args.task]
    return args


def _depth_model(args: argparse.Namespace) -> str | None:
    """Return the depth manifest to run: the one asked for, else the default if it has weights."""
    if args.depth and args.depth.lower() == 'none':
        return None
    name = args.depth or DEFAULT_DEPTH
    try:
        manifest = resolve_manifest(name)
    except ManifestError as exc:
        if args.depth:
            raise SystemExit(f'--depth: {exc}')
        return None
    if args.depth or manifest.weights_path(args.model_dir or None).exists():
        return name
    print(f'depth: skipped ({manifest.name} weights not found at '
          f'{manifest.weights_path(args.model_dir or None)}; see docs/depth.md)')
    return None


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the process exit code."""
    args = parse_args(argv)
    use_default_model_dir()
    images = args.images if args.images else bundled_images()
    if not images:
        print('no images: pass --images (ultralytics, which bundles samples, is not installed)')
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix='vision_nodes_demo_'))
    model = _weights_manifest(args.model, args.weights, scratch) if args.weights else args.model
    detector = resolve_manifest(model)
    depth = _depth_model(args)
    thresholds = detector.thresholds
    prefix = ''
    params = {'backend': args.backend, 'model_dir': args.model_dir}
    if depth:
        prefix = f'{detector.name}.'
        params['models'] = [model, depth]
    else:
        params['model'] = model
    if args.task != 'classify':  # a classification has no thresholds
        params.update({f'{prefix}confidence_threshold': args.confidence
                       if args.confidence is not None else thresholds.confidence,
                       f'{prefix}iou_threshold': thresholds.iou,
                       f'{prefix}max_detections': thresholds.max_detections})
    if args.track:
        params[f'{prefix}tracker'] = args.track
    if args.task != 'detect':
        params[f'{prefix}publish_annotated'] = True
    node = NodeProcess(params, log_path=args.out / 'vision_node.log')
    client = VisionNodeClient('/vision_node', 'vision_nodes_demo')
    try:
        client.wait_for_node(30.0)
        what = f'{args.model} and {depth}' if depth else args.model
        print(f'configuring {what} on backend {args.backend} ...', flush=True)
        started = time.monotonic()
        if not client.change_state('configure', timeout=args.timeout):
            print('configure FAILED; the node said:\n' + _errors(node.output()))
            return 1
        used = client.get_parameters('backend_in_use', 'precision_in_use')
        print(f'configured in {time.monotonic() - started:.1f} s: backend '
              f"{used['backend_in_use']}, precision {used['precision_in_use']}; activating",
              flush=True)
        ns = f'/{detector.name}' if depth else ''
        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        label_q = client.subscribe(LabelInfo, f'{ns}/label_info', latched)
        answer_type, answer_topic = (Classification, 'classification') \
            if args.task == 'classify' else (Detection2DArray, 'detections')
        det_q = client.subscribe(answer_type, f'{ns}/{answer_topic}', 10)
        depth_q = None
        if depth:
            depth_q = client.subscribe(Image, f'/{resolve_manifest(depth).name}/depth/colored',
                                       10)
        picture_q = client.subscribe(Image, f'{ns}/annotated', 10) \
            if args.task != 'detect' else None
        pub = client.publisher(Image, '/image', 10)
        if not client.change_state('activate'):
            print('activate FAILED:\n' + _errors(node.output()))
            return 1
        info = label_q.get(timeout=10.0)
        labels = {c.class_id: c.class_name for c in info.class_map} if info else {}
        done = 0
        if args.track:
            print(f'tracking ({args.track}): the images are frames of one camera; as with '
                  "Ultralytics' model.track, an object first seen after the first frame is "
                  'published from the frame that confirms its track, and the tracker pairs '
                  'boxes by position whatever their class', flush=True)
        for index, path in enumerate(images):
            bgr = cv2.imread(str(path))
            if bgr is None:
                print(f'{path}: cannot read, skipped')
                continue
            msg = numpy_to_image(bgr, 'bgr8')
            # Tracking follows one camera: one frame_id, stamps going forward.
            msg.header.frame_id = 'demo' if args.track else f'demo_{index}'
            msg.header.stamp = client.node.get_clock().now().to_msg()
            result = publish_until_answered(pub, msg, det_q, timeout=30.0, resend_every=1.5,
                                            match=lambda m: m.header == msg.header)
            if result is None:
                print(f'{path.name}: no {answer_topic} message came back; ' + _silence(node))
                return 1
            if args.task == 'classify':
                print(f'{path.name}: top {len(result.results)} classes')
                print('\n'.join(format_classes(result, labels)))
                annotated = draw_classes(bgr, result, labels)
            else:
                print(f'{path.name}: {len(result.detections)} detections')
                print('\n'.join(format_detections(result, labels, bool(args.track))))
                annotated = draw(bgr, result, labels, tracked=bool(args.track))
            png = args.out / f'{path.stem}_{answer_topic}.png'
            cv2.imwrite(str(png), annotated)
            print(f'  annotated image: {png}')
            if picture_q is not None:
                picture = picture_q.get(30.0, lambda m: m.header == msg.header)
                if picture is None:
                    print(f'{path.name}: no annotated image came back; ' + _silence(node))
                    return 1
                drawn = args.out / f'{path.stem}_{args.task}.png'
                cv2.imwrite(str(drawn), image_to_numpy(picture))
                print(f"  the node's annotated image ({args.task}): {drawn}")
            if depth_q is not None:
                colored = depth_q.get(30.0, lambda m: m.header == msg.header)
                if colored is None:
                    print(f'{path.name}: no depth image came back; ' + _silence(node))
                    return 1
                rgb = image_to_numpy(colored)
                side = args.out / f'{path.stem}_{answer_topic}_depth.png'
                cv2.imwrite(str(side), np.hstack([annotated, rgb[:, :, ::-1]]))
                print(f'  depth ({depth}, colourised, near is warm) beside it: {side}')
            done += 1
        client.change_state('deactivate')
        client.change_state('cleanup')
        client.change_state('shutdown')
        return 0 if done else 1
    finally:
        client.close()
        node.stop()


def _silence(node: NodeProcess) -> str:
    """Say what the node was doing when an answer did not come: exited, or its last lines."""
    code = node.process.poll()
    state = f'the node exited with code {code}' if code is not None else 'the node is running'
    tail = node.output().splitlines()[-12:]
    return f'{state}; the last lines of {node.log_path}:\n' + '\n'.join(tail)


def _errors(log: str) -> str:
    lines = [ln for ln in log.splitlines() if 'ERROR' in ln or 'error' in ln]
    return '\n'.join(lines[-10:]) or log[-2000:]


if __name__ == '__main__':
    sys.exit(main())
