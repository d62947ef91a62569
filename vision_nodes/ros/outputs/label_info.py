"""Class names → ``vision_msgs/LabelInfo`` (published transient local, REP 2003-style)."""

from __future__ import annotations

from typing import Sequence

from vision_msgs.msg import LabelInfo, VisionClass


def label_info_msg(labels: Sequence[str], header, threshold: float) -> LabelInfo:
    """Build the LabelInfo mapping class ids to names."""
    msg = LabelInfo()
    msg.header = header
    msg.threshold = float(threshold)
    classes = []
    for index, name in enumerate(labels):
        entry = VisionClass()
        entry.class_id = index
        entry.class_name = name
        classes.append(entry)
    msg.class_map = classes
    return msg
