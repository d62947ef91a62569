"""Serialized images read in place (ros/wire/cdr_reader.py): equal to rclpy's, and unbreakable.

Parity: for many random ``Image`` and ``CompressedImage`` messages, what :mod:`~vision_nodes.ros
.cdr` reads from ``rclpy.serialization.serialize_message``'s bytes (and from the same message
big endian, and with the XCDR2 encapsulation) equals rclpy's ``deserialize_message`` of them,
header included; what it writes (``encode_image``, the node's depth, mask and annotated
images) deserialises to the message the typed builders make. Fuzz: truncations, bit flips,
forged lengths and random bytes of real messages end in a frame or in one bounded line of
``ImageConversionError``, and any view handed on lies inside the bytes received.
"""

from __future__ import annotations

import array
import os
import struct

import numpy as np
import pytest

pytest.importorskip('rclpy', reason='rclpy (ROS 2) is not installed')

from builtin_interfaces.msg import Time  # noqa: E402
from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402
from sensor_msgs.msg import CompressedImage, Image  # noqa: E402
from std_msgs.msg import Header  # noqa: E402

from time_limit import time_limit  # noqa: E402
from vision_nodes.images import ImageConversionError  # noqa: E402
from vision_nodes.limits import MAX_CDR_STRING_BYTES, MAX_IMAGE_BYTES  # noqa: E402
from vision_nodes.ros.wire.cdr_reader import CdrError, read_compressed, read_image  # noqa: E402
from vision_nodes.ros.inputs.conversion import compressed_to_numpy  # noqa: E402
from vision_nodes.ros.inputs.conversion import image_to_array, image_to_numpy  # noqa: E402
from vision_nodes.ros.inputs.conversion import numpy_to_image  # noqa: E402
from vision_nodes.ros.outputs.depth_outputs import colored_to_cdr, depth_to_cdr  # noqa: E402
from vision_nodes.ros.wire.image_cdr import encode_image  # noqa: E402
from vision_nodes.tasks.depth import DepthResult  # noqa: E402

from reference_messages import colored_to_msg, depth_to_msg  # noqa: E402

_TEXT = ['', 'a', 'ab', 'abc', 'camera', 'cäméra_🙂', 'x' * 257, 'rgb8', 'bgr8', '32FC1',
         'yuv422', 'mono16', 'jpeg', 'bgr8; jpeg compressed bgr8']
IMAGE_FIELDS = ('height', 'width', 'encoding', 'is_bigendian', 'step')
SCALE = max(1, int(os.environ.get('VISION_NODES_FUZZ_SCALE', '1')))


def check_message(error: BaseException) -> str:
    """Assert the message is one bounded line; return it."""
    message = str(error)
    assert message and '\n' not in message and len(message) <= 600, message[:2000]
    return message


def _random_header(rng: np.random.Generator) -> Header:
    sec = int(rng.integers(-2 ** 31, 2 ** 31))
    return Header(stamp=Time(sec=sec, nanosec=int(rng.integers(0, 10 ** 9))),
                  frame_id=str(rng.choice(_TEXT)))


def _random_image(rng: np.random.Generator) -> Image:
    msg = Image(header=_random_header(rng), encoding=str(rng.choice(_TEXT)))
    msg.height, msg.width = int(rng.integers(0, 9)), int(rng.integers(0, 9))
    msg.is_bigendian, msg.step = int(rng.integers(0, 2)), int(rng.integers(0, 40))
    msg.data = array.array('B', rng.integers(0, 256, int(rng.integers(0, 200)), np.uint8))
    return msg


def _random_compressed(rng: np.random.Generator) -> CompressedImage:
    msg = CompressedImage(header=_random_header(rng), format=str(rng.choice(_TEXT)))
    msg.data = array.array('B', rng.integers(0, 256, int(rng.integers(0, 200)), np.uint8))
    return msg


def _big_endian(fields: list[tuple[str, object]]) -> bytes:
    """Serialise ``(kind, value)`` fields as big-endian plain CDR (rclpy writes little only)."""
    out = bytearray(b'\x00\x00\x00\x00')
    for kind, value in fields:
        if kind in ('i', 'I', 'S', 'O'):
            out += bytes(-(len(out) - 4) % 4)
        if kind in ('i', 'I'):
            out += struct.pack('>' + kind, value)
        elif kind == 'B':
            out.append(value)
        elif kind == 'S':
            chars = value.encode('utf-8') + b'\0'
            out += struct.pack('>I', len(chars)) + chars
        else:
            out += struct.pack('>I', len(value)) + bytes(value)
    return bytes(out)


def _header_fields(header: Header) -> list[tuple[str, object]]:
    return [('i', header.stamp.sec), ('I', header.stamp.nanosec), ('S', header.frame_id)]


def _image_be(msg: Image) -> bytes:
    return _big_endian(_header_fields(msg.header) + [
        ('I', msg.height), ('I', msg.width), ('S', msg.encoding), ('B', msg.is_bigendian),
        ('I', msg.step), ('O', msg.data)])


def _compressed_be(msg: CompressedImage) -> bytes:
    return _big_endian(_header_fields(msg.header) + [('S', msg.format), ('O', msg.data)])


def _encodings(little: bytes, big: bytes) -> list[bytes]:
    """The message as CDR (little, big endian) and XCDR2 (same layout for these types)."""
    return [little, big, b'\x00\x07' + little[2:], b'\x00\x06' + big[2:]]


def _same_image(got, want: Image) -> None:
    assert got.header == want.header
    for field in IMAGE_FIELDS:
        assert getattr(got, field) == getattr(want, field), field
    assert bytes(got.data) == bytes(want.data)


def test_parsed_images_equal_rclpys() -> None:
    """Every field and the header, for random images in each byte order and encapsulation."""
    rng = np.random.default_rng(21)
    for _ in range(300 * SCALE):
        msg = _random_image(rng)
        for buf in _encodings(serialize_message(msg), _image_be(msg)):
            want = deserialize_message(buf, Image)
            assert want == msg
            _same_image(read_image(buf), want)


def test_parsed_compressed_images_equal_rclpys() -> None:
    """The same for CompressedImage: header, format and data."""
    rng = np.random.default_rng(22)
    for _ in range(300 * SCALE):
        msg = _random_compressed(rng)
        for buf in _encodings(serialize_message(msg), _compressed_be(msg)):
            want = deserialize_message(buf, CompressedImage)
            got = read_compressed(buf)
            assert want == msg and got.header == want.header and got.format == want.format
            assert bytes(got.data) == bytes(want.data)


def test_strings_read_as_rclpy_reads_them() -> None:
    """Bytes that are not UTF-8 become U+FFFD and a string ends at its first NUL, as in rclpy."""
    msg = Image(header=Header(frame_id='abcdef'), encoding='bgr8')
    buf = bytearray(serialize_message(msg))
    at = buf.find(b'abcdef')
    buf[at] = 0xFF
    buf[at + 3] = 0
    want = deserialize_message(bytes(buf), Image)
    assert want.header.frame_id == '\ufffdbc'
    assert read_image(bytes(buf)).header == want.header


def test_the_pixels_are_a_view_on_the_bytes() -> None:
    """The array the node converts points into the serialized bytes: no copy is made."""
    pixels = np.arange(4 * 6 * 3, dtype=np.uint8).reshape(4, 6, 3)
    buf = serialize_message(numpy_to_image(pixels, 'bgr8'))
    image, encoding = image_to_array(read_image(buf))
    assert encoding == 'bgr8' and np.array_equal(image, pixels)
    base = np.frombuffer(buf, np.uint8)
    assert np.shares_memory(image, base)


def test_encoded_images_equal_the_typed_messages() -> None:
    """What the node publishes as bytes deserialises to the message the typed path builds."""
    rng = np.random.default_rng(23)
    for _ in range(40 * SCALE):
        header = _random_header(rng)
        height, width = int(rng.integers(1, 40)), int(rng.integers(1, 40))
        depth = DepthResult(depth=rng.random((height, width), dtype=np.float32), metric=True,
                            output='depth')
        assert deserialize_message(depth_to_cdr(depth, header), Image) == \
            depth_to_msg(depth, header)
        rgb = rng.integers(0, 256, (height, width, 3), np.uint8)
        assert deserialize_message(colored_to_cdr(rgb, header), Image) == \
            colored_to_msg(rgb, header)
        mask = rng.integers(0, 2 ** 16, (height, width), np.uint16)
        assert deserialize_message(encode_image(mask, 'mono16', header), Image) == \
            numpy_to_image(mask, 'mono16', header)
        assert deserialize_message(encode_image(rgb, 'bgr8', header), Image) == \
            numpy_to_image(rgb, 'bgr8', header)
        # The byte order is the array's: big-endian values say so, and read back the same.
        swapped = deserialize_message(encode_image(mask.astype('>u2'), 'mono16', header), Image)
        assert swapped.is_bigendian == 1
        assert np.array_equal(image_to_numpy(swapped), mask)


def _within(view: memoryview, buf: bytes) -> bool:
    """Whether a memoryview handed on lies inside ``buf`` (no read past its end)."""
    base = np.frombuffer(buf, np.uint8)
    if view.nbytes == 0:
        return True
    arr = np.frombuffer(view, np.uint8)
    start = arr.__array_interface__['data'][0] - base.__array_interface__['data'][0]
    return view.obj is buf and 0 <= start and start + view.nbytes <= len(buf)


def _convert(buf: bytes, compressed: bool) -> None:
    """Read and convert fuzzed bytes as the node does: a frame, or one bounded line."""
    try:
        msg = read_compressed(buf) if compressed else read_image(buf)
    except CdrError as exc:
        check_message(exc)
        return
    assert _within(msg.data, buf)
    try:
        if compressed:
            compressed_to_numpy(msg)
        else:
            image, _ = image_to_array(msg)
            if image.size:
                assert np.shares_memory(image, np.frombuffer(buf, np.uint8)) or \
                    msg.encoding not in ('bgr8', 'rgb8', 'mono8')
    except ImageConversionError as exc:
        check_message(exc)


def _mutations(buf: bytes, rng: np.random.Generator):
    """Truncations, bit flips, forged uint32s and random bytes of ``buf``."""
    for cut in rng.integers(0, len(buf), 40):
        yield buf[:int(cut)]
    for _ in range(120):
        flipped = bytearray(buf)
        for at in rng.integers(0, len(buf), int(rng.integers(1, 6))):
            flipped[int(at)] ^= 1 << int(rng.integers(0, 8))
        yield bytes(flipped)
    for _ in range(60):
        forged = bytearray(buf)
        at = int(rng.integers(0, len(buf) // 4)) * 4
        forged[at:at + 4] = struct.pack(
            '<I', int(rng.choice([0, 1, 2 ** 31, 2 ** 32 - 1, len(buf), len(buf) + 1,
                                  int(rng.integers(0, 2 ** 32))])))
        yield bytes(forged[:len(buf)])
    for size in (0, 1, 3, 4, 8, 40, 400):
        yield rng.integers(0, 256, size, np.uint8).tobytes()
        yield b'\x00\x01\x00\x00' + rng.integers(0, 256, size, np.uint8).tobytes()


def test_fuzzed_serialized_images(bus_bgr) -> None:
    """Mutated real Image and CompressedImage bytes: a frame or one line, never past the end."""
    import cv2

    rng = np.random.default_rng(24)
    crop = np.ascontiguousarray(bus_bgr[:48, :64])
    header = Header(stamp=Time(sec=5, nanosec=6), frame_id='camera')
    raw = serialize_message(numpy_to_image(crop, 'bgr8', header))
    jpeg = CompressedImage(header=header, format='bgr8; jpeg compressed bgr8')
    jpeg.data = array.array('B', cv2.imencode('.jpg', crop)[1].tobytes())
    cases = [(raw, False), (serialize_message(jpeg), True)]
    with time_limit(120):
        for _ in range(SCALE):
            for buf, compressed in cases:
                for mutated in _mutations(buf, rng):
                    _convert(mutated, compressed)


@pytest.mark.parametrize('field, value, text', [
    ('data', 2 ** 32 - 1, f'more than {MAX_IMAGE_BYTES} B'),
    ('data', 10 ** 6, 'are left'),
    ('frame_id', MAX_CDR_STRING_BYTES + 2, f'more than {MAX_CDR_STRING_BYTES + 1} B'),
    ('encoding', 2 ** 31, 'encoding claims'),
    ('height', 2 ** 20, 'larger than this node accepts'),
])
def test_hostile_lengths_are_refused_before_any_view(field: str, value: int, text: str) -> None:
    """A length or size the bytes cannot hold, or beyond the bounds, is one line naming it."""
    msg = numpy_to_image(np.zeros((2, 3, 3), np.uint8), 'bgr8', Header(frame_id='cam'))
    buf = bytearray(serialize_message(msg))
    at = {'frame_id': 12, 'height': 20, 'encoding': 28, 'data': 44}[field]
    buf[at:at + 4] = struct.pack('<I', value)
    if field == 'height':
        buf[24:28] = struct.pack('<I', 2 ** 20)
    with pytest.raises(CdrError) as info:
        read_image(bytes(buf))
    assert text in check_message(info.value)


def test_wrong_encapsulation_and_types_are_refused() -> None:
    """Not CDR, too short, or not bytes at all: one line each."""
    good = serialize_message(Image())
    for buf, text in ((b'\x00\x03' + good[2:], 'encapsulation 0003'), (b'\x00\x01', 'shorter'),
                      (good[:7], 'truncated in header.stamp.sec')):
        with pytest.raises(CdrError) as info:
            read_image(buf)
        assert text in check_message(info.value)
    with pytest.raises(CdrError, match='expected serialized bytes'):
        read_image(Image())


def test_encoded_keypoints_equal_the_typed_message() -> None:
    """Keypoints2DArray bytes (no object per keypoint) deserialise to the typed message."""
    pytest.importorskip('vision_nodes_msgs.msg', reason='vision_nodes_msgs is not built')
    from vision_nodes_msgs.msg import Keypoints2DArray

    from reference_messages import keypoints_to_msg
    from vision_nodes.ros.outputs.pose_outputs import keypoints_to_cdr
    from vision_nodes.tasks.instances import PoseResult

    rng = np.random.default_rng(25)
    for _ in range(60 * SCALE):
        count, points = int(rng.integers(0, 30)), int(rng.choice([0, 1, 5, 17]))
        names = tuple(str(rng.choice(_TEXT)) for _ in range(points))
        result = PoseResult(boxes=np.zeros((count, 4), np.float32),
                            scores=np.zeros(count, np.float32),
                            class_ids=np.zeros(count, np.int64),
                            keypoints=(rng.random((count, points, 3)) * 2000 - 100)
                            .astype(np.float32), names=names)
        ids = [str(rng.choice(_TEXT)) if rng.random() < 0.3 else str(int(rng.integers(0, 10 ** 6)))
               for _ in range(count)]
        header = _random_header(rng)
        got = deserialize_message(keypoints_to_cdr(result, header, ids), Keypoints2DArray)
        assert got == keypoints_to_msg(result, header, ids)


def test_encoded_3d_detections_equal_the_typed_message() -> None:
    """Detection3DArray bytes deserialise to the typed message: ids, classes, scores, boxes."""
    from vision_msgs.msg import Detection3DArray

    from vision_nodes.geometry3d import Boxes3D
    from reference_messages import detections_3d_to_msg
    from vision_nodes.ros.outputs.detection3d_outputs import detections_3d_to_cdr
    from vision_nodes.tasks.detect import Detections

    rng = np.random.default_rng(26)
    for _ in range(60 * SCALE):
        count = int(rng.integers(0, 40))
        tracked = rng.random() < 0.5
        dets = Detections(rng.random((count, 4)).astype(np.float32),
                          rng.random(count).astype(np.float32),
                          rng.integers(0, int(rng.choice([2, 80, 10 ** 6])), count),
                          track_ids=rng.integers(1, 10 ** int(rng.integers(1, 10)), count)
                          if tracked else None)
        index = np.sort(rng.choice(count, int(rng.integers(0, count + 1)), replace=False))
        boxes = Boxes3D(index.astype(np.int64), rng.normal(size=(len(index), 3)) * 10,
                        rng.random((len(index), 3)) * 5)
        header = _random_header(rng)
        got = deserialize_message(detections_3d_to_cdr(dets, boxes, header), Detection3DArray)
        assert got == detections_3d_to_msg(dets, boxes, header)
