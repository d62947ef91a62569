"""TensorRT's one logger per process, and where its messages go (used to build and to run).

TensorRT keeps the logger it was first given for every builder and runtime of the process,
so the engine build (:mod:`.tensorrt_build`) and the runner that loads the engine share this
one; :func:`log_route` sends the messages raised on a thread to whoever builds or runs there.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import weakref
from types import ModuleType
from typing import Any, Callable, Iterator

from ..text import clip

Log = Callable[[str], None]

_LOGGERS: 'weakref.WeakKeyDictionary[ModuleType, Any]' = weakref.WeakKeyDictionary()
_LOGGERS_LOCK = threading.Lock()
_ROUTE = threading.local()
_FALLBACK = logging.getLogger('vision_nodes.tensorrt')


@contextlib.contextmanager
def log_route(log: Log) -> Iterator[None]:
    """Send TensorRT's messages raised on this thread to ``log`` while the block runs."""
    previous = getattr(_ROUTE, 'log', None)
    _ROUTE.log = log
    try:
        yield
    finally:
        _ROUTE.log = previous


def tensorrt_logger(trt: ModuleType) -> Any:
    """Return this process's one ``trt.ILogger`` (created on first use, never released).

    TensorRT keeps the logger it was first given for every builder and runtime of the
    process (a later one is ignored) and calls it from C++ for as long as any object
    created through it lives. A logger per runner would send one model's messages to
    another's log and could be freed while TensorRT still calls it. Warnings and errors go
    to the log routed on the calling thread (:func:`log_route`), else to Python's
    ``logging`` (``vision_nodes.tensorrt``).
    """
    with _LOGGERS_LOCK:
        logger = _LOGGERS.get(trt)
        if logger is None:
            logger = _LOGGERS[trt] = _make_logger(trt)
        return logger


def _make_logger(trt: ModuleType) -> Any:
    forward = {trt.ILogger.Severity.INTERNAL_ERROR: 'error',
               trt.ILogger.Severity.ERROR: 'error',
               trt.ILogger.Severity.WARNING: 'warning'}

    class _Logger(trt.ILogger):
        def __init__(self) -> None:
            trt.ILogger.__init__(self)

        def log(self, severity: Any, msg: str) -> None:
            level = forward.get(severity)
            if not level:
                return
            line = f'TensorRT {level}: {clip(msg)}'
            try:
                routed = getattr(_ROUTE, 'log', None)
                if routed is not None:
                    routed(line)
                else:
                    _FALLBACK.warning(line)
            except Exception:  # noqa: BLE001 - never raise into TensorRT
                pass

    return _Logger()
