"""Launch vision_node for monocular depth estimation (a lifecycle node).

    ros2 launch vision_nodes depth.launch.py --show-args
    ros2 launch vision_nodes depth.launch.py image_topic:=/camera/image_raw depth_topic:=depth

Subscribes to ``image_topic`` (sensor_msgs/Image) and publishes the depth image on
``depth_topic``. The default model, depth_anything_v2_small, has no manifest in this version:
configure fails with "no manifest named 'depth_anything_v2_small'", which the launch logs;
the node stays up, unconfigured. Pass ``model:=<manifest name or path>`` for another model.
Parameters: the launch defaults (model depth_anything_v2_small, backend onnx), then
``params_file`` (default: none), then the model/backend/model_dir/engine_cache_dir launch
arguments that are given; later ones win.
"""

from vision_nodes.ros.launch_description import Output, vision_launch_description


def generate_launch_description():
    """Arguments plus one lifecycle vision_node running a depth model."""
    return vision_launch_description(
        task='depth',
        default_model='depth_anything_v2_small',
        default_params_file='',
        outputs=(Output('depth', 'Output depth image topic, sensor_msgs/Image'),),
    )
