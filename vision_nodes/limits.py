"""Bounds on untrusted input, one place each: what the node accepts, and refuses beyond.

Manifests, images, model folders, calibration images and engine-cache entries come from files
and messages that may be corrupt or hostile. Each bound is checked where that input enters
(manifest load, image conversion, model or calibration file read, cache entry read), before
the work it would make expensive, and a value beyond it is refused with a one-line error
naming the bound. docs/security.md lists them.
"""

from __future__ import annotations

import math
from typing import Any

from .text import show

#: Largest manifest file, in bytes (checked before the file is read).
MAX_MANIFEST_BYTES = 1 << 20
#: Deepest nesting of a manifest's YAML (a manifest needs 3); YAML anchors and aliases are
#: refused outright, so no document expands beyond what its bytes spell out.
MAX_MANIFEST_DEPTH = 16
#: Most YAML nodes (scalars, lists, mappings) in one manifest.
MAX_MANIFEST_NODES = 20_000
#: Longest manifest ``labels`` list, and longest label in it (characters).
MAX_LABELS = 4096
MAX_LABEL_CHARS = 128
#: Most keypoints a pose manifest may name (``keypoints``; ``skeleton`` indices stay below).
MAX_KEYPOINTS = 1024
#: Longest model ``name`` (characters). A name is also a ROS 2 name token (letters, digits,
#: underscores, not starting with a digit): a node running several models uses it as a
#: namespace (``<name>/detections``) and the engine cache puts it in folder names.
MAX_NAME_CHARS = 64
#: Longest manifest ``weights`` path (characters).
MAX_PATH_CHARS = 4096
#: Model files (see :mod:`vision_nodes.files`: regular files only, opened non-blocking):
#: largest weights file; largest metadata file beside it (a transformers ``config.json``,
#: the JSON header of a ``.safetensors`` file, an OpenVINO IR's ``metadata.yaml``).
MAX_WEIGHTS_BYTES = 8 << 30
MAX_MODEL_METADATA_BYTES = 1 << 20
#: Most parameters (tensor elements) a transformers model's ``config.json`` may describe, and
#: most layers (``num_hidden_layers``) or items in one of its lists; checked on the config,
#: before any part of the model is built.
MAX_MODEL_PARAMETERS = 2_000_000_000
MAX_MODEL_LAYERS = 256
#: Calibration folders (int8): most files a folder may hold, most images used (spread
#: evenly over the sorted names); each image is also bounded like a camera frame
#: (``MAX_IMAGE_BYTES`` of file, ``MAX_IMAGE_PIXELS``), read from its header before decoding.
MAX_CALIBRATION_FILES = 10_000
MAX_CALIBRATION_IMAGES = 300
#: Largest network input: each side of ``input_size``, and its area (pixels).
MAX_INPUT_SIDE = 4096
MAX_INPUT_PIXELS = 2048 * 2048
#: Largest magnitude of a preprocessing number (``scale``, ``mean``, ``std``).
MAX_PREPROCESSING_MAGNITUDE = 1e4
#: Largest depth range limit (metres): a manifest's ``depth.max_depth`` and a model's own
#: ``max_depth`` (transformers config.json), which must also be positive and finite.
MAX_DEPTH_METRES = 1e6
#: Most detections a model may publish per image (manifest and node parameter).
MAX_DETECTIONS = 10_000
#: Largest device index the ``device`` parameter may name (``cuda:N``, ``GPU.N``).
MAX_DEVICE_INDEX = 255
#: Largest image the node converts: pixels (8192 x 8192), and bytes of pixel data (rows x step,
#: the rows of every plane for semi-planar YUV). A camera encoding's RGB copy is within the
#: pixel bound.
MAX_IMAGE_PIXELS = 8192 * 8192
MAX_IMAGE_BYTES = 256 << 20
#: Longest string (``frame_id``, ``encoding``, ``format``) read from a serialized image
#: message, in bytes; its ``data`` is bounded by ``MAX_IMAGE_BYTES``.
MAX_CDR_STRING_BYTES = 4096
#: Largest file an engine-cache entry may list (bytes), largest ``entry.json``, most files.
MAX_CACHE_FILE_BYTES = 8 << 30
MAX_ENTRY_JSON_BYTES = 1 << 20
MAX_ENTRY_FILES = 64
#: Largest ROS 2 parameters file (``--params-file``) a node starts with, in bytes (checked,
#: with the file being a regular file, before rcl reads it).
MAX_PARAMS_FILE_BYTES = 1 << 20
#: TensorRT builder workspace (scratch memory tactics may use while an engine is built):
#: a quarter of the GPU's memory, at most this much. TensorRT's default is the whole GPU,
#: which on a Jetson (memory shared with the CPU) can starve the rest of the robot.
MAX_TENSORRT_WORKSPACE_BYTES = 4 << 30
#: Largest TensorRT timing cache read back from the engine cache folder (bytes).
MAX_TENSORRT_TIMING_CACHE_BYTES = 64 << 20
#: Most image inputs (cameras) one node serves (``image_topics``), and the largest batch of
#: frames one inference runs (``max_batch``): an engine or export is built for the range.
MAX_CAMERAS = 16
MAX_BATCH = 16
#: Most threads that convert, pre- and post-process a batch's frames side by side.
MAX_FRAME_WORKERS = 8
#: Longest wait, in milliseconds, for more cameras' frames before a batch runs.
MAX_BATCH_WINDOW_MS = 1000.0
#: PyTorch on a GPU: most CUDA graphs kept per model (one input shape at a time, one graph
#: per kind of input at it: the u8 image and the float tensor).
MAX_CUDA_GRAPHS = 4
#: Largest tracker configuration YAML (``tracker_config``), in bytes.
MAX_TRACKER_CONFIG_BYTES = 64 << 10
#: Frames whose stage durations the node keeps for its stage medians (diagnostics).
STAGE_WINDOW = 256


def depth_range_problem(value: Any) -> str | None:
    """Why ``value`` cannot bound a depth range, or None when it can.

    A depth range limit (the manifest's ``depth.max_depth``, a model's own ``max_depth``)
    is a number, finite, > 0 and at most :data:`MAX_DEPTH_METRES`: a negative or zero one
    would turn every depth into NaN (or flip a relative map) without a word. One guard for
    every place a depth range enters.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f'{show(value)} is not a number'
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        return f'{show(value)} is not a finite number'
    if number <= 0:
        return f'{show(value)} is not positive'
    if number > MAX_DEPTH_METRES:
        return f'{show(value)} is larger than {MAX_DEPTH_METRES:g}'
    return None
