"""Launch vision_node for monocular depth estimation (a lifecycle node, REP 118 outputs).

    ros2 launch vision_nodes depth.launch.py --show-args
    ros2 launch vision_nodes depth.launch.py image_topic:=/camera/image_raw \
        model_dir:=/path/to/weights

Subscribes to ``image_topic`` (sensor_msgs/Image, or CompressedImage with
``image_transport:=compressed``). A metric model (e.g. ``model:=yolo26n_depth`` or
``depth_anything_v2_metric_indoor_small``) publishes ``depth/image`` (32FC1, metres, NaN where
invalid); a relative one (the default, ``depth_anything_v2_small``) publishes
``depth/relative`` (32FC1, unitless) and never ``depth/image``. Both publish ``depth/colored``
(rgb8) while someone subscribes, and with ``publish_camera_info: true`` (parameters file)
``depth/camera_info`` beside the image, for depth_image_proc. ``depth_namespace:=/cam/depth``
moves them all. The weights are the user's own (see the manifests
in config/models): nothing is downloaded. Parameters: the launch defaults (model
depth_anything_v2_small, backend auto), then ``params_file`` (default: none), then the
model/models/backend/model_dir/engine_cache_dir/image_transport launch arguments that are
given; later ones win.
"""

from vision_nodes.ros.process.launch_arguments import Output
from vision_nodes.ros.process.launch_description import vision_launch_description


def generate_launch_description():
    """Arguments plus one lifecycle vision_node running a depth model."""
    return vision_launch_description(
        task='depth',
        default_model='depth_anything_v2_small',
        default_params_file='',
        outputs=(Output('depth', 'Namespace of the depth outputs (metric image in 32FC1 '
                        'metres, or relative; coloured; camera_info)',
                        children=('image', 'relative', 'colored', 'camera_info')),),
    )
