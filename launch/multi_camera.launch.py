"""Launch one vision_node that serves several cameras with one loaded detection model.

    ros2 launch vision_nodes multi_camera.launch.py \
        image_topics:=/front/image_raw,/rear/image_raw,/left/image_raw

Each camera's results go to its image topic's namespace (``/front/detections``,
``/front/label_info``; ``output_namespaces:=/a,/b,/c`` overrides, one per camera), with its
own frame's header. Frames that arrive within ``batch_window`` ms run as one batch of up to
``max_batch`` frames (empty: one per camera). Every other argument is detect.launch.py's.
"""

from vision_nodes.ros.process.launch_arguments import Output, package_share_file
from vision_nodes.ros.process.launch_description import vision_launch_description


def generate_launch_description():
    """Arguments plus one lifecycle vision_node serving every camera of image_topics."""
    return vision_launch_description(
        task='detect',
        default_model='yolov8n',
        default_params_file=package_share_file('config/detect.yaml', __file__),
        outputs=(Output('detections', 'Output topic of a single camera (unused with '
                        'image_topics: each camera publishes in its own namespace)'),),
    )
