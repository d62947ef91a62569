"""The live parameters of one model's task, declared on the node under the model's prefix.

A node running one model declares its task's parameters under their own names
(``confidence_threshold``); a node running several prefixes them with the model's name
(``yolov8n.confidence_threshold``), so each model is tuned on its own. The values are turned
into the task's parameter object (``Task.make_params``) once per change, and the frame path
reads that object without locking (it is replaced, never mutated).
"""

from __future__ import annotations

from typing import Any, Callable

from ..param_spec import ParamSpec
from ..tasks.base import Task
from .params import coerce, declare


class ModelParameters:
    """One model's live parameters on a node: declared, validated, turned into task params."""

    def __init__(self, node: Any, task: Task, prefix: str = '') -> None:
        self._node = node
        self._task = task
        self.prefix = prefix
        self.specs: dict[str, ParamSpec] = {self.full_name(s): s for s in task.params}
        #: Start-up values that were refused (one line each, by parameter name).
        self.errors: dict[str, str] = {}
        for name, spec in self.specs.items():
            if not node.has_parameter(name):
                error = declare(node, spec, name, self._check)
                if error:
                    self.errors[name] = error
        self.values: dict[str, Any] = {
            spec.name: node.get_parameter(name).value for name, spec in self.specs.items()}
        #: What the task's postprocess takes; replaced as a whole on every change.
        self.current: Any = task.make_params(self.values)

    def full_name(self, spec: ParamSpec) -> str:
        """Return the parameter's name on the node (prefixed when it runs several models)."""
        return f'{self.prefix}.{spec.name}' if self.prefix else spec.name

    def _check(self, name: str, value: Any) -> str | None:
        return self.specs[name].validate(coerce(self.specs[name], value))

    def check(self, name: str, value: Any, active: bool) -> str | None:
        """Why ``name`` may not take ``value`` now (None: it may)."""
        spec = self.specs[name]
        reason = spec.validate(value)
        if reason is None and active and spec.applies != 'live':
            reason = (f'{name} applies when the node activates: deactivate first, set it, '
                      'then activate again')
        return reason

    def apply(self, changes: dict[str, Any],
              on_change: Callable[[Any, Any], None] = lambda old, new: None) -> None:
        """Take validated new values (full names) and rebuild the task's parameter object."""
        values = dict(self.values)
        for name, value in changes.items():
            values[self.specs[name].name] = value
        old, self.values = self.current, values
        self.current = self._task.make_params(values)
        on_change(old, self.current)

    def undeclare(self) -> None:
        """Remove this model's parameters from the node."""
        for name in self.specs:
            if self._node.has_parameter(name):
                self._node.undeclare_parameter(name)
