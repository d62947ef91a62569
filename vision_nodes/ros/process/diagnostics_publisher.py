"""The node's status on ``/diagnostics`` (1 Hz, in every lifecycle state).

It also logs, once per configure, what runs where. Messages are built by :mod:`.diagnostics`;
the counts come from the frame path, the input's facts from the image input. Not a lifecycle
publisher: diagnostics also tell an unconfigured node's state.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

from diagnostic_msgs.msg import DiagnosticArray

from ...pipeline import LoadedModel, Pipeline
from ...stats import HealthLimits
from ..inputs.frame_path import FramePath
from ..inputs.qos import explain_slow_delivery, middleware
from ..inputs.subscription import ImageInput
from .diagnostics import NodeFacts, diagnostic_array, diagnostic_status

_CACHE = {True: 'hit (export skipped)', False: 'miss (exported)', None: 'not used'}


def _agreement(model: LoadedModel) -> str:
    """Return one model's precision check in a few words, for the status."""
    check = model.precision_check
    found = check.agreement
    words = f'{check.compute_type} not measured ({check.note})' if found is None else \
        f'{check.compute_type} {found.value:.3f} {found.measure} of fp32 on {found.images} images'
    if model.runner.compute_type() != check.compute_type:
        words += f', below its budget: runs {model.runner.compute_type()}'
    return f'{model.manifest.name}: {words}'


class DiagnosticsPublisher:
    """Publish the node's DiagnosticArray once a second; hold the facts of what it runs."""

    def __init__(self, node: Any, frames: FramePath, param: Callable[[str], Any],
                 state: Callable[[], str]) -> None:
        self._node = node
        self._frames = frames
        self._param = param
        self._state = state
        #: The RMW and its profile file: the process's, fixed while it runs.
        self._middleware = middleware()
        self._facts = NodeFacts(node.get_fully_qualified_name(), middleware=self._middleware)
        #: Whether the runner's describe() reports device memory (CUDA, TensorRT).
        self._reports_memory = False
        #: The image input while active (None otherwise).
        self.input: ImageInput | None = None
        self._pub = node.endpoints.publisher(DiagnosticArray, '/diagnostics', 10)
        self._timer = node.steady_timer(1.0, self.publish)  # with simulated time too

    def configured(self, pipeline: Pipeline) -> str:
        """Log what runs where, keep it for the status; return the precision(s) in use."""
        precisions = []
        for model in pipeline.models:
            runner = model.runner
            facts = ', '.join(f'{k}={v}' for k, v in runner.describe().items())
            classes = f'; {len(model.labels)} classes' if model.labels else ''
            self._node.get_logger().info(
                f"model '{model.manifest.name}' ({model.manifest.task}): engine cache: "
                f'{_CACHE[runner.cache_hit]}; {facts}{classes}')
            precisions.append(runner.compute_type())
        first = pipeline.models[0].runner.describe()
        self._reports_memory = 'memory_used' in first
        device = str(first.get('device_name') or first.get('device') or '')
        precision = ','.join(dict.fromkeys(precisions))
        self._facts = NodeFacts(
            self._node.get_fully_qualified_name(), hardware_id=device,
            models=[m.manifest.name for m in pipeline.models], backend=pipeline.backend,
            precision=precision, device=device,
            engine_cache=', '.join(_CACHE[m.runner.cache_hit] for m in pipeline.models),
            agreement='; '.join(_agreement(m) for m in pipeline.models
                                if m.precision_check is not None and
                                m.precision_check.compute_type != 'fp32'),
            middleware=self._middleware)
        return precision

    def publish(self) -> None:
        """Publish the node's status now."""
        state, sub, facts = self._state(), self.input, self._facts
        if state == 'active' and sub is not None and not sub.subscribed:
            state = 'active, lazy: no subscriber on any output'
        if sub is not None:
            facts = replace(facts, image_topic=sub.topic_name, image_transport=sub.transport,
                            qos=sub.qos_text())
        limits = HealthLimits(float(self._param('expected_rate')),
                              float(self._param('max_latency')),
                              float(self._param('no_image_timeout')))
        models = self._frames.models
        device_memory = None
        if models and self._reports_memory:  # describe() is not free: only if it tells
            device_memory = models[0].pipeline.runner.describe().get('memory_used')
        extra, delivery = self._frames.stages.report()
        for model in models:  # outputs that count what they do (tracking, 3D)
            extra.update(getattr(model.outputs, 'diagnostics', dict)())
        status = diagnostic_status(
            self._frames.stats.snapshot(), facts, limits, state,
            explain_silence=sub.explain_silence if sub else (lambda: ''),
            device_memory_bytes=device_memory, extra=extra, delivery=delivery,
            explain_slow_delivery=explain_slow_delivery)
        cameras = sub.statuses(facts, limits, state) if hasattr(sub, 'statuses') else []
        self._pub.publish(diagnostic_array(self._node.get_clock().now().to_msg(), status,
                                           *cameras))
