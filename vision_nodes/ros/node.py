"""The generic vision lifecycle node (executable ``vision_node``).

* configure: read the parameters, load the model manifests (``model``, or several in
  ``models``), settle one backend every model can use, load or export each model through the
  engine cache, declare each model's live parameters and create its publishers (looked up by
  task in the outputs map).
* activate: subscribe to the images (one subscription and one conversion per frame for all
  models) and start the inference thread.
* deactivate: drop the subscription, finish the frame in flight. cleanup / shutdown / error:
  release everything configure made.

The node never names a task: tasks, runners and outputs come from their maps. Transitions run
on a thread of their own (:mod:`.executor`) and frames on the inference thread
(:mod:`.frame_worker`), so lifecycle and parameter services answer while a model is exported
or a frame is processed. Every failure is logged in one line with its cause and returns
FAILURE; the node stays alive and can be configured again.
"""

from __future__ import annotations

import functools
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Callable

import rclpy
from rclpy.exceptions import ParameterUninitializedException
from rclpy.executors import ExternalShutdownException
from rclpy.lifecycle import Node as LifecycleNode
from rclpy.lifecycle import State, TransitionCallbackReturn
from rclpy.parameter import Parameter
from rclpy.qos import ReliabilityPolicy
from rclpy.subscription import Subscription
from diagnostic_msgs.msg import DiagnosticArray
from rcl_interfaces.msg import SetParametersResult

from ..artifacts.cache import CacheError
from ..images import ImageConversionError
from ..loaders import ModelLoadError
from ..manifest import ManifestError, ModelManifest, resolve_manifest
from ..pipeline import ModelPipeline, Pipeline, build_pipelines
from ..platform.allocator import keep_freed_buffers
from ..runners.base import RunnerError
from ..runners.registry import backend_report
from ..stats import FrameStats, HealthLimits, stamp_latency
from ..tasks import TaskError, task_class
from ..text import clip, show
from .compressed_input import compressed_to_numpy
from .diagnostics import NodeFacts, diagnostic_array, diagnostic_status
from .endpoints import Endpoints
from .executor import FrameGate, TransitionExecutor, isolate_transitions
from .frame_worker import FrameWorker
from .image_input import image_to_array
from .image_subscription import ImageSubscription
from .log_limiter import LogLimiter
from .model_parameters import ModelParameters
from .outputs.registry import outputs_class
from .params import PARAMS, REPORTS, SPECS, declare, descriptor, validate
from .qos import choose_qos, explain_silence, review_qos, subscription_qos

#: Errors whose message says it all: logged in one line, without the exception type.
EXPECTED_ERRORS = (ManifestError, RunnerError, ModelLoadError, CacheError, TaskError,
                   ValueError, ImportError, OSError)

#: rclpy passes message info (sequence numbers, timestamps) to two-argument callbacks since
#: Jazzy; Humble's subscriptions take the message alone.
_MESSAGE_INFO = hasattr(Subscription, 'CallbackType')

#: Parameters that belong to ROS itself (rclpy declares them) or to other tools.
_FOREIGN_PARAMS = ('use_sim_time', 'start_type_description_service')


@dataclass
class _Model:
    """One loaded model on the node: pipeline, live parameters, publishers."""

    name: str
    pipeline: ModelPipeline
    params: ModelParameters
    outputs: Any


def _transition(name: str, undo: str = '') -> Callable:
    """Run a transition callback so that any failure is one log line with its cause.

    The callback's exception (rclpy would turn it into "error processing" without a word of
    why) is logged with its message, ``undo`` (a method name) rolls back what the transition
    had done, and the transition returns FAILURE: the node stays alive in its previous state.
    """
    def wrap(method: Callable) -> Callable:
        @functools.wraps(method)
        def run(self: 'VisionNode', state: State) -> TransitionCallbackReturn:
            try:
                return method(self, state)
            except EXPECTED_ERRORS as exc:
                self.get_logger().error(f'{name} failed: {clip(exc, 2000)}')
            except Exception as exc:  # noqa: BLE001 - the node must survive any failure
                self.get_logger().error(
                    f'{name} failed unexpectedly: {type(exc).__name__}: {clip(exc, 2000)}')
            if undo:
                try:
                    getattr(self, undo)()
                except Exception as exc:  # noqa: BLE001 - already failing; say so, go on
                    self.get_logger().error(f'{name}: undoing it failed too: {clip(exc)}')
            return TransitionCallbackReturn.FAILURE
        return run
    return wrap


class VisionNode(LifecycleNode):
    """Runs vision models on incoming images and publishes their results."""

    def __init__(self, node_name: str = 'vision_node', **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        #: Parameters whose start-up value was refused; configure fails until they are set.
        self._startup_errors: dict[str, str] = {}
        self._internal = threading.local()
        self._lock = threading.RLock()  # the models, against transitions and parameter sets
        self._models: list[_Model] = []
        self._pipeline: Pipeline | None = None
        self._model_params: dict[str, ModelParameters] = {}
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self._internal.on = True  # declare() checks start-up values itself
        try:
            for spec in PARAMS + REPORTS:
                self._record_startup(spec.name, declare(self, spec, check=validate))
        finally:
            self._internal.on = False
        self._log_error = LogLimiter(self.get_logger().error)
        self._image_sub: ImageSubscription | None = None
        self._stats = FrameStats()
        self._worker = FrameWorker(self._frame_in_worker, self._stats.on_dropped)
        # Closed while a frame is processed: frames arriving meanwhile wait in the middleware
        # (newest kept), see FrameGate; opening it wakes the executor.
        self._frame_gate = FrameGate()
        self._wake = self.create_guard_condition(lambda: None)
        #: Publication sequence number of the last frame taken, per publisher.
        self._last_seq: dict[bytes, int] = {}
        #: One thread per model after the first (several models run side by side).
        self._model_threads: dict[str, ThreadPoolExecutor] = {}
        self._active = False
        self._idle_timer = None
        self._idle_logged = False
        self._facts = NodeFacts(self.get_fully_qualified_name())
        #: Whether the runner's describe() reports device memory (CUDA, TensorRT).
        self._reports_memory = False
        # Not a lifecycle publisher: diagnostics also tell an unconfigured node's state.
        #: Every publisher and subscription of the node: a remap putting two on one topic
        #: is refused in one line (see .endpoints).
        self.endpoints = Endpoints(self, self.get_logger().warning)
        self._diagnostics = self.endpoints.publisher(DiagnosticArray, '/diagnostics', 10)
        self._diagnostics_timer = self.create_timer(1.0, self._publish_diagnostics)
        #: Set by the shutdown transition; ``main`` then ends the process.
        self.finalized = False
        self._declare_model_parameters(self._manifests_or_none())
        self._transitions = isolate_transitions(self)

    # ----------------------------------------------------------------- parameters
    def _p(self, name: str) -> Any:
        try:
            return self.get_parameter(name).value
        except ParameterUninitializedException:
            return SPECS[name].default

    def _record_startup(self, name: str, error: str | None) -> None:
        if error:
            self._startup_errors[name] = error
            self.get_logger().error(
                f'{error}; it keeps its default and the node stays unconfigured until it is '
                f'set to a valid value (ros2 param set {self.get_fully_qualified_name()} '
                f'{name} ...)')

    def _set_internal(self, **values: Any) -> None:
        """Set parameters as the node itself (report values, a reset backend)."""
        self._internal.on = True
        try:
            self.set_parameters([Parameter(k, value=v) for k, v in values.items()])
        finally:
            self._internal.on = False

    def _state(self) -> str:
        return self._state_machine.current_state[1]

    def _on_set_parameters(self, params: list[Parameter]) -> SetParametersResult:
        """Validate a parameter change; apply live ones to the next frame."""
        internal = getattr(self._internal, 'on', False)
        state = self._state()
        changes: dict[ModelParameters, dict[str, Any]] = {}
        for param in params:
            if param.type_ == Parameter.Type.NOT_SET:  # declared without a value
                continue
            if not internal and not self.has_parameter(param.name):
                # rclpy refuses undeclared names before this callback, except the empty
                # one (its check tests the names' truth): refuse that the same way.
                return SetParametersResult(successful=False, reason=(
                    f'parameter {show(param.name)} is not declared on this node '
                    f'(`ros2 param list {self.get_fully_qualified_name()}` lists its '
                    'parameters)'))
            spec = SPECS.get(param.name)
            model = next((m for m in self._model_params.values() if param.name in m.specs),
                         None)
            if spec is not None:
                reason = None if internal else self._refusal(spec, param.value, state)
            elif model is not None:
                reason = model.check(param.name, param.value, state == 'active')
                changes.setdefault(model, {})[param.name] = param.value
            else:
                continue
            if reason:
                return SetParametersResult(successful=False, reason=reason)
            self._startup_errors.pop(param.name, None)
        for model, values in changes.items():
            outputs = next((m.outputs for m in self._models if m.params is model), None)
            model.apply(values, outputs.params_changed if outputs else lambda old, new: None)
        return SetParametersResult(successful=True)

    def _refusal(self, spec: Any, value: Any, state: str) -> str | None:
        """Why the user may not set a node parameter to ``value`` now (None: they may)."""
        if spec in REPORTS:
            return f'{spec.name} is set by the node to report what it runs; it is read only'
        reason = validate(spec.name, value)
        if reason:
            return reason
        run = f'`ros2 lifecycle set {self.get_fully_qualified_name()}'
        if spec.applies == 'reload' and state in ('inactive', 'active'):
            steps = f'deactivate ({run} deactivate`), then ' if state == 'active' else ''
            return (f"{spec.name} is locked while the node is configured (state '{state}'): "
                    f'it takes effect at configure. {steps}clean up ({run} cleanup`), set '
                    'it, then configure')
        if spec.applies == 'reload' and state != 'unconfigured':
            return f"{spec.name} cannot change during a transition (state '{state}')"
        if spec.applies == 'activate' and state == 'active':
            return (f'{spec.name} applies when the node activates: run {run} deactivate`, '
                    'set it, then activate again')
        return None

    def _model_names(self) -> list[str]:
        models = [m.strip() for m in (self._p('models') or []) if m.strip()]
        return models or [self._p('model')]

    def _manifests(self) -> list[ModelManifest]:
        manifests = [resolve_manifest(name) for name in self._model_names()]
        names = [m.name for m in manifests]
        duplicate = next((n for n in names if names.count(n) > 1), None)
        if duplicate:
            raise ManifestError(f"two models are named '{clip(duplicate)}': each model of a "
                                'node needs its own name (it namespaces its topics and '
                                'parameters)')
        return manifests

    def _manifests_or_none(self) -> list[ModelManifest] | None:
        try:
            return self._manifests()
        except Exception:  # noqa: BLE001 - configure reports it
            return None

    def _declare_model_parameters(self, manifests: list[ModelManifest] | None) -> None:
        """Declare each model's live parameters (under its name when there are several)."""
        if manifests is None:
            return
        self._internal.on = True  # the node declares them (set_parameters sees new names)
        try:
            self._declare_model_parameters_of(manifests)
        finally:
            self._internal.on = False

    def _declare_model_parameters_of(self, manifests: list[ModelManifest]) -> None:
        prefixes = [m.name if len(manifests) > 1 else '' for m in manifests]
        keep = {}
        for manifest, prefix in zip(manifests, prefixes):
            key = f'{prefix}:{manifest.task}'
            current = self._model_params.get(key)
            if current is None:
                try:
                    cls = task_class(manifest.task)
                except TaskError:
                    continue
                current = ModelParameters(self, cls(manifest), prefix)
                for name, error in current.errors.items():
                    self._record_startup(name, error)
            keep[key] = current
        for key, params in self._model_params.items():
            if key not in keep:
                params.undeclare()
        self._model_params = keep

    # ----------------------------------------------------------------- transitions
    @_transition('configure', undo='_release')
    def on_configure(self, state: State) -> TransitionCallbackReturn:
        """Load the models on one backend and create their publishers.

        SUCCESS leaves the models loaded (inactive); FAILURE leaves nothing loaded and the
        node unconfigured, with the reason logged.
        """
        started = time.monotonic()
        if self._startup_errors:
            raise ValueError('refused until these start-up parameters are set to valid '
                             'values: ' + '; '.join(self._startup_errors.values()))
        manifests = self._manifests()
        backend = self._settle_backend(manifests)
        names = ', '.join(f"'{m.name}' ({m.task})" for m in manifests)
        self.get_logger().info(f'configuring {names} on backend {backend!r}')
        pipeline = build_pipelines(
            manifests, backend, model_dir=self._p('model_dir'),
            cache_dir=self._p('engine_cache_dir'), device=self._p('device'),
            precision=self._p('precision'), execution_provider=self._p('execution_provider'),
            calibration_dir=self._p('calibration_dir'),
            torch_compile=self._p('use_torch_compile'),
            log=lambda line: self.get_logger().info(clip(line, 2000)))
        models: list[_Model] = []
        try:
            self._declare_model_parameters(manifests)
            if self._startup_errors:
                raise ValueError('refused until these start-up parameters are set to valid '
                                 'values: ' + '; '.join(self._startup_errors.values()))
            for model in pipeline.models:
                prefix = model.manifest.name if len(pipeline.models) > 1 else ''
                params = self._model_params[f'{prefix}:{model.manifest.task}']
                outputs = outputs_class(model.manifest.task)(
                    self, model, f'{prefix}/' if prefix else '')
                models.append(_Model(model.manifest.name, model, params, outputs))
        except BaseException:
            for made in models:  # another model's outputs may be what clashed
                made.outputs.destroy()
            pipeline.close()
            raise
        with self._lock:
            self._pipeline, self._models = pipeline, models
        self._report(pipeline)
        unknown = sorted(name for name in getattr(self, '_parameter_overrides', {})
                         if not self.has_parameter(name) and name not in _FOREIGN_PARAMS
                         and not name.startswith('qos_overrides.'))
        if unknown:
            self.get_logger().warning(
                'the parameters given at start-up include ' + ', '.join(
                    clip(n, 60) for n in unknown[:8]) + ('...' if len(unknown) > 8 else '')
                + ', which this node does not have with these models (a typo? '
                '`ros2 param list` shows the ones it has)')
        self.get_logger().info(f'configured in {time.monotonic() - started:.2f} s')
        return TransitionCallbackReturn.SUCCESS

    def _settle_backend(self, manifests: list[ModelManifest]) -> str:
        """Check the backend against what every model supports here; reset it if need be."""
        report = backend_report(manifests)
        usable = [name for name, reason in report.items() if reason is None]
        desc = descriptor(SPECS['backend'])
        desc.additional_constraints = (
            f"One of: 'auto', {', '.join(map(repr, usable))} (valid for the current models on "
            'this machine)' if usable else 'No backend can run the current models here')
        self.set_descriptor('backend', desc)
        requested = self._p('backend')
        models = ', '.join(repr(m.name) for m in manifests)
        if not usable:
            raise RunnerError(f'no backend can run {models} on this machine: ' + '; '.join(
                f'{name}: {reason}' for name, reason in report.items()))
        if requested == 'auto' or requested in usable:
            return requested
        why = report.get(requested) or 'not a backend'
        if self._p('strict_backend'):
            raise RunnerError(f"backend '{requested}' cannot run {models} here ({why}); "
                              f"valid: auto, {', '.join(usable)} (strict_backend is true)")
        self.get_logger().warning(
            f"backend '{requested}' cannot run {models} here ({why}); using '{usable[0]}', "
            f"the best valid one (valid: {', '.join(usable)}), and setting the parameter to "
            'it. Set strict_backend to true to fail instead')
        self._set_internal(backend=usable[0])
        return usable[0]

    def _report(self, pipeline: Pipeline) -> None:
        """Log what runs where, and set the read-only report parameters."""
        cache = {True: 'hit (export skipped)', False: 'miss (exported)', None: 'not used'}
        precisions = []
        for model in pipeline.models:
            runner = model.runner
            facts = ', '.join(f'{k}={v}' for k, v in runner.describe().items())
            classes = f'; {len(model.labels)} classes' if model.labels else ''
            self.get_logger().info(
                f"model '{model.manifest.name}' ({model.manifest.task}): engine cache: "
                f'{cache[runner.cache_hit]}; {facts}{classes}')
            precisions.append(runner.config.precision)
        precision = ','.join(dict.fromkeys(precisions))
        self._set_internal(backend_in_use=pipeline.backend, precision_in_use=precision)
        first = pipeline.models[0].runner.describe()
        self._reports_memory = 'memory_used' in first
        device = str(first.get('device_name') or first.get('device') or '')
        self._facts = NodeFacts(
            self.get_fully_qualified_name(), hardware_id=device,
            models=[m.manifest.name for m in pipeline.models], backend=pipeline.backend,
            precision=precision, device=device,
            engine_cache=', '.join(cache[m.runner.cache_hit] for m in pipeline.models))

    @_transition('activate', undo='_undo_activate')
    def on_activate(self, state: State) -> TransitionCallbackReturn:
        """Subscribe to images, start the inference thread, send per-activation messages.

        FAILURE (e.g. the image topic is one of the node's own outputs) undoes what was
        started; the node stays inactive with its models loaded.
        """
        transport = self._p('image_transport')
        callback = self._on_image_with_info if _MESSAGE_INFO else self._on_image
        sub = ImageSubscription(self, callback, self._on_incompatible_qos, transport,
                                self._frame_gate)
        sub.check_topic()  # not on one of the node's outputs
        result = super().on_activate(state)
        self._image_sub = sub
        for model in self._models:
            model.outputs.activate(model.params.current)
        sub.check_topic()  # nor on an input just made (camera_info) of another type
        self._stats.reset()
        self._last_seq.clear()
        self._frame_gate.open = True
        self._model_threads = {m.name: ThreadPoolExecutor(1, thread_name_prefix=m.name)
                               for m in self._models[1:]}
        self._worker.start()
        self._active = True
        self._idle_logged = False
        self._update_input()
        self._idle_timer = self.create_timer(0.5, self._update_input_in_timer)
        outputs = ', '.join(t for m in self._models for t in m.outputs.topics[:1])
        self.get_logger().info(f"active: '{sub.topic_name}' → {outputs}")
        return result

    def _undo_activate(self) -> None:
        self._stop_input()
        super().on_deactivate(None)

    @_transition('deactivate')
    def on_deactivate(self, state: State) -> TransitionCallbackReturn:
        """Stop taking images and finish the frame in flight; keep the models loaded."""
        self._stop_input()
        return super().on_deactivate(state)

    @_transition('cleanup')
    def on_cleanup(self, state: State) -> TransitionCallbackReturn:
        """Release the models, their memory and the publishers."""
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

    # ----------------------------------------------------------------- input
    def _update_input(self) -> None:
        """Keep the image subscription as it should be: lazy mode, QoS auto (timer, 2 Hz)."""
        sub = self._image_sub
        if sub is None or not self._active:
            return
        wanted = not self._p('lazy') or any(m.outputs.wanted() for m in self._models)
        if wanted and not sub.subscribed:
            sub.subscribe(self._choose_qos(sub))
            if self._p('lazy'):
                self.get_logger().info('lazy: an output has a subscriber; taking images')
        elif not wanted and (sub.subscribed or not self._idle_logged):
            sub.unsubscribe()
            self.get_logger().info('lazy: no subscriber on any output; not taking images')
        elif wanted and self._p('qos_reliability') == 'auto':
            change = review_qos(sub.publishers(), sub.qos, int(self._p('qos_depth')),
                                sub.topic_name)
            if change is not None:
                self.get_logger().warning(f're-subscribing: {change.reason}')
                sub.subscribe(change.profile)
        self._idle_logged = not wanted

    def _update_input_in_timer(self) -> None:
        """:meth:`_update_input` on the executor's thread, where a failure must not escape.

        Activate checked the image topic; what only rcl can refuse (a topic another node of
        this process holds with another type) is logged, rate-limited, and retried.
        """
        try:
            self._update_input()
        except Exception as exc:  # noqa: BLE001 - the node must keep spinning
            self._log_error(f'cannot take images: {clip(exc, 600)}')

    def _choose_qos(self, sub: ImageSubscription) -> Any:
        """Return the subscription QoS for ``qos_reliability`` (auto: what all cameras reach)."""
        reliability, depth = self._p('qos_reliability'), int(self._p('qos_depth'))
        if reliability != 'auto':
            return subscription_qos(reliability, depth)
        choice = choose_qos(sub.publishers(), depth, sub.topic_name)
        self.get_logger().info(choice.reason)
        return choice.profile

    def _stop_input(self) -> None:
        self._active = False
        if self._idle_timer is not None:
            self.destroy_timer(self._idle_timer)
            self._idle_timer = None
        if self._image_sub is not None:
            self._image_sub.unsubscribe()
            self._image_sub = None
        self._worker.stop()
        self._frame_gate.open = True
        for pool in self._model_threads.values():
            pool.shutdown(wait=True)
        self._model_threads = {}
        for model in self._models:
            model.outputs.deactivate()

    def _on_incompatible_qos(self, info: Any) -> None:
        """Report a publisher on the image topic that cannot reach us."""
        policy = getattr(info.last_policy_kind, 'name', str(info.last_policy_kind))
        hint = (' (a best-effort camera: set qos_reliability to best_effort or auto)'
                if 'RELIABILITY' in policy.upper() else '')
        topic = self._image_sub.topic_name if self._image_sub else 'image'
        self._log_error(f"a publisher on '{topic}' offers a QoS incompatible with this "
                        f'subscription (policy {policy}){hint}; its images are not received')

    # ----------------------------------------------------------------- resources
    def _release(self) -> None:
        """Stop input, destroy publishers and unload the models (idempotent)."""
        self._stop_input()
        with self._lock:
            models, pipeline = self._models, self._pipeline
            self._models, self._pipeline = [], None
        for model in models:
            model.outputs.destroy()
        if pipeline is not None:
            pipeline.close()
        if self._p('backend_in_use') and rclpy.ok(context=self.context):
            self._set_internal(backend_in_use='', precision_in_use='')

    def release(self) -> None:
        """Release everything configure and activate made (idempotent)."""
        self._release()

    # ----------------------------------------------------------------- data path
    def _on_image(self, msg: Any) -> None:
        """Hand a frame to the inference thread (the executor's thread returns at once)."""
        self._frame_gate.open = False
        self._stats.on_received()
        self._worker.submit(msg)

    def _on_image_with_info(self, msg: Any, info: Any) -> None:
        """Count the frames the middleware dropped before this one, then hand it over.

        While a frame is processed the subscription is not read, and its KEEP_LAST history
        keeps only the newest frame: the gap in the publisher's sequence numbers is how many
        were dropped unprocessed.
        """
        seq = info.get('publication_sequence_number') if isinstance(info, dict) else None
        gid = (info.get('publisher_gid') or {}).get('data') if seq is not None else None
        if gid is not None:
            key = bytes(gid)
            last = self._last_seq.get(key)
            self._last_seq[key] = seq
            if last is not None and 1 < seq - last < 100_000:
                for _ in range(min(seq - last - 1, 1000)):
                    self._stats.on_received()
                    self._stats.on_dropped()
        self._on_image(msg)

    def _frame_in_worker(self, msg: Any) -> None:
        """On the inference thread: process a frame, then reopen the gate for the next."""
        try:
            self._process_frame(msg)
        finally:
            self._frame_gate.open = True
            self._wake.trigger()

    def _process_frame(self, msg: Any) -> None:
        """On the inference thread: convert once, run every model, publish each result.

        With several models, each model after the first runs on a thread of its own, at the
        same time: one model's pre- and post-processing overlap the other's network, and
        each runtime keeps its thread pool on the same thread frame after frame.
        """
        started = time.monotonic()
        with self._lock:
            models, helpers = self._models, self._model_threads
            if not models:
                return
            try:
                if hasattr(msg, 'format'):  # sensor_msgs/CompressedImage
                    image, encoding = compressed_to_numpy(msg)
                else:
                    image, encoding = image_to_array(msg)
            except ImageConversionError as exc:
                self._frame_error(f'skipping image: {exc}')
                return
            lazy = self._p('lazy') and len(models) > 1
            wanted = [m for m in models if not lazy or m.outputs.wanted()]
            pending = [helpers[m.name].submit(self._run_model, m, image, encoding, msg.header)
                       for m in wanted[1:]]
            results = [self._run_model(wanted[0], image, encoding, msg.header)] if wanted \
                else []
            results += [future.result() for future in pending]
        if any(results):
            stamp = msg.header.stamp
            self._stats.on_processed(
                stamp_latency(stamp.sec, stamp.nanosec, self.get_clock().now().nanoseconds),
                time.monotonic() - started)

    def _run_model(self, model: _Model, image: Any, encoding: str, header: Any) -> bool:
        """Run one model on a converted frame and publish its result; False if it failed."""
        try:
            result = model.pipeline.process(image, encoding, model.params.current)
        except ImageConversionError as exc:
            self._frame_error(f'skipping image: {exc}')
            return False
        except Exception as exc:  # noqa: BLE001 - one bad frame must not stop the node
            self._frame_error(f"model '{model.name}': inference failed on a frame: "
                              f'{type(exc).__name__}: {exc}')
            return False
        model.outputs.publish(result, header)
        return True

    def _frame_error(self, text: str) -> None:
        self._stats.on_error(text)
        self._log_error(text)

    def report_error(self, text: str) -> None:
        """Log an error about one frame's output (clipped, rate-limited, counted)."""
        self._frame_error(text)

    # ----------------------------------------------------------------- diagnostics
    def _publish_diagnostics(self) -> None:
        """Publish the node's status on /diagnostics (1 Hz, in every lifecycle state)."""
        state = self._state()
        sub = self._image_sub
        if state == 'active' and sub is not None and not sub.subscribed:
            state = 'active, lazy: no subscriber on any output'
        facts = self._facts
        if sub is not None:
            reliable = sub.qos is not None and sub.qos.reliability == ReliabilityPolicy.RELIABLE
            qos = 'n/a' if sub.qos is None else (
                f"{'reliable' if reliable else 'best effort'}, depth {sub.qos.depth} "
                f"({self._p('qos_reliability')})")
            facts = replace(facts, image_topic=sub.topic_name, image_transport=sub.transport,
                            qos=qos)
        limits = HealthLimits(float(self._p('expected_rate')), float(self._p('max_latency')),
                              float(self._p('no_image_timeout')))

        def silence() -> str:
            return explain_silence(sub.publishers(), sub.qos or subscription_qos('reliable', 1),
                                   sub.topic_name, sub.type_name) if sub else ''

        device_memory = None
        if self._models and self._reports_memory:  # describe() is not free: only if it tells
            device_memory = self._models[0].pipeline.runner.describe().get('memory_used')
        status = diagnostic_status(self._stats.snapshot(), facts, limits, state,
                                   explain_silence=silence,
                                   device_memory_bytes=device_memory)
        self._diagnostics.publish(diagnostic_array(self.get_clock().now().to_msg(), status))


def main(args: list[str] | None = None) -> None:
    """Entry point of ``vision_node``: spin until SIGINT/SIGTERM or the shutdown transition.

    Returns normally (exit code 0) on shutdown; an argument the node cannot start with ends
    the process with one line and exit code 2 (:func:`.startup.start_node`).
    """
    from .startup import start_node

    # Before any frame-sized buffer exists: see vision_nodes.platform.allocator.
    keep_freed_buffers()
    node = start_node(VisionNode, args, 'vision_node')
    executor = TransitionExecutor()
    executor.run_in_background(node._transitions)
    executor.add_node(node)
    try:
        while rclpy.ok(context=node.context) and not node.finalized:
            executor.spin_once(timeout_sec=0.5)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:
        # SIGINT/SIGTERM shut the context down under the executor, which may then fail to
        # build its wait set; that is a normal shutdown. Anything else is a real error.
        if rclpy.ok(context=node.context):
            raise
    finally:
        # A second SIGINT (ros2 launch sends one to the whole process group) must not cut
        # the release short with a KeyboardInterrupt traceback.
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)
        executor.shutdown(timeout_sec=0)
        if not executor.wait_idle(10.0):
            node.get_logger().warning('exiting while a transition is still running')
        node.release()
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == '__main__':
    main()
