"""Launch one vision_node running a detector and a depth model on the same camera.

    ros2 launch vision_nodes detect_depth.launch.py --show-args
    ros2 launch vision_nodes detect_depth.launch.py image_topic:=/camera/image_raw \
        models:=[yolov8n,yolo26n_depth] model_dir:=/path/to/weights

Both models share one image subscription, one conversion per frame and one backend (the
best one both support here, with ``backend:=auto``). Their outputs and live parameters are
namespaced by model name: ``yolov8n/detections``, ``yolov8n/label_info``,
``depth_anything_v2_small/depth/relative`` (or ``<name>/depth`` for a metric model),
``<name>/depth/colored``; ``ros2 param set /vision_node yolov8n.confidence_threshold 0.5``.
Lower latency and memory than two nodes (docs/benchmarks.md).
"""

from vision_nodes.ros.process.launch_description import vision_launch_description


def generate_launch_description():
    """Arguments plus one lifecycle vision_node running detection and depth."""
    return vision_launch_description(
        task='detection + depth',
        default_model='yolov8n',
        default_models=['yolov8n', 'depth_anything_v2_small'],
        default_params_file='',
        outputs=(),
    )
