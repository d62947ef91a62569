"""vision_nodes: ament_python package (colcon) that also installs with pip."""

from glob import glob

from setuptools import find_packages, setup

package_name = 'vision_nodes'

# Dependency groups: a runtime-only deployment installs `onnx` or `openvino` and never needs
# torch or ultralytics. These ranges are the one source of the bounds: requirements/*.txt name
# the same packages (the exact versions the suite runs, inside these ranges, or the same
# range) and the lock's pins lie inside them (test/unit/project/test_extras.py). They bring
# NumPy 2 and OpenCV from pip: beside apt ROS use rosdep and docs/installing.md instead.
# lap: the assignments of the package's ByteTrack (tracking without torch). numba: the
# classifier's Pillow-exact resize, compiled (optional at run time: Pillow does it without).
RUNTIME = ['numpy>=1.22', 'PyYAML>=5.4', 'opencv-python-headless>=4.6', 'simplejpeg>=1.7',
           'pycocotools>=2.0.7', 'lap>=0.5', 'numba>=0.58']
# The TensorRT backend reads the ONNX (labels, external weights) with onnx; TensorRT 11 has no
# fp16 builder flag, so fp16 there builds from an fp16-converted ONNX (onnxconverter-common,
# when ONNX Runtime's own converter is not installed).
TENSORRT_TOOLS = ['onnx>=1.15', 'onnxconverter-common>=1.14']
# GPU stacks by CUDA major version: each pins builds of one CUDA major (a CUDA 13 build does
# not load on a CUDA 12 driver, nor on JetPack 6). PyPI's onnxruntime-gpu is built for CUDA 12
# up to 1.26 and for CUDA 13 from 1.27. Install one stack, in place of `onnx` (only one
# onnxruntime package may be installed); docs/backends.md, "Installing for NVIDIA GPUs", has
# the recipes.
CUDA12 = ['tensorrt-cu12>=10.3,<12', 'cuda-python>=12.3,<13', 'onnxruntime-gpu>=1.19,<1.27']
CUDA13 = ['tensorrt-cu13>=10.13.2,<12', 'cuda-python>=13,<14', 'onnxruntime-gpu>=1.27']
extras = {
    'onnx': RUNTIME + ['onnxruntime>=1.17'],
    # ONNX Runtime builds with GPU / OpenVINO execution providers (install one ONNX Runtime).
    'onnx-gpu': RUNTIME + ['onnxruntime-gpu>=1.19,<1.27'],  # CUDA 12; cuda13 has the other
    'onnx-openvino': RUNTIME + ['onnxruntime-openvino>=1.17'],
    'openvino': RUNTIME + ['openvino>=2024.0', 'nncf>=2.10'],
    # x86-64 or SBSA machines with an NVIDIA driver for CUDA 12 (>= 525) or CUDA 13 (>= 580).
    'cuda12': RUNTIME + CUDA12 + TENSORRT_TOOLS,
    'cuda13': RUNTIME + CUDA13 + TENSORRT_TOOLS,
    # Jetson with JetPack 6.1/6.2 (CUDA 12.6, TensorRT 10.3): TensorRT's Python module comes
    # from JetPack (apt python3-libnvinfer), PyTorch from NVIDIA's wheel for JetPack; only
    # the CUDA binding matching JetPack's CUDA comes from PyPI.
    # JetPack's TensorRT 10.3 module is built against NumPy 1.x: keep NumPy below 2.
    'jetson': RUNTIME + ['numpy<2', 'cuda-python>=12.6,<12.7'] + TENSORRT_TOOLS,
    # Kept for existing instructions: the CUDA 12 TensorRT stack without ONNX Runtime.
    'tensorrt': RUNTIME + ['tensorrt-cu12>=10.3,<12', 'cuda-python>=12.3,<13'] + TENSORRT_TOOLS,
    # Ultralytics' headless build: the same package, with opencv-python-headless, so only one
    # OpenCV is installed (plain ultralytics brings opencv-python beside it).
    'torch': RUNTIME + ['torch>=2.1', 'torchvision', 'ultralytics-opencv-headless>=8.3',
                        'onnx>=1.15', 'onnxslim>=0.1.30', 'onnxruntime>=1.17',
                        'transformers>=4.45'],
    # The default validation set of the precision check (sample photographs).
    'validation': ['scikit-image>=0.22'],
    'test': ['pytest>=7,<9', 'pytest-xdist>=3', 'flake8>=6', 'pydocstyle>=6', 'vermin>=1.9',
             'colcon-common-extensions>=0.3', 'osrf-pycommon>=2', 'argcomplete>=1.8'],
}

setup(
    name=package_name,
    version='0.3.0',
    packages=find_packages(exclude=['test', 'test.*']),
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + package_name]),
        ('share/' + package_name, ['package.xml']),
        ('share/' + package_name + '/launch', glob('launch/*.launch.py')),
        ('share/' + package_name + '/config',
         glob('config/*.yaml') + glob('config/*.xml') + glob('config/*.rviz')),
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
            'vision_node = vision_nodes.ros.main:main',
            'vision_nodes_demo = vision_nodes.tools.demo:main',
            'vision_nodes_image_publisher = vision_nodes.tools.image_publisher:main',
        ],
    },
)
