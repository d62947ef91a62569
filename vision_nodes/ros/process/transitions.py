"""Lifecycle transition callbacks that fail in one log line and leave the node alive."""

from __future__ import annotations

import functools
from typing import Any, Callable

from rclpy.lifecycle import State, TransitionCallbackReturn

from ...artifacts.cache import CacheError
from ...loaders import ModelLoadError
from ...manifest import ManifestError
from ...runners.base import RunnerError
from ...tasks import TaskError
from ...text import clip

#: Errors whose message says it all: logged in one line, without the exception type.
EXPECTED_ERRORS = (ManifestError, RunnerError, ModelLoadError, CacheError, TaskError,
                   ValueError, ImportError, OSError)


def transition(name: str, undo: str = '') -> Callable:
    """Run a transition callback so that any failure is one log line with its cause.

    The callback's exception (rclpy would turn it into "error processing" without a word of
    why) is logged with its message, ``undo`` (a method name) rolls back what the transition
    had done, and the transition returns FAILURE: the node stays alive in its previous state.
    """
    def wrap(method: Callable) -> Callable:
        @functools.wraps(method)
        def run(self: Any, state: State) -> TransitionCallbackReturn:
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
