"""One node, several cameras (``image_topics``), over real rclpy and DDS.

Each camera's results go to its own namespace with its own frame's header, never to another
camera's topics, also when the cameras send different image sizes and their frames run in one
batch; results equal the model's on each frame alone; a camera that sends nothing holds back
none of the others; names that would mix cameras are refused in one line.
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

from node_harness import Harness  # noqa: E402
from vision_nodes.manifest import resolve_manifest  # noqa: E402
from vision_nodes.pipeline import build_pipeline  # noqa: E402
from vision_nodes.ros.image_input import numpy_to_image  # noqa: E402
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


def _params(model_dir, cache, **extra):
    return {'model_dir': str(model_dir), 'engine_cache_dir': str(cache), 'backend': 'onnx',
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


def test_each_camera_gets_its_own_results_in_its_namespace(model_dir, engine_cache_dir,
                                                           images):
    """Three cameras of three sizes, frames sent together: every detection message on
    /<camera>/detections carries that camera's frame (frame_id, stamp) and the boxes the
    model finds on that frame alone."""
    h = Harness(_params(model_dir, engine_cache_dir, batch_window=50.0), 'vn_multicam')
    reference = build_pipeline(resolve_manifest('yolov8n'), 'onnx', model_dir=str(model_dir),
                               cache_dir=engine_cache_dir)
    try:
        answers, pubs = _activate(h)
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

    from vision_nodes.ros.compressed_input import numpy_to_compressed

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
