"""The generic vision lifecycle node (executable ``vision_node``).

* configure: read parameters, load the manifest, check the backend against it, pick the runner
  class from the backend map, load or export the model (through the engine cache), create the
  publishers.
* activate: subscribe to ``image``, send ``label_info`` (transient local), publish
  ``detections`` for every frame.
* deactivate: drop the subscription. cleanup / shutdown: release everything configure made.

Any failure in a transition is logged with its reason and returns FAILURE; the node stays
alive and can be configured again.
"""

from __future__ import annotations

import threading
import time
import traceback

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.lifecycle import Node as LifecycleNode
from rclpy.lifecycle import State, TransitionCallbackReturn
from rclpy.parameter import Parameter
from rclpy.qos import (DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy)
try:  # Iron and later
    from rclpy.event_handler import SubscriptionEventCallbacks
except ImportError:  # Humble
    from rclpy.qos_event import SubscriptionEventCallbacks
from rcl_interfaces.msg import SetParametersResult
from sensor_msgs.msg import Image
from std_msgs.msg import Header
from vision_msgs.msg import Detection2DArray, LabelInfo

from ..platform.allocator import keep_freed_buffers
from ..artifacts.cache import CacheError
from ..images import ImageConversionError
from .image_input import image_to_numpy
from ..manifest import ManifestError, resolve_manifest
from .outputs.detections import detections_to_cdr
from .outputs.label_info import label_info_msg
from ..loaders import ModelLoadError
from .params import PARAMS, SPECS, descriptor, validate
from ..pipeline import Pipeline, build_pipeline
from ..runners.base import RunnerError
from ..tasks.detect import DetectionParams, DetectionTask

#: Errors with a clear message of their own: logged without a traceback.
EXPECTED_ERRORS = (ManifestError, RunnerError, ModelLoadError, CacheError, ValueError,
                   ImportError, OSError)


_TASK_SPECS = {spec.name: spec for spec in DetectionTask.params}


class VisionNode(LifecycleNode):
    """Runs one vision model on incoming images and publishes its results."""

    def __init__(self, node_name: str = 'vision_node', **kwargs) -> None:
        super().__init__(node_name, **kwargs)
        for spec in PARAMS + DetectionTask.params:
            self.declare_parameter(spec.name, spec.default, descriptor(spec))
        self._active = False
        # Guards the pipeline and publishers between a frame in flight and a transition; only
        # contended when the node is spun by a multi-threaded executor (main() uses one thread).
        self._lock = threading.Lock()
        self._pipeline: Pipeline | None = None
        self._det_pub = None
        self._label_pub = None
        self._image_sub = None
        self._det_params = self._read_detection_params()
        #: Set by the shutdown transition; ``main`` then ends the process.
        self.finalized = False
        self._last_logged: dict[str, float] = {}
        self.add_on_set_parameters_callback(self._on_set_parameters)

    # ----------------------------------------------------------------- parameters
    def _p(self, name: str):
        return self.get_parameter(name).value

    def _read_detection_params(self, pending: dict | None = None) -> DetectionParams:
        """Post-processing thresholds from the parameters, ``pending`` values taking priority."""
        def value(name: str):
            return (pending or {}).get(name, self._p(name))

        return DetectionParams(confidence=float(value('confidence_threshold')),
                               iou=float(value('iou_threshold')),
                               max_detections=int(value('max_detections')))

    def _on_set_parameters(self, params: list[Parameter]) -> SetParametersResult:
        """Validate a parameter change; apply live ones to the next frame."""
        updates = {}
        for param in params:
            spec = SPECS.get(param.name) or _TASK_SPECS.get(param.name)
            if spec is None:
                continue
            reason = validate(param.name, param.value) or spec.validate(param.value)
            if reason:
                return SetParametersResult(successful=False, reason=reason)
            if self._active and spec.applies == 'reload':
                return SetParametersResult(successful=False, reason=(
                    f'{param.name} needs a reload and the node is active: deactivate and '
                    'clean up first, set it, then configure and activate again'))
            if self._active and spec.applies == 'activate':
                return SetParametersResult(successful=False, reason=(
                    f'{param.name} applies when the node activates: deactivate first, set '
                    'it, then activate again'))
            if spec.applies == 'live':
                updates[param.name] = param.value
        if updates:
            old_confidence = self._det_params.confidence
            # Called before the new values are stored: they come from ``updates``.
            self._det_params = self._read_detection_params(updates)
            if self._active and self._det_params.confidence != old_confidence:
                self._publish_label_info()  # its threshold field follows the parameter
        return SetParametersResult(successful=True)

    # ----------------------------------------------------------------- transitions
    def on_configure(self, state: State) -> TransitionCallbackReturn:
        """Load the manifest and model, create the publishers."""
        started = time.monotonic()
        try:
            manifest = resolve_manifest(self._p('model'))
            backend = self._p('backend')
            self.get_logger().info(
                f"configuring model '{manifest.name}' ({manifest.source}) on backend "
                f"'{backend}'")
            pipeline = build_pipeline(
                manifest, backend, model_dir=self._p('model_dir'),
                cache_dir=self._p('engine_cache_dir'), device=self._p('device'),
                precision=self._p('precision'),
                execution_provider=self._p('execution_provider'),
                log=self.get_logger().info)
        except EXPECTED_ERRORS as exc:
            self.get_logger().error(f'configure failed: {exc}')
            return TransitionCallbackReturn.FAILURE
        except Exception as exc:  # noqa: BLE001 - the node must survive any load failure
            self.get_logger().error(f'configure failed unexpectedly: {exc!r}\n'
                                    f'{traceback.format_exc()}')
            return TransitionCallbackReturn.FAILURE
        runner = pipeline.runner
        cache = {True: 'hit (export skipped)', False: 'miss (exported)', None: 'not used'}
        self.get_logger().info(
            f'engine cache: {cache[runner.cache_hit]}; runner: {runner.describe()}')
        if not pipeline.labels:
            self.get_logger().warning('the model has no class names; label_info will be empty')
        self._pipeline = pipeline
        self._det_params = self._read_detection_params()
        self._det_pub = self.create_lifecycle_publisher(Detection2DArray, 'detections', 10)
        latched = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST,
                             reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self._label_pub = self.create_lifecycle_publisher(LabelInfo, 'label_info', latched)
        self.get_logger().info(
            f'configured in {time.monotonic() - started:.2f} s '
            f'({len(pipeline.labels)} classes)')
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: State) -> TransitionCallbackReturn:
        """Subscribe to images and send label_info."""
        result = super().on_activate(state)
        reliability = {'reliable': ReliabilityPolicy.RELIABLE,
                       'best_effort': ReliabilityPolicy.BEST_EFFORT}[self._p('qos_reliability')]
        qos = QoSProfile(depth=int(self._p('qos_depth')), history=HistoryPolicy.KEEP_LAST,
                         reliability=reliability, durability=DurabilityPolicy.VOLATILE)
        events = SubscriptionEventCallbacks(incompatible_qos=self._on_incompatible_qos)
        self._image_sub = self.create_subscription(
            Image, 'image', self._on_image, qos, event_callbacks=events)
        self._publish_label_info()
        self._active = True
        self.get_logger().info(
            f"active: '{self._image_sub.topic_name}' → '{self._det_pub.topic_name}'")
        return result

    def on_deactivate(self, state: State) -> TransitionCallbackReturn:
        """Stop taking images; keep the model loaded."""
        self._active = False
        self._destroy_subscription()
        return super().on_deactivate(state)

    def on_cleanup(self, state: State) -> TransitionCallbackReturn:
        """Release the model, its memory and the publishers."""
        self.release()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: State) -> TransitionCallbackReturn:
        """Release everything, whatever state the node was in; the process then exits."""
        self.release()
        self.finalized = True
        return TransitionCallbackReturn.SUCCESS

    def on_error(self, state: State) -> TransitionCallbackReturn:
        """Release everything and go back to unconfigured."""
        self.get_logger().error('error during a transition; releasing everything')
        self.release()
        return TransitionCallbackReturn.SUCCESS

    def _on_incompatible_qos(self, info) -> None:
        """Report a publisher on ``image`` that cannot reach us: which policy, what to change."""
        policy = getattr(info.last_policy_kind, 'name', str(info.last_policy_kind))
        hint = (' (a best-effort camera: set qos_reliability to best_effort)'
                if 'RELIABILITY' in policy.upper() else '')
        self.get_logger().error(
            f"a publisher on '{self._image_sub.topic_name}' offers a QoS incompatible with "
            f'this subscription (policy {policy}){hint}; its images are not received')

    def _publish_label_info(self) -> None:
        header = Header(stamp=self.get_clock().now().to_msg())
        self._label_pub.publish(label_info_msg(self._pipeline.labels, header,
                                               self._det_params.confidence))

    # ----------------------------------------------------------------- resources
    def _destroy_subscription(self) -> None:
        if self._image_sub is not None:
            self.destroy_subscription(self._image_sub)
            self._image_sub = None

    def release(self) -> None:
        """Destroy subscription and publishers and unload the model (idempotent)."""
        self._active = False
        self._destroy_subscription()
        with self._lock:  # waits for a frame in flight
            for attr in ('_det_pub', '_label_pub'):
                pub = getattr(self, attr)
                if pub is not None:
                    self.destroy_lifecycle_publisher(pub)
                    setattr(self, attr, None)
            if self._pipeline is not None:
                self._pipeline.close()
                self._pipeline = None

    def _error_throttled(self, text: str, period_s: float = 5.0) -> None:
        """Log each distinct error at once, then at most once per ``period_s``."""
        now = time.monotonic()
        if now - self._last_logged.get(text, -period_s) >= period_s:
            if len(self._last_logged) > 256:
                self._last_logged.clear()
            self._last_logged[text] = now
            self.get_logger().error(text)

    # ----------------------------------------------------------------- data path
    def _on_image(self, msg: Image) -> None:
        """Process one frame: image → tensor → runner → decoded results → message."""
        with self._lock:
            pipeline = self._pipeline
            if pipeline is None or not self._active:
                return
            try:
                image = image_to_numpy(msg)
                dets = pipeline.process(image, msg.encoding, self._det_params)
            except ImageConversionError as exc:
                self._error_throttled(f'skipping image: {exc}')
                return
            except Exception as exc:  # noqa: BLE001 - one bad frame must not stop the node
                self._error_throttled(f'inference failed on a frame: {exc!r}')
                return
            # Serialised with NumPy: publishing bytes skips rclpy's per-field conversion.
            self._det_pub.publish(detections_to_cdr(dets, msg.header))


def main(args: list[str] | None = None) -> None:
    """Entry point of ``vision_node``: spin until SIGINT/SIGTERM or the shutdown transition."""
    # Before any frame-sized buffer exists: see vision_nodes.allocator.
    keep_freed_buffers()
    rclpy.init(args=args)
    node = VisionNode()
    # Single-threaded on purpose: rclpy's MultiThreadedExecutor adds ~4 ms per message and a
    # long latency tail. A transition requested mid-frame simply runs after that frame.
    executor = SingleThreadedExecutor()
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
        node.release()
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == '__main__':
    main()
