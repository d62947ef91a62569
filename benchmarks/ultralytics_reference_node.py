#!/usr/bin/env python3
"""Reference for the benchmark: Ultralytics ``predict`` wrapped in a minimal ROS node.

What a typical ROS integration of Ultralytics does per frame: Image → NumPy array →
``YOLO(model).predict`` → Detection2DArray. Used only by ``bench_detect.py`` so that the node
path of vision_nodes can be compared with an Ultralytics node over the same DDS path.

    python benchmarks/ultralytics_reference_node.py MODEL.onnx [--ros-args ...]
"""

from __future__ import annotations

import sys

import numpy as np
import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image
from ultralytics import YOLO
from vision_msgs.msg import Detection2D, Detection2DArray, ObjectHypothesisWithPose

from vision_nodes.platform.allocator import keep_freed_buffers
from vision_nodes.ros.inputs.conversion import image_to_numpy


def main() -> None:
    """Serve ``image`` → ``detections`` with Ultralytics until interrupted."""
    args = rclpy.utilities.remove_ros_args(sys.argv)
    keep_freed_buffers()  # as vision_node does, so the comparison is about the rest
    rclpy.init()
    node = rclpy.create_node('ultralytics_reference')
    model = YOLO(args[1], task='detect')
    pub = node.create_publisher(Detection2DArray, 'detections', 10)

    def on_image(msg: Image) -> None:
        image = np.ascontiguousarray(image_to_numpy(msg))
        result = model.predict(image, imgsz=640, conf=0.25, iou=0.45, verbose=False,
                               device='cpu')[0]
        out = Detection2DArray(header=msg.header)
        for (x1, y1, x2, y2), score, cls in zip(result.boxes.xyxy.tolist(),
                                                result.boxes.conf.tolist(),
                                                result.boxes.cls.tolist()):
            det = Detection2D(header=msg.header)
            det.bbox.center.position.x, det.bbox.center.position.y = (x1 + x2) / 2, (y1 + y2) / 2
            det.bbox.size_x, det.bbox.size_y = x2 - x1, y2 - y1
            hyp = ObjectHypothesisWithPose()
            hyp.hypothesis.class_id, hyp.hypothesis.score = str(int(cls)), score
            det.results = [hyp]
            out.detections.append(det)
        pub.publish(out)

    node.create_subscription(Image, 'image', on_image,
                             QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE))
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == '__main__':
    main()
