"""The 3D boxes as RViz markers: ``visualization_msgs/MarkerArray`` on ``<ns>markers``.

RViz draws ``vision_msgs/Detection3DArray`` only with a plugin (``vision_msgs_rviz_plugins``);
markers it draws as it is. Published with ``publish_markers`` beside ``detections_3d``, built
only while someone subscribes. Each array replaces the last: a ``DELETEALL`` marker first, then
for each 3D box a translucent ``CUBE`` (namespace ``boxes``) and a ``TEXT_VIEW_FACING`` label
just above it (namespace ``labels``): the class name, ``#<track id>`` when tracking, the score,
as the annotated image labels it, in the colour it draws it with. Marker ids are the
detection's index in the array, so the two namespaces pair up; everything is in the image's
optical frame and stamp, in metres.
"""

from __future__ import annotations

from typing import Any, Sequence

from visualization_msgs.msg import Marker, MarkerArray

from ...drawing import colour
from ...geometry3d import Boxes3D
from ...tasks.detect import Detections

#: Opacity of the boxes (the labels are opaque).
BOX_ALPHA = 0.35
#: Height of a label's letters, and its gap above the box, in metres.
TEXT_HEIGHT = 0.12
TEXT_GAP = 0.05


def markers_msg(dets: Detections, boxes: Boxes3D, header: Any,
                names: Sequence[str] = ()) -> MarkerArray:
    """Build the MarkerArray of one frame's 3D boxes (``names``: class names by index)."""
    clear = Marker()
    clear.header = header
    clear.action = Marker.DELETEALL
    out = MarkerArray()
    out.markers = [clear]
    classes = dets.class_ids.tolist()
    scores = dets.scores.astype(float).tolist()
    tracks = None if dets.track_ids is None else dets.track_ids.tolist()
    for n, (i, centre, size) in enumerate(zip(boxes.index.tolist(), boxes.centers.tolist(),
                                              boxes.sizes.tolist())):
        cls = int(classes[i])
        key = cls if tracks is None else int(tracks[i])
        name = names[cls] if 0 <= cls < len(names) else str(cls)
        tag = '' if tracks is None else f'#{key} '
        box = _marker(header, 'boxes', n, Marker.CUBE, centre, key, BOX_ALPHA)
        box.scale.x, box.scale.y, box.scale.z = (max(float(v), 1e-3) for v in size)
        above = [centre[0], centre[1] - size[1] / 2 - TEXT_GAP - TEXT_HEIGHT / 2, centre[2]]
        label = _marker(header, 'labels', n, Marker.TEXT_VIEW_FACING, above, key, 1.0)
        label.scale.z = TEXT_HEIGHT
        label.text = f'{tag}{name} {scores[i]:.2f}'
        out.markers += [box, label]
    return out


def _marker(header: Any, namespace: str, ident: int, kind: int, position: Sequence[float],
            key: int, alpha: float) -> Marker:
    """Return a marker at ``position`` (metres, optical frame) in ``key``'s drawing colour."""
    marker = Marker()
    marker.header = header
    marker.ns, marker.id, marker.type, marker.action = namespace, ident, kind, Marker.ADD
    marker.pose.position.x, marker.pose.position.y, marker.pose.position.z = \
        (float(v) for v in position)
    marker.pose.orientation.w = 1.0
    blue, green, red = colour(key)  # the annotated image's BGR colour for the same key
    marker.color.r, marker.color.g, marker.color.b = red / 255, green / 255, blue / 255
    marker.color.a = float(alpha)
    return marker
