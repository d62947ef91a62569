"""The generic vision lifecycle node (executable ``vision_node``): transitions and wiring.

* configure: read the manifests (``model``, or several in ``models``), settle one backend every
  model can use, load each model through the engine cache, declare its task parameters (the
  manifest's values as defaults) and create its outputs (looked up by task).
* activate: subscribe to the images (one subscription and one conversion per frame for all
  models; with ``image_topics`` one per camera, their frames batched, see :mod:`.inputs.cameras`)
  and start the inference thread.
* deactivate: drop the subscription, finish the frame in flight. cleanup / shutdown / error:
  release everything configure made.

Each job lives in a room of its own: :mod:`.params` (the parameter policy), :mod:`.inputs`
(the image subscription; :mod:`.inputs.frame_path`, frames -> models -> outputs, the one place
stale frames are dropped), :mod:`.outputs`, :mod:`.process` (diagnostics, the executor).
Transitions run on a thread of their own (:mod:`.process.executor`), so lifecycle and parameter
services answer while a model is exported. Every failure is logged in one line with its cause
and returns FAILURE; the node stays alive and can be configured again.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import rclpy
from rclpy.clock import Clock, ClockType
from rclpy.lifecycle import Node as LifecycleNode
from rclpy.lifecycle import State, TransitionCallbackReturn

from ..pipeline import build_pipelines
from ..platform.allocator import keep_freed_buffers
from ..text import clip
from .inputs.camera_names import output_namespaces
from .inputs.cameras import CameraInputs
from .inputs.frame_path import FramePath, ServedModel
from .inputs.subscription import ImageInput
from .outputs.camera_outputs import CameraOutputs
from .outputs.registry import outputs_class
from .params.policy import ParameterPolicy
from .process import compat
from .process.diagnostics_publisher import DiagnosticsPublisher
from .process.endpoints import Endpoints
from .process.executor import isolate_transitions, spin_until_shutdown
from .process.log_limiter import LogLimiter
from .process.transitions import transition


class VisionNode(LifecycleNode):
    """Runs vision models on incoming images and publishes their results."""

    def __init__(self, node_name: str = 'vision_node', **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        #: The clock of the node's housekeeping timers (:meth:`steady_timer`).
        self._steady = Clock(clock_type=ClockType.STEADY_TIME)
        #: Every publisher and subscription of the node: a remap putting two on one topic
        #: is refused in one line (see .endpoints).
        self.endpoints = Endpoints(self, self.get_logger().warning,
                                   lambda: self.parameters.as_node())
        self.parameters = ParameterPolicy(self)
        self._log_error = LogLimiter(self.get_logger().error)
        self.frames = FramePath(self, self._log_error, lambda: self.parameters.value('lazy'))
        self.diagnostics = DiagnosticsPublisher(self, self.frames, self.parameters.value,
                                                lambda: compat.lifecycle_state(self))
        self._pipeline: Any = None
        self._input: ImageInput | CameraInputs | None = None
        self._input_timer: Any = None
        #: Set by the shutdown transition; ``main`` then ends the process.
        self.finalized = False
        #: The callback group of ``change_state``, which ``main`` runs off the spinning thread.
        self.transitions = isolate_transitions(self)

    # ----------------------------------------------------------------- transitions
    @transition('configure', undo='_release')
    def on_configure(self, state: State) -> TransitionCallbackReturn:
        """Load the models on one backend and create their outputs.

        SUCCESS leaves the models loaded (inactive) and backend_in_use/precision_in_use set;
        FAILURE leaves nothing loaded and the node unconfigured, with the reason logged.
        """
        started, policy = time.monotonic(), self.parameters
        policy.require_valid()
        manifests = policy.manifests()
        backend = policy.settle_backend(manifests, self.get_logger().warning)
        names = ', '.join(f"'{m.name}' ({m.task})" for m in manifests)
        self.get_logger().info(f'configuring {names} on backend {backend!r}')
        p = policy.value
        self._pipeline = build_pipelines(
            manifests, backend, model_dir=p('model_dir'), cache_dir=p('engine_cache_dir'),
            device=p('device'), precision=p('precision'),
            execution_provider=p('execution_provider'), calibration_dir=p('calibration_dir'),
            torch_compile=p('use_torch_compile'), cuda_graphs=p('use_cuda_graphs'),
            max_batch=self._max_batch(),
            log=lambda line: self.get_logger().info(clip(line, 2000)))
        policy.declare_models(manifests)
        policy.require_valid()
        self.frames.load(self._make_models(self._pipeline))
        precision = self.diagnostics.configured(self._pipeline)
        policy.set_as_node(backend_in_use=self._pipeline.backend, precision_in_use=precision)
        policy.warn_unknown_overrides(self.get_logger().warning)
        self.get_logger().info(f'configured in {time.monotonic() - started:.2f} s')
        return TransitionCallbackReturn.SUCCESS

    def _max_batch(self) -> int:
        """Frames one inference runs: 1, or with image_topics max_batch (0: one per camera)."""
        topics = self.parameters.value('image_topics')
        return (int(self.parameters.value('max_batch')) or len(topics)) if topics else 1

    def _make_models(self, pipeline: Any) -> list[ServedModel]:
        """Each model with its parameters and outputs: all of them, or none."""
        models: list[ServedModel] = []
        p = self.parameters.value
        spaces = output_namespaces(p('image_topics'), p('output_namespaces')) \
            if p('image_topics') else None
        try:
            for model in pipeline.models:
                prefix = model.manifest.name if len(pipeline.models) > 1 else ''
                params = self.parameters.model(prefix, model.manifest.task)
                factory, inner = outputs_class(model.manifest.task), f'{prefix}/' if prefix else ''
                outputs = factory(self, model, inner, self.frames.frame_error) \
                    if spaces is None else CameraOutputs(
                        factory, self, model, [s + inner for s in spaces],
                        self.frames.frame_error, p('image_topics'))
                params.listener = outputs.params_changed
                params.switch_listener = outputs.update_switches
                models.append(ServedModel(model.manifest.name, model, params, outputs))
        except BaseException:
            for made in models:  # another model's outputs may be what clashed
                made.outputs.destroy()
            raise
        return models

    @transition('activate', undo='_undo_activate')
    def on_activate(self, state: State) -> TransitionCallbackReturn:
        """Subscribe to images, start the inference thread, send per-activation messages.

        SUCCESS leaves the node taking images (or, lazy, ready to); FAILURE (e.g. the image
        topic is one of the node's own outputs) undoes what was started: the node stays
        inactive with its models loaded.
        """
        topics = list(self.parameters.value('image_topics'))
        sub = CameraInputs(self, self.frames, self.parameters.value, self._log_error, topics) \
            if topics else ImageInput(self, self.frames.on_image, self.parameters.value,
                                      self._log_error, self.frames.callback_group,
                                      on_error=self.frames.frame_error)
        self._input = sub  # undone by _stop_input if what follows fails
        sub.check_topic()  # not on one of the node's outputs
        result = super().on_activate(state)
        self._input = self.diagnostics.input = sub
        for model in self.frames.models:
            model.outputs.activate(model.params.current, model.params.switches)
        sub.check_topic()  # nor on an input just made (camera_info) of another type
        if isinstance(sub, CameraInputs):
            self.frames.start()
            sub.start()
        else:
            self.frames.take_from(sub)  # the inference thread waits on it itself
            self.frames.start()
        sub.update(self._wanted())
        self._input_timer = self.steady_timer(
            0.5, lambda: sub.update_in_timer(self._wanted))
        outputs = ', '.join(t for m in self.frames.models for t in m.outputs.topics[:1])
        self.get_logger().info(f"active: '{sub.topic_name}' → {outputs}")
        return result

    def _wanted(self) -> bool:
        """Whether to take images: always, or (lazy) while an output has a subscriber."""
        return not self.parameters.value('lazy') or any(
            m.outputs.wanted() for m in self.frames.models)

    def _undo_activate(self) -> None:
        self._stop_input()
        super().on_deactivate(None)

    @transition('deactivate')
    def on_deactivate(self, state: State) -> TransitionCallbackReturn:
        """Stop taking images and finish the frame in flight.

        SUCCESS leaves the models loaded and no subscription; FAILURE is logged.
        """
        self._stop_input()
        return super().on_deactivate(state)

    @transition('cleanup')
    def on_cleanup(self, state: State) -> TransitionCallbackReturn:
        """Release the models, their memory and the outputs.

        SUCCESS leaves the node unconfigured with nothing loaded; FAILURE is logged.
        """
        self._release()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: State) -> TransitionCallbackReturn:
        """Release everything, whatever state the node was in; the process then exits."""
        try:
            self._release()
        finally:
            self.finalized = True
        return TransitionCallbackReturn.SUCCESS

    def on_error(self, state: State) -> TransitionCallbackReturn:
        """Release everything and go back to unconfigured."""
        self.get_logger().error('a transition raised an error; releasing everything')
        self._release()
        return TransitionCallbackReturn.SUCCESS

    # ----------------------------------------------------------------- resources
    def _stop_input(self) -> None:
        """Drop the subscription and its timer, finish the frame in flight (idempotent)."""
        if self._input_timer is not None:
            self.destroy_timer(self._input_timer)
            self._input_timer = None
        if self._input is not None:
            self._input.unsubscribe()
            self._input = self.diagnostics.input = None
        self.frames.stop()
        for model in self.frames.models:
            model.outputs.deactivate()

    def _release(self) -> None:
        """Stop input, destroy the outputs and unload the models (idempotent)."""
        self._stop_input()
        for model in self.frames.load([]):
            model.outputs.destroy()
        pipeline, self._pipeline = self._pipeline, None
        if pipeline is not None:
            pipeline.close()
        if self.parameters.value('backend_in_use') and rclpy.ok(context=self.context):
            self.parameters.set_as_node(backend_in_use='', precision_in_use='')

    def release(self) -> None:
        """Release everything configure and activate made (idempotent)."""
        self._release()

    # ----------------------------------------------------------------- rclpy's bookkeeping
    # Each destroyed entity leaves its callback group too (see compat.leave_callback_groups):
    # the node makes and destroys dozens at every lifecycle cycle.
    def destroy_publisher(self, publisher: Any) -> bool:
        """Destroy ``publisher`` and take its event handlers out of their callback group."""
        compat.leave_callback_groups(publisher)
        return super().destroy_publisher(publisher)

    def destroy_subscription(self, subscription: Any) -> bool:
        """Destroy ``subscription``, out of its callback group with its event handlers."""
        compat.leave_callback_groups(subscription)
        return super().destroy_subscription(subscription)

    def steady_timer(self, period_s: float, callback: Callable[[], None]) -> Any:
        """Create a timer on the steady clock, for the node's housekeeping.

        The diagnostics and the image input's updates (lazy mode, QoS auto) keep their pace
        with ``use_sim_time`` too: on the node's clock they would stop while ``/clock`` is
        paused or not yet published (a bag not playing, a simulator not started).
        """
        return self.create_timer(period_s, callback, clock=self._steady)

    def destroy_timer(self, timer: Any) -> bool:
        """Destroy ``timer`` and take it out of its callback group."""
        compat.leave_callback_groups(timer)
        return super().destroy_timer(timer)

    def destroy_guard_condition(self, guard: Any) -> bool:
        """Destroy ``guard`` and take it out of its callback group."""
        compat.leave_callback_groups(guard)
        return super().destroy_guard_condition(guard)


def main(args: list[str] | None = None) -> None:
    """Run the node: spin until SIGINT/SIGTERM or the shutdown transition.

    Returns normally (exit code 0) on shutdown; an argument the node cannot start with ends
    the process with one line and exit code 2 (:func:`.process.startup.start_node`). The program
    ``vision_node`` is :mod:`.main`, which applies the allocator settings before rclpy is
    imported; here they come after (``python -m vision_nodes.ros.node``), before any
    frame-sized buffer exists.
    """
    from .process.startup import start_node

    keep_freed_buffers()
    node = start_node(VisionNode, args, 'vision_node')
    spin_until_shutdown(node)


if __name__ == '__main__':
    main()
