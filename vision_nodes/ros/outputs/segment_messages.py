"""Segmentation results → the ``instance_mask`` image (``sensor_msgs/Image``, ``mono16``).

Pixel value = 1 + the index of the detection, in the Detection2DArray of the same stamp, that
the pixel belongs to (that detection's ``id`` is the same index as a string); 0 = background.
Where masks overlap the higher-scoring detection wins. The image has the input image's header
and size.
"""

from __future__ import annotations

from ...tasks.instances import SegmentResult
from .depth_messages import image_cdr

#: Encoding of the instance mask: 16-bit labels, so up to 65535 instances per image.
MASK_ENCODING = 'mono16'


def instance_mask_to_cdr(result: SegmentResult, header) -> bytes:
    """Serialise the ``mono16`` label image of a frame's masks, with the input image's header."""
    return image_cdr(result.label_image(), MASK_ENCODING, header)
