"""One node, several cameras (``image_topics``), over real rclpy and DDS.

Each camera's results go to its own namespace with its own frame's header, never to another
camera's topics, also when the cameras send different image sizes and their frames run in one
batch; results equal the model's on each frame alone; a camera that sends nothing holds back
none of the others; names that would mix cameras are refused in one line; 3D boxes use each
camera's own camera_info and depth, and each camera has a tracker of its own.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy', reason='rclpy (ROS 2) is not installed')
pytest.importorskip('vision_msgs.msg', reason='vision_msgs is not built (scripts/setup_env.sh)')

from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402
from vision_msgs.msg import Detection2DArray  # noqa: E402

from camera_rig import pinhole_info  # noqa: E402
from node_harness import Harness  # noqa: E402
from vision_nodes.tasks import resolve_manifest  # noqa: E402
from vision_nodes.pipeline import build_pipeline  # noqa: E402
from vision_nodes.stage_times import STAGES, stage_key  # noqa: E402
from vision_nodes.platform.cpu import cpu_info  # noqa: E402
from vision_nodes.ros.inputs.conversion import numpy_to_image  # noqa: E402
from vision_nodes.tasks.detect import DetectionParams  # noqa: E402
from vision_nodes.tools.client import publish_until_answered, wait_for  # noqa: E402

CAMERAS = ('front', 'rear', 'side')


@pytest.fixture(scope='module')
def images(bus_bgr, assets) -> dict[str, np.ndarray]:
    """Three sizes: bus (1080 x 810), zidane (720 x 1280), bus cut to 480 x 640."""
    import cv2

    zidane = cv2.imread(str(assets / 'zidane.jpg'))
    return {'front': bus_bgr, 'rear': zidane,
            'side': np.ascontiguousarray(bus_bgr[300:780, 100:740])}


def _params(model_dir, cache, backend='onnx', **extra):
    return {'model_dir': str(model_dir), 'engine_cache_dir': str(cache), 'backend': backend,
            'image_topics': [f'/{c}/image_raw' for c in CAMERAS], **extra}


def _activate(h, topics=CAMERAS):
    c = h.client
    assert c.change_state('configure', timeout=300) and c.change_state('activate')
    answers = {n: c.subscribe(Detection2DArray, f'/{n}/detections', 50) for n in topics}
    pubs = {n: c.publisher(Image, f'/{n}/image_raw', 10) for n in topics}
    for n in topics:
        assert wait_for(lambda n=n: c.node.count_subscribers(f'/{n}/image_raw') == 1, 30.0)
    return answers, pubs


def _msg(image: np.ndarray, frame_id: str) -> Image:
    msg = numpy_to_image(image, 'bgr8')
    msg.header.frame_id = frame_id
    return msg


@pytest.mark.parametrize('backend', ['onnx', 'openvino'])
def test_each_camera_gets_its_own_results_in_its_namespace(model_dir, engine_cache_dir,
                                                           images, backend):
    """Three cameras of three sizes, frames sent together: every detection message on
    /<camera>/detections carries that camera's frame (frame_id, stamp) and the boxes the
    model finds on that frame alone. ONNX Runtime runs them as batches; OpenVINO on a CPU as
    frames side by side, one worker per stream."""
    if backend == 'openvino':
        pytest.importorskip('openvino', reason='OpenVINO is not installed')
    h = Harness(_params(model_dir, engine_cache_dir, backend, batch_window=50.0),
                'vn_multicam')
    reference = build_pipeline(resolve_manifest('yolov8n'), backend, model_dir=str(model_dir),
                               cache_dir=engine_cache_dir)
    try:
        answers, pubs = _activate(h)
        streams = min(len(CAMERAS), cpu_info().logical_cores)  # OpenVINO on a CPU
        how = f'frames side by side, {streams} at once' if backend == 'openvino' and \
            streams > 1 else 'batches of up to 3 frames'
        assert h.node.wait_for_output(how), h.node.output()[-2000:]
        for n in CAMERAS:  # discovery: each camera answered once
            got = publish_until_answered(pubs[n], _msg(images[n], f'{n}_hello'), answers[n])
            assert got is not None and got.header.frame_id.startswith(n)
        sent = {n: [] for n in CAMERAS}
        for round_ in range(6):
            threads = []
            for n in CAMERAS:
                msg = _msg(images[n], f'{n}_{round_}')
                msg.header.stamp.sec = 1000 + round_
                sent[n].append(msg.header.frame_id)
                threads.append(threading.Thread(target=pubs[n].publish, args=(msg,)))
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            last = {n: answers[n].get(30.0, lambda m, n=n, r=round_: m.header.frame_id ==
                                      f'{n}_{r}') for n in CAMERAS}
            if all(v is not None for v in last.values()):
                break
        for n in CAMERAS:
            expected = len(reference.process(images[n], 'bgr8', DetectionParams()))
            seen = []
            while (m := answers[n].get(2.0)) is not None:
                seen.append(m)
            seen += [m for m in [last[n]] if m is not None]
            assert seen, n
            for m in seen:
                assert m.header.frame_id.split('_')[0] == n, (n, m.header.frame_id)
                assert m.header.frame_id in sent[n] + [f'{n}_hello']
                if m.header.frame_id != f'{n}_hello':
                    assert m.header.stamp.sec == 1000 + int(m.header.frame_id.split('_')[1])
                assert len(m.detections) == expected, (n, len(m.detections), expected)
    finally:
        reference.close()
        h.close()


def test_a_silent_camera_holds_back_no_other_and_each_has_a_diagnostics_entry(
        model_dir, engine_cache_dir, images):
    """Only /front sends (a long batch window): its frames are answered; /diagnostics has
    an entry per camera, the silent ones saying so; after deactivate and activate the
    cameras are taken again."""
    h = Harness(_params(model_dir, engine_cache_dir, batch_window=300.0), 'vn_multicam_stall')
    try:
        answers, pubs = _activate(h, ('front',))
        diagnostics = h.client.subscribe(DiagnosticArray, '/diagnostics', 50)
        for i in range(3):
            got = publish_until_answered(pubs['front'], _msg(images['front'], f'front_{i}'),
                                         answers['front'])
            assert got is not None and len(got.detections) > 0
        names = {}

        def entries(msg) -> bool:
            names.clear()
            names.update({s.name: {v.key: v.value for v in s.values} for s in msg.status
                          if s.name.startswith('/vn_multicam')})
            front = names.get('/vn_multicam_stall: /front/image_raw', {})
            return len(names) == 1 + len(CAMERAS) and int(front['frames processed']) >= 3
        assert diagnostics.get(30.0, entries) is not None, sorted(names)
        assert names['/vn_multicam_stall: /rear/image_raw']['frames received'] == '0'
        assert int(names['/vn_multicam_stall']['frames processed']) >= 3
        # Where the frames' time went, on the node's entry and on the camera's own; the
        # batch window (300 ms, no second camera) is the frame's hand-off to the batcher.
        for name in ('/vn_multicam_stall', '/vn_multicam_stall: /front/image_raw'):
            stages = {stage: float(names[name][stage_key(stage)]) for stage in STAGES}
            assert all(ms >= 0 for ms in stages.values()), (name, stages)
            assert stages['inference'] > 0 and stages['dds_in'] > 0, (name, stages)
            assert stages['handoff'] >= 250, (name, stages)
        assert names['/vn_multicam_stall: /rear/image_raw'][stage_key('inference')] == 'n/a'
        c = h.client  # deactivate drops every camera; activate takes them again
        assert c.change_state('deactivate')
        assert wait_for(lambda: c.node.count_subscribers('/front/image_raw') == 0, 30.0)
        assert c.change_state('activate')
        got = publish_until_answered(pubs['front'], _msg(images['front'], 'front_again'),
                                     answers['front'])
        assert got is not None and got.header.frame_id == 'front_again'
    finally:
        h.close()


def test_cameras_sharing_a_namespace_are_refused_then_output_namespaces_fixes_it(
        model_dir, engine_cache_dir, images):
    """/cam/left and /cam/right would both publish /cam/detections: configure fails in one
    line naming output_namespaces; with it set, each gets its own topics."""
    h = Harness(_params(model_dir, engine_cache_dir,
                        image_topics=['/cam/left', '/cam/right']), 'vn_multicam_clash')
    try:
        c = h.client
        assert not c.change_state('configure', timeout=300)
        assert h.node.wait_for_output('set output_namespaces', 30.0)
        assert c.get_state() == 'unconfigured'
        assert c.set_parameters(output_namespaces=['/left', '/right'])[0].successful
        assert c.change_state('configure', timeout=300) and c.change_state('activate')
        left = c.subscribe(Detection2DArray, '/left/detections', 10)
        pub = c.publisher(Image, '/cam/left', 10)
        assert wait_for(lambda: c.node.count_subscribers('/cam/left') == 1, 30.0)
        assert publish_until_answered(pub, _msg(images['front'], 'l'), left) is not None
    finally:
        h.close()


def test_compressed_cameras_in_lazy_mode_take_only_the_wanted_camera(model_dir,
                                                                     engine_cache_dir, images):
    """image_transport compressed: each camera subscribes <topic>/compressed; lazy: only the
    camera whose own detections have a subscriber is taken."""
    from sensor_msgs.msg import CompressedImage

    from vision_nodes.ros.inputs.conversion import numpy_to_compressed

    h = Harness(_params(model_dir, engine_cache_dir, image_transport='compressed', lazy=True,
                        image_topics=['/front/image_raw', '/rear/image_raw']),
                'vn_multicam_lazy')
    try:
        c = h.client
        assert c.change_state('configure', timeout=300) and c.change_state('activate')
        front = c.subscribe(Detection2DArray, '/front/detections', 10)
        pub = c.publisher(CompressedImage, '/front/image_raw/compressed', 10)
        assert wait_for(lambda: c.node.count_subscribers('/front/image_raw/compressed') == 1,
                        30.0)
        assert c.node.count_subscribers('/rear/image_raw/compressed') == 0
        msg = numpy_to_compressed(images['side'], 'bgr8', 'jpeg')
        msg.header.frame_id = 'front_jpeg'
        got = publish_until_answered(pub, msg, front)
        assert got is not None and len(got.detections) > 0
        assert c.node.count_subscribers('/rear/image_raw/compressed') == 0
        c.subscribe(Detection2DArray, '/rear/detections', 10)
        assert wait_for(lambda: c.node.count_subscribers('/rear/image_raw/compressed') == 1,
                        30.0)
    finally:
        h.close()


def test_several_models_keep_their_prefix_inside_each_camera_namespace(
        model_dir, engine_cache_dir, images, tmp_path):
    """models [people, things] and two cameras: /front/people/detections,
    /rear/things/detections..., each with its camera's frames only."""
    from node_harness import manifest_copy

    people, things = (manifest_copy(tmp_path, n) for n in ('people', 'things'))
    h = Harness(_params(model_dir, engine_cache_dir, models=[people, things],
                        image_topics=['/front/image_raw', '/rear/image_raw']),
                'vn_multicam_models')
    try:
        c = h.client
        assert c.change_state('configure', timeout=300) and c.change_state('activate')
        answers = {(n, m): c.subscribe(Detection2DArray, f'/{n}/{m}/detections', 10)
                   for n in ('front', 'rear') for m in ('people', 'things')}
        pubs = {n: c.publisher(Image, f'/{n}/image_raw', 10) for n in ('front', 'rear')}
        for n in ('front', 'rear'):
            assert wait_for(lambda n=n: c.node.count_subscribers(f'/{n}/image_raw') == 1, 30.0)
            got = publish_until_answered(pubs[n], _msg(images[n], f'{n}_x'),
                                         answers[(n, 'people')])
            assert got is not None
            other = answers[(n, 'things')].get(30.0, lambda m, n=n: m.header.frame_id == f'{n}_x')
            assert other is not None and len(other.detections) == len(got.detections)
        for (n, _), queue in answers.items():
            while (m := queue.get(0.5)) is not None:
                assert m.header.frame_id.startswith(n)
    finally:
        h.close()


def _plane(width: int, height: int, metres: float, header) -> Image:
    msg = numpy_to_image(np.full((height, width, 1), metres, np.float32), '32FC1')
    msg.header = header
    return msg


def test_3d_reads_each_cameras_own_camera_info_and_depth_and_tracks_per_camera(
        model_dir, engine_cache_dir, images):
    """Two cameras, each with its own K and depth plane beside its image topic
    (/<camera>/camera_info, /<camera>/aligned_depth), and a decoy K and depth on the node's
    own camera_info and aligned_depth: each camera's 3D boxes are at its own depth and
    back-projected with its own K. The trackers are per camera: the same scene seen by both
    (one frame_id) gets ids 1..n on each camera, kept on the next frames."""
    from sensor_msgs.msg import CameraInfo
    from vision_msgs.msg import Detection3DArray

    own = {'front': (900.0, 3.0), 'rear': (450.0, 2.0)}  # fx = fy, plane distance (m)
    h = Harness(_params(model_dir, engine_cache_dir, depth_source='topic',
                        depth_topic='aligned_depth', tracker='bytetrack',
                        image_topics=['/front/image_raw', '/rear/image_raw']), 'vn_multicam_3d')
    try:
        c = h.client
        assert c.change_state('configure', timeout=300) and c.change_state('activate')
        image = images['side']
        height, width = image.shape[:2]
        decoys = [(c.publisher(CameraInfo, '/camera_info', 10),
                   pinhole_info(width, height, 2000.0)),
                  (c.publisher(Image, '/aligned_depth', 10), None)]
        cams = {n: {'dets': c.subscribe(Detection2DArray, f'/{n}/detections', 20),
                    'dets3': c.subscribe(Detection3DArray, f'/{n}/detections_3d', 20),
                    'image': c.publisher(Image, f'/{n}/image_raw', 10),
                    'depth': c.publisher(Image, f'/{n}/aligned_depth', 10),
                    'info': c.publisher(CameraInfo, f'/{n}/camera_info', 10)} for n in own}
        for n, cam in cams.items():
            assert wait_for(lambda cam=cam: cam['depth'].get_subscription_count() > 0
                            and cam['info'].get_subscription_count() > 0, 30.0), n
        ids = {n: [] for n in own}
        for sec in (500, 501, 502):
            for n, (fx, z) in own.items():
                cam = cams[n]
                msg = _msg(image, 'cam_optical')
                msg.header.stamp.sec = sec
                decoys[1] = (decoys[1][0], _plane(width, height, 5.0, msg.header))
                extra = decoys + [(cam['info'], pinhole_info(width, height, fx)),
                                  (cam['depth'], _plane(width, height, z, msg.header))]

                def send(extra=extra, cam=cam, msg=msg):
                    for pub, other in extra:
                        pub.publish(other)
                    cam['image'].publish(msg)
                same = (lambda m, s=sec: m.header.stamp.sec == s)
                got3 = None
                for _ in range(30):
                    send()
                    got3 = cam['dets3'].get(2.0, same)
                    if got3 is not None:
                        break
                assert got3 is not None, h.node.output()[-3000:]
                got2 = cam['dets'].get(30.0, same)
                assert got2 is not None and len(got2.detections) >= 2
                assert [d.id for d in got3.detections] == [d.id for d in got2.detections]
                ids[n].append([d.id for d in got2.detections])
                cx, cy = width / 2 - 0.5, height / 2 - 0.5
                for d2, d3 in zip(got2.detections, got3.detections):
                    u, v = d2.bbox.center.position.x - 0.5, d2.bbox.center.position.y - 0.5
                    centre = d3.bbox.center.position
                    assert [centre.x, centre.y, centre.z] == pytest.approx(
                        [(u - cx) * z / fx, (v - cy) * z / fx, z], abs=0.05), n
                    assert d3.bbox.size.x == pytest.approx(d2.bbox.size_x * z / fx, abs=0.05)
        for n in own:
            first = ids[n][0]
            assert sorted(map(int, first)) == list(range(1, len(first) + 1)), (n, ids[n])
            assert all(later == first for later in ids[n][1:]), (n, ids[n])
    finally:
        h.close()
