"""One model's outputs in a multi-camera node: the task's outputs once per camera.

Each camera's outputs live in that camera's namespace (:mod:`..inputs.camera_names`), so one
camera's results never reach another's topics. The node drives this object like any model's outputs
(activate, deactivate, destroy, lazy mode); the batcher publishes through ``cameras[index]``.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar, Mapping, Sequence

from ...param_spec import ParamSpec
from ...pipeline import LoadedModel
from ..inputs.camera_names import topic_namespace
from .protocol import Outputs, OutputsFactory


class CameraOutputs:
    """The outputs of one model, one set per camera (index = the camera's in ``image_topics``)."""

    #: Its switches are the task's outputs' (the parameter policy reads them from there).
    params: ClassVar[tuple[ParamSpec, ...]] = ()

    def __init__(self, factory: OutputsFactory, node: Any, model: LoadedModel,
                 namespaces: Sequence[str], report_error: Callable[[str], None],
                 image_topics: Sequence[str]) -> None:
        """Make the outputs of each camera in its namespace.

        Outputs that read a ``camera_info`` read the camera's own: the sibling of its image
        topic (``/front/image_raw`` -> ``/front/camera_info``), as camera drivers publish it;
        outputs with a ``camera_namespace`` (3D detections: camera_info and a relative
        ``depth_topic``) get the image topic's namespace to read them in.
        """
        #: Each camera's outputs, in ``image_topics`` order.
        self.cameras: list[Outputs] = []
        self._topics = list(image_topics)
        try:
            for space, topic in zip(namespaces, image_topics):
                outputs = factory(node, model, space, report_error)
                self.cameras.append(outputs)
                if hasattr(outputs, 'camera_info'):
                    outputs.camera_info = f'{topic_namespace(topic)}camera_info'
                if hasattr(outputs, 'camera_namespace'):
                    outputs.camera_namespace = topic_namespace(topic)
        except BaseException:
            self.destroy()
            raise

    @property
    def topics(self) -> list[str]:
        """Every camera's topics, the per-frame one of the first camera first."""
        return [t for outputs in self.cameras for t in outputs.topics]

    def wanted(self) -> bool:
        """Whether anything subscribes to a per-frame output of any camera."""
        return any(outputs.wanted() for outputs in self.cameras)

    def sources(self) -> tuple[str, ...]:
        """Models whose results on the same frame any camera's outputs read."""
        return tuple(dict.fromkeys(name for outputs in self.cameras
                                   for name in getattr(outputs, 'sources', tuple)()))

    def diagnostics(self) -> dict[str, str]:
        """Each camera's key/values for the node's status, named by its image topic."""
        return {f'{topic}: {key}': value
                for topic, outputs in zip(self._topics, self.cameras)
                for key, value in getattr(outputs, 'diagnostics', dict)().items()}

    def activate(self, params: Any, switches: Mapping[str, Any]) -> None:
        """Activate every camera's outputs with the same parameters and switches."""
        for outputs in self.cameras:
            outputs.activate(params, switches)

    def deactivate(self) -> None:
        """Deactivate every camera's outputs."""
        for outputs in self.cameras:
            outputs.deactivate()

    def params_changed(self, old: Any, new: Any) -> None:
        """Hand the changed parameters to every camera's outputs."""
        for outputs in self.cameras:
            outputs.params_changed(old, new)

    def update_switches(self, switches: Mapping[str, Any]) -> None:
        """Hand the switches' values to every camera's outputs."""
        for outputs in self.cameras:
            outputs.update_switches(switches)

    def publish(self, result: Any, header: Any, frame: Any = None) -> None:
        """Not used: a multi-camera result is published on its camera's outputs."""
        raise TypeError('a multi-camera result goes to outputs.cameras[index].publish')

    def destroy(self) -> None:
        """Destroy every camera's publishers and subscriptions."""
        for outputs in self.cameras:
            outputs.destroy()
        self.cameras = []
