"""vision_nodes: ament_python package (colcon) that also installs with pip."""

from glob import glob

from setuptools import find_packages, setup

package_name = 'vision_nodes'

# Dependency groups: a runtime-only deployment installs `onnx` or `openvino` and never needs
# torch or ultralytics. On a ROS install these come from rosdep/apt instead.
RUNTIME = ['numpy>=1.22', 'PyYAML>=5.4', 'opencv-python-headless>=4.6', 'simplejpeg>=1.7']
extras = {
    'onnx': RUNTIME + ['onnxruntime>=1.17'],
    # ONNX Runtime builds with GPU / OpenVINO execution providers (install one ONNX Runtime).
    'onnx-gpu': RUNTIME + ['onnxruntime-gpu>=1.17'],
    'onnx-openvino': RUNTIME + ['onnxruntime-openvino>=1.17'],
    'openvino': RUNTIME + ['openvino>=2024.0', 'nncf>=2.10'],
    # TensorRT 10+ and its CUDA binding (NVIDIA's index or JetPack on Jetson).
    'tensorrt': RUNTIME + ['tensorrt>=10', 'cuda-python>=12', 'onnx>=1.15'],
    'torch': RUNTIME + ['torch>=2.1', 'torchvision', 'ultralytics>=8.3', 'onnx>=1.15',
                        'onnxslim>=0.1.30', 'onnxruntime>=1.17', 'transformers>=4.45'],
    'test': ['pytest<9', 'flake8', 'pydocstyle'],
}

setup(
    name=package_name,
    version='0.1.0',
    packages=find_packages(exclude=['test', 'test.*']),
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + package_name]),
        ('share/' + package_name, ['package.xml']),
        ('share/' + package_name + '/launch', glob('launch/*.launch.py')),
        ('share/' + package_name + '/config', glob('config/*.yaml') + glob('config/*.xml')),
        ('share/' + package_name + '/config/models', glob('config/models/*.yaml')),
    ],
    install_requires=['setuptools'],
    extras_require=extras,
    zip_safe=True,
    maintainer='vision_nodes maintainers',
    maintainer_email='maintainers@vision-nodes.invalid',
    description='Generic ROS 2 lifecycle node for detection and depth models.',
    license='Apache-2.0',
    entry_points={
        'console_scripts': [
            'vision_node = vision_nodes.ros.node:main',
            'vision_nodes_demo = vision_nodes.tools.demo:main',
            'vision_nodes_image_publisher = vision_nodes.tools.image_publisher:main',
        ],
    },
)
