"""Parameter specifications: name, default, constraints, when a change applies, validation.

ROS-free, so that tasks can declare their live parameters next to the processing that reads
them; :mod:`vision_nodes.ros.params.specs` turns a spec into an rcl ``ParameterDescriptor``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

#: A rule beyond type and range: ``check(value, values)`` returns why ``value`` is refused
#: (one line naming the parameter, the value and the fix) or None; ``values`` are the model's
#: parameter values by spec name as they would be after the change (a rule may relate two).
Check = Callable[[Any, Mapping[str, Any]], 'str | None']

#: When a changed value takes effect on a running node.
#: 'reload': refused while configured or active; used at the next configure.
#: 'activate': refused while active; used at the next activate.
#: 'live': takes effect on the next frame.
APPLIES = ('reload', 'activate', 'live')


@dataclass(frozen=True)
class ParamSpec:
    """One parameter: default, description, and constraints."""

    name: str
    default: Any
    description: str
    choices: tuple[str, ...] = ()
    float_range: tuple[float, float] | None = None
    int_range: tuple[int, int] | None = None
    applies: str = 'reload'
    #: Longest accepted string (and longest list, for string arrays).
    max_length: int = 4096
    #: A further rule (see :data:`Check`), run by :meth:`refusal` after :meth:`validate`.
    check: Check | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.applies not in APPLIES:
            raise ValueError(f'ParamSpec {self.name}: applies={self.applies!r}')
        if self.validate(self.default) is not None:
            raise ValueError(f'ParamSpec {self.name}: default {self.default!r} is invalid')

    def with_default(self, value: Any) -> ParamSpec:
        """Return this spec with ``value`` (a manifest's) as its default, checked as any value."""
        problem = self.validate(value)
        if problem is not None:
            raise ValueError(problem)
        return replace(self, default=value)

    @property
    def type_name(self) -> str:
        """Name of the value type with its article, as an error message says it."""
        if isinstance(self.default, list):
            return 'a list of strings'
        return {bool: 'a boolean', int: 'an integer', float: 'a number',
                str: 'a string'}[type(self.default)]

    def validate(self, value: Any) -> str | None:
        """Return None when ``value`` is acceptable, else the reason it is not (one line)."""
        from .text import clip  # local: text has no dependencies, this keeps the order simple

        shown = clip(repr(value), 80)
        if isinstance(self.default, list):
            if not isinstance(value, (list, tuple)) or \
                    not all(isinstance(v, str) for v in value):
                return f'{self.name} must be {self.type_name}, got {shown}'
            if len(value) > self.max_length:
                return f'{self.name} has {len(value)} entries (at most {self.max_length})'
            return None
        if type(value) is not type(self.default):
            return (f'{self.name} must be {self.type_name}, '
                    f'got {type(value).__name__} {shown}')
        if isinstance(value, float) and not math.isfinite(value):
            return f'{self.name} must be a finite number, got {shown}'
        if isinstance(value, str) and len(value) > self.max_length:
            return f'{self.name} is {len(value)} characters long (at most {self.max_length})'
        if self.choices and value not in self.choices:
            return f"{self.name}={shown} is not one of {', '.join(map(repr, self.choices))}"
        if self.float_range and not self.float_range[0] <= value <= self.float_range[1]:
            return f'{self.name}={value} is outside [{self.float_range[0]}, ' \
                   f'{self.float_range[1]}]'
        if self.int_range and not self.int_range[0] <= value <= self.int_range[1]:
            return f'{self.name}={value} is outside [{self.int_range[0]}, {self.int_range[1]}]'
        return None

    def refusal(self, value: Any, values: Mapping[str, Any]) -> str | None:
        """Return why ``value`` is refused given the other ``values`` (None: accepted).

        :meth:`validate`'s type and range rules first, then :attr:`check`; the parameter
        policy calls it for every set and every start-up value, and again at configure.
        """
        return self.validate(value) or (self.check(value, values) if self.check else None)
