"""Launch vision_node for object detection (a lifecycle node, configured and activated).

    ros2 launch vision_nodes detect.launch.py --show-args
    ros2 launch vision_nodes detect.launch.py backend:=onnx image_topic:=/camera/image_raw

Subscribes to ``image_topic`` (sensor_msgs/Image) and publishes vision_msgs/Detection2DArray
on ``detections_topic`` and vision_msgs/LabelInfo (transient local) on ``label_info``.
Parameters come from ``params_file`` (default: share/vision_nodes/config/detect.yaml); the
model/backend/model_dir/engine_cache_dir launch arguments override it when given, and the
launch defaults (model yolov8n, backend auto) apply only where neither sets a value. With
``autostart:=true`` the launch configures the node when its process starts and activates it
once configured; a failed configure is logged and leaves the node up, unconfigured.
"""

from vision_nodes.ros.process.launch_arguments import Output, package_share_file
from vision_nodes.ros.process.launch_description import vision_launch_description


def generate_launch_description():
    """Arguments plus one lifecycle vision_node running a detection model."""
    return vision_launch_description(
        task='detect',
        default_model='yolov8n',
        default_params_file=package_share_file('config/detect.yaml', __file__),
        outputs=(Output('detections', 'Output topic, vision_msgs/Detection2DArray'),),
    )
