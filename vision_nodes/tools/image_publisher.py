"""Publish an image file as a camera would: a fixed rate, a chosen QoS, fresh stamps.

    python -m vision_nodes.tools.image_publisher bus.jpg --rate 30 --seconds 10
    python -m vision_nodes.tools.image_publisher bus.jpg --reliability best_effort --compressed

Useful to try a node without a camera, and used by the tests and benchmarks as a camera in
a process of its own (a publisher in the measuring process would share its interpreter).
Each message gets the current time as its stamp and ``--frame-id`` (default ``camera``) as
its frame id, the same on every frame as a camera driver's optical frame: a node's tracker
starts afresh whenever the frame id changes.
"""

from __future__ import annotations

import argparse
import sys
import time


def main(argv: list[str] | None = None) -> int:
    """Publish until ``--seconds`` pass (or forever); return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('image', help='an image file OpenCV can read')
    parser.add_argument('--topic', default='image')
    parser.add_argument('--frame-id', default='camera',
                        help="every message's header.frame_id (the camera's optical frame)")
    parser.add_argument('--rate', type=float, default=30.0, help='messages per second')
    parser.add_argument('--seconds', type=float, default=0.0, help='0: until interrupted')
    parser.add_argument('--reliability', choices=('reliable', 'best_effort'),
                        default='reliable')
    parser.add_argument('--encoding', default='bgr8', choices=('bgr8', 'rgb8', 'mono8'))
    parser.add_argument('--compressed', action='store_true',
                        help='publish sensor_msgs/CompressedImage (JPEG) on <topic>/compressed')
    parser.add_argument('--quality', type=int, default=90, help='JPEG quality')
    args, ros_args = parser.parse_known_args(argv)

    import cv2
    import numpy as np
    import rclpy
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import CompressedImage, Image

    from ..ros.inputs.conversion import numpy_to_image
    from ..ros.process.startup import start_node

    bgr = cv2.imread(args.image)
    if bgr is None:
        print(f'cannot read {args.image}', file=sys.stderr)
        return 2
    array = {'bgr8': bgr, 'rgb8': bgr[:, :, ::-1],
             'mono8': cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)}[args.encoding]
    if args.compressed:
        ok, jpeg = cv2.imencode('.jpg', bgr, [cv2.IMWRITE_JPEG_QUALITY, args.quality])
        msg = CompressedImage(format='bgr8; jpeg compressed bgr8')
        msg.data = np.ascontiguousarray(jpeg).tobytes()
        topic, msg_type = f'{args.topic}/compressed', CompressedImage
    else:
        msg = numpy_to_image(np.ascontiguousarray(array), args.encoding)
        topic, msg_type = args.topic, Image
    # A ROS argument rcl refuses ends the process with one line and exit code 2.
    node = start_node(lambda: rclpy.create_node('image_publisher'),
                      ['--ros-args', *ros_args] if ros_args else None, 'image_publisher')
    msg.header.frame_id = args.frame_id
    reliability = {'reliable': ReliabilityPolicy.RELIABLE,
                   'best_effort': ReliabilityPolicy.BEST_EFFORT}[args.reliability]
    pub = node.create_publisher(msg_type, topic, QoSProfile(
        depth=1, history=HistoryPolicy.KEEP_LAST, reliability=reliability))
    period = 1.0 / args.rate
    end = time.monotonic() + args.seconds if args.seconds > 0 else float('inf')
    sent = 0
    next_at = time.monotonic()
    try:
        while time.monotonic() < end:
            msg.header.stamp = node.get_clock().now().to_msg()
            pub.publish(msg)
            sent += 1
            next_at += period
            time.sleep(max(0.0, next_at - time.monotonic()))
    except KeyboardInterrupt:
        pass
    finally:
        print(f'image_publisher: sent {sent} messages on {pub.topic_name}', flush=True)
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
