"""The node's parameter policy: declare, validate, decide when a change may apply, apply.

Two kinds of parameters live on the node: its own (:data:`.specs.PARAMS`: model, backend,
QoS...) and each model's task parameters (``confidence_threshold``; prefixed with the model's
name, ``people.confidence_threshold``, when the node runs several models), whose defaults
come from the model's manifest (:func:`vision_nodes.tasks.param_defaults`) unless the user set
them. Validation (:meth:`ParameterPolicy.refusal`) is separate from applying
(:meth:`_ModelParameters.apply`), and :func:`when_refused` is the one place that says when a
change may apply ('reload', 'activate', 'live' of :mod:`vision_nodes.param_spec`).
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any, Callable

from rclpy.exceptions import ParameterUninitializedException
from rclpy.parameter import Parameter
from rcl_interfaces.msg import SetParametersResult

from ...manifest import ManifestError, ModelManifest
from ...param_spec import ParamSpec
from ...runners.base import RunnerError
from ...runners.registry import backend_report
from ...tasks import TaskError, param_defaults, resolve_manifest, task_class
from ...text import clip, show
from ..outputs.registry import outputs_class
from ..process import compat
from .specs import PARAMS, REPORTS, SPECS, coerce, declare, descriptor, validate

#: Parameters that belong to ROS itself (rclpy declares them) or to other tools.
_FOREIGN_PARAMS = ('use_sim_time', 'start_type_description_service')


def when_refused(spec: ParamSpec, name: str, state: str, node_name: str) -> str | None:
    """Why a change of ``name`` may not apply in lifecycle ``state`` (None: it may)."""
    run = f'`ros2 lifecycle set {node_name}'
    if spec.applies == 'reload' and state in ('inactive', 'active'):
        steps = f'deactivate ({run} deactivate`), then ' if state == 'active' else ''
        return (f"{name} is locked while the node is configured (state '{state}'): "
                f'it takes effect at configure. {steps}clean up ({run} cleanup`), set '
                'it, then configure')
    if spec.applies == 'reload' and state != 'unconfigured':
        return f"{name} cannot change during a transition (state '{state}')"
    if spec.applies == 'activate' and state == 'active':
        return (f'{name} applies when the node activates: run {run} deactivate`, '
                'set it, then activate again')
    return None


def output_switches(task: str) -> tuple[ParamSpec, ...]:
    """Return the ROS output switches the task's outputs declare (none without outputs)."""
    try:
        return tuple(outputs_class(task).params)
    except KeyError:
        return ()


class _ModelParameters:
    """One model's parameters on the node: its task's and its outputs' switches, declared."""

    def __init__(self, node: Any, manifest: ModelManifest, prefix: str) -> None:
        self._node = node
        self._task = task_class(manifest.task)(manifest)
        self.prefix = prefix
        self._switches = output_switches(manifest.task)
        self.specs: dict[str, ParamSpec] = {
            self._full(s): s for s in tuple(self._task.params) + self._switches}
        #: Names the user gave a value (start-up override or a set): defaults never touch them.
        self.explicit = {n for n in self.specs if n in compat.parameter_overrides(node)}
        #: Start-up values that were refused (one line each, by parameter name).
        self.errors: dict[str, str] = {}
        self._defaults = self._specs_with(param_defaults(manifest))
        for name, spec in self._defaults.items():
            if not node.has_parameter(name):
                error = declare(node, spec, name, self._check)
                if error:
                    self.errors[name] = error
        self.values = {s.name: node.get_parameter(n).value for n, s in self.specs.items()}
        #: What the task's postprocess takes; replaced as a whole on every change.
        self.current: Any = self._task.make_params(self.values)
        #: Told ``(old, new)`` after every change (the model's outputs, while configured).
        self.listener: Callable[[Any, Any], None] = lambda old, new: None
        #: Told :attr:`switches` after a change of one (the model's outputs, while configured).
        self.switch_listener: Callable[[dict[str, Any]], None] = lambda switches: None

    @property
    def switches(self) -> dict[str, Any]:
        """The outputs' switch values by spec name (what ``Outputs.activate`` takes)."""
        return {spec.name: self.values[spec.name] for spec in self._switches}

    def _full(self, spec: ParamSpec) -> str:
        return f'{self.prefix}.{spec.name}' if self.prefix else spec.name

    def _check(self, name: str, value: Any) -> str | None:
        return self.refusal({name: coerce(self.specs[name], value)})

    def refusal(self, changes: dict[str, Any]) -> str | None:
        """Why these new values (full names) may not be taken together (None: they may).

        Each spec's rules (:meth:`ParamSpec.refusal`) see the other parameters as they would
        be after the change, so a rule relating two (``tracker`` and ``tracker_config``) holds
        whichever of them is set, alone or together.
        """
        values = {spec.name: self._node.get_parameter(name).value
                  for name, spec in self.specs.items() if self._node.has_parameter(name)}
        values.update((self.specs[name].name, value) for name, value in changes.items())
        for name, value in changes.items():
            reason = self.specs[name].refusal(value, values)
            if reason:
                return reason
        return None

    def recheck(self) -> dict[str, str]:
        """Check the current values again (a file a value names may have changed since)."""
        problems = {}
        for name, spec in self.specs.items():
            if spec.check is not None and self._node.has_parameter(name):
                reason = self.refusal({name: self._node.get_parameter(name).value})
                if reason:
                    problems[name] = f'parameter {name}: {reason}'
        return problems

    def _specs_with(self, defaults: dict[str, Any]) -> dict[str, ParamSpec]:
        return {name: replace(spec, default=coerce(spec, defaults[spec.name]))
                if spec.name in defaults else spec for name, spec in self.specs.items()}

    def use_manifest(self, manifest: ModelManifest) -> dict[str, Any]:
        """Take this manifest's defaults; return the values to set (the user's stay)."""
        self._defaults = self._specs_with(param_defaults(manifest))
        return {name: spec.default for name, spec in self._defaults.items()
                if name not in self.explicit and name not in self.errors
                and self._node.get_parameter(name).value != spec.default}

    def apply(self, changes: dict[str, Any]) -> None:
        """Take validated new values (full names) and rebuild the task's parameter object."""
        values = dict(self.values)
        for name, value in changes.items():
            values[self.specs[name].name] = value
        old, self.values = self.current, values
        self.current = self._task.make_params(values)
        self.listener(old, self.current)
        switched = {spec.name for spec in self._switches}
        if any(self.specs[name].name in switched for name in changes):
            self.switch_listener(self.switches)

    def undeclare(self) -> None:
        """Remove this model's parameters from the node."""
        for name in self.specs:
            if self._node.has_parameter(name):
                self._node.undeclare_parameter(name)


class ParameterPolicy:
    """Every parameter of the node: declaration, validation, when it may apply, applying."""

    def __init__(self, node: Any) -> None:
        self._node = node
        self._internal = threading.local()
        #: Parameters whose start-up value was refused; configure fails until they are set.
        self.errors: dict[str, str] = {}
        #: '<prefix>:<task>' → that model's parameters.
        self.models: dict[str, _ModelParameters] = {}
        node.add_on_set_parameters_callback(self._on_set)
        with self.as_node():  # declare() checks start-up values itself
            for spec in PARAMS + REPORTS:
                self._record(spec.name, declare(node, spec, check=validate))
        self.declare_models(self.manifests_or_none())

    # ------------------------------------------------------------- reading
    def value(self, name: str) -> Any:
        """Return what a node parameter holds: its default while it has no value yet."""
        try:
            return self._node.get_parameter(name).value
        except ParameterUninitializedException:
            return SPECS[name].default

    def manifests(self) -> list[ModelManifest]:
        """Return the manifests of ``models`` (else ``model``); refuse a duplicate name."""
        names = [m.strip() for m in (self.value('models') or []) if m.strip()]
        manifests = [resolve_manifest(n) for n in names or [self.value('model')]]
        names = [m.name for m in manifests]
        duplicate = next((n for n in names if names.count(n) > 1), None)
        if duplicate:
            raise ManifestError(f"two models are named '{clip(duplicate)}': each model of a "
                                'node needs its own name (it namespaces its topics and '
                                'parameters)')
        return manifests

    def manifests_or_none(self) -> list[ModelManifest] | None:
        """:meth:`manifests`, or None when they cannot be read (configure will say why)."""
        try:
            return self.manifests()
        except Exception:  # noqa: BLE001 - configure reports it
            return None

    def require_valid(self) -> None:
        """Raise ValueError naming every value that is refused now.

        Start-up values still refused, and values whose rule no longer holds (a
        ``tracker_config`` file changed since it was set).
        """
        problems = dict(self.errors)
        for model in self.models.values():
            problems.update({k: v for k, v in model.recheck().items() if k not in problems})
        if problems:
            raise ValueError('refused until these parameters are set to valid values: '
                             + '; '.join(problems.values()))

    def warn_unknown_overrides(self, warn: Callable[[str], None]) -> None:
        """Warn about start-up parameters that name nothing this node has (typos).

        Run at the end of configure: every publisher exists, so a ``qos_overrides.*``
        publisher parameter still undeclared names no topic of this node.
        """
        unknown = sorted(n for n in compat.parameter_overrides(self._node)
                         if not self._node.has_parameter(n) and n not in _FOREIGN_PARAMS
                         and not _declared_later(n))
        if unknown:
            warn('the parameters given at start-up include ' + ', '.join(
                clip(n, 60) for n in unknown[:8]) + ('...' if len(unknown) > 8 else '')
                + ', which this node does not have with these models (a typo? '
                '`ros2 param list` shows the ones it has)')

    # ------------------------------------------------------------- changing
    def as_node(self) -> Any:
        """Context: parameter sets inside it are the node's own (reports, declarations)."""
        policy = self

        class _AsNode:
            def __enter__(self) -> None:
                policy._internal.on = True

            def __exit__(self, *exc: Any) -> None:
                policy._internal.on = False
        return _AsNode()

    def set_as_node(self, **values: Any) -> None:
        """Set parameters as the node itself (report values, a reset backend, defaults)."""
        with self.as_node():
            self._node.set_parameters([Parameter(k, value=v) for k, v in values.items()])

    def declare_models(self, manifests: list[ModelManifest] | None) -> None:
        """Declare each model's task parameters with its manifest's defaults."""
        if manifests is None:
            return
        prefixes = [m.name if len(manifests) > 1 else '' for m in manifests]
        keep: dict[str, _ModelParameters] = {}
        with self.as_node():  # set_parameters sees the new names
            for manifest, prefix in zip(manifests, prefixes):
                key = f'{prefix}:{manifest.task}'
                params = self.models.get(key)
                if params is not None:
                    values = params.use_manifest(manifest)
                    if values:
                        self.set_as_node(**values)
                else:
                    try:
                        params = _ModelParameters(self._node, manifest, prefix)
                    except TaskError:
                        continue
                    for name, error in params.errors.items():
                        self._record(name, error)
                keep[key] = params
        for key, params in self.models.items():
            if key not in keep:
                params.undeclare()
        self.models = keep

    def model(self, prefix: str, task: str) -> _ModelParameters:
        """Return the parameters of the model under ``prefix`` ('' when the node runs one)."""
        return self.models[f'{prefix}:{task}']

    def settle_backend(self, manifests: list[ModelManifest], warn: Callable[[str], None]
                       ) -> str:
        """Check ``backend`` against what every model supports here; reset it if need be."""
        report = backend_report(manifests)
        usable = [name for name, reason in report.items() if reason is None]
        desc = descriptor(SPECS['backend'])
        desc.additional_constraints = (
            f"One of: 'auto', {', '.join(map(repr, usable))} (valid for the current models on "
            'this machine)' if usable else 'No backend can run the current models here')
        self._node.set_descriptor('backend', desc)
        requested = self.value('backend')
        models = ', '.join(repr(m.name) for m in manifests)
        if not usable:
            raise RunnerError(f'no backend can run {models} on this machine: ' + '; '.join(
                f'{name}: {reason}' for name, reason in report.items()))
        if requested == 'auto' or requested in usable:
            return requested
        why = report.get(requested) or 'not a backend'
        if self.value('strict_backend'):
            raise RunnerError(f"backend '{requested}' cannot run {models} here ({why}); "
                              f"valid: auto, {', '.join(usable)} (strict_backend is true)")
        warn(f"backend '{requested}' cannot run {models} here ({why}); using '{usable[0]}', "
             f"the best valid one (valid: {', '.join(usable)}), and setting the parameter to "
             'it. Set strict_backend to true to fail instead')
        self.set_as_node(backend=usable[0])
        return usable[0]

    # ------------------------------------------------------------- validating
    def _record(self, name: str, error: str | None) -> None:
        if error:
            self.errors[name] = error
            self._node.get_logger().error(
                f'{error}; it keeps its default and the node stays unconfigured until it is '
                f'set to a valid value (ros2 param set {self._node.get_fully_qualified_name()} '
                f'{name} ...)')

    def refusal(self, name: str, value: Any, state: str) -> str | None:
        """Why the user may not set ``name`` to ``value`` in ``state`` (None: they may)."""
        spec = SPECS.get(name)
        model = next((m for m in self.models.values() if name in m.specs), None)
        if spec in REPORTS:
            return f'{name} is set by the node to report what it runs; it is read only'
        if spec is None and model is not None:
            spec = model.specs[name]
        if spec is None:
            return None
        reason = validate(name, value) if name in SPECS else spec.validate(value)
        return reason or when_refused(spec, name, state,
                                      self._node.get_fully_qualified_name())

    def _on_set(self, params: list[Parameter]) -> SetParametersResult:
        """Validate every change first; then apply the models' ones (next frame)."""
        internal = getattr(self._internal, 'on', False)
        state = compat.lifecycle_state(self._node)
        changes: dict[int, dict[str, Any]] = {}
        for param in params:
            if param.type_ == Parameter.Type.NOT_SET:  # declared without a value
                continue
            if not internal and not self._node.has_parameter(param.name):
                # rclpy refuses undeclared names before this callback, except the empty
                # one (its check tests the names' truth): refuse that the same way.
                return SetParametersResult(successful=False, reason=(
                    f'parameter {show(param.name)} is not declared on this node '
                    f'(`ros2 param list {self._node.get_fully_qualified_name()}` lists its '
                    'parameters)'))
            reason = None if internal and param.name in SPECS else \
                self.refusal(param.name, param.value, state)
            if reason:
                return SetParametersResult(successful=False, reason=reason)
            model = next((m for m in self.models.values() if param.name in m.specs), None)
            if model is not None:
                changes.setdefault(id(model), {})[param.name] = param.value
        models = [m for m in self.models.values() if id(m) in changes]
        for model in models:  # the rules that relate a model's parameters
            reason = model.refusal(changes[id(model)])
            if reason:
                return SetParametersResult(successful=False, reason=reason)
        for param in params:
            self.errors.pop(param.name, None)
        for model in models:
            if not internal:
                model.explicit.update(changes[id(model)])
            model.apply(changes[id(model)])
        return SetParametersResult(successful=True)


def _declared_later(name: str) -> bool:
    """Whether ``name`` is declared only at activate (an image subscription's QoS override)."""
    return name.startswith('qos_overrides.') and '.subscription.' in name
