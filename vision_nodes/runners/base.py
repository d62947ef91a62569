"""The runner interface: a runner only runs the network (tensor in, raw outputs out).

Pre- and post-processing belong to the task and are shared by every runner. A runner is
created with a :class:`RunnerConfig`, ``load()``-ed at configure, called with ``infer()`` per
frame and ``unload()``-ed at cleanup, releasing its memory.
"""

from __future__ import annotations

import gc
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar

import numpy as np

from ..platform.allocator import release_freed_memory
from ..artifacts.cache import EngineCache
from ..manifest import KNOWN_PRECISIONS, ModelManifest

#: Values of the ``precision`` setting; :meth:`Runner.auto_precision` resolves 'auto'.
PRECISIONS = ('auto',) + KNOWN_PRECISIONS


class RunnerError(RuntimeError):
    """A runner that cannot be used with the given settings; the message says why."""


@dataclass(frozen=True)
class RunnerConfig:
    """Everything a runner needs to load a model."""

    manifest: ModelManifest
    weights: Path
    backend: str
    cache: EngineCache
    device: str = ''
    precision: str = 'fp32'
    execution_provider: str = ''
    #: Folder of calibration images for int8: the node's ``calibration_dir`` parameter, else
    #: the manifest's field resolved like its weights (the pipeline fills it in); '' = none.
    calibration_dir: str = ''
    #: Progress and decisions worth a user's eye (the node's ROS log); one line per call.
    log: Callable[[str], None] = field(default=lambda _: None, compare=False, repr=False)


class Runner(ABC):
    """Base class of every backend runner."""

    #: Backend names (keys of the backend map) this class serves.
    backends: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config: RunnerConfig) -> None:
        self.config = config
        #: Class names found in the model artifact, if any.
        self.labels: list[str] | None = None
        #: True when the last load found its artifact in the engine cache.
        self.cache_hit: bool | None = None
        #: True when ``infer`` accepts input shapes other than the manifest's ``input_size``
        #: (rect inference); set by ``_load`` for runtimes that allow it.
        self.dynamic_shapes = False
        self._loaded = False

    @classmethod
    def unavailable_reason(cls, backend: str) -> str | None:
        """None when ``backend`` can run on this machine, else a sentence saying why not."""
        return None

    @classmethod
    def precision_unavailable(cls, config: RunnerConfig) -> str | None:
        """None when ``config.precision`` can run on ``config``'s device, else why not.

        Only for what the device decides; the backend table and the manifest's ``precisions``
        are checked by ``registry.check_precision``, which calls this.
        """
        return None

    @classmethod
    def auto_precision(cls, config: RunnerConfig) -> str:
        """Return the precision ``auto`` means for this runner on ``config``'s device.

        The device's fastest precision that needs no calibration data; fp32 by default.
        """
        return 'fp32'

    @property
    def loaded(self) -> bool:
        """Whether ``load`` has succeeded and ``unload`` has not been called since."""
        return self._loaded

    def load(self) -> None:
        """Load (exporting or building through the cache if needed) and warm up the model."""
        self._load()
        self._loaded = True
        height, width = self.config.manifest.input_size
        self.infer(np.zeros((1, 3, height, width), dtype=np.float32))

    @abstractmethod
    def _load(self) -> None:
        """Backend-specific loading."""

    def prepare_shape(self, shape: tuple[int, int]) -> None:
        """Get ready for inputs of ``shape`` (height, width) before the first such frame.

        Called by the pipeline whenever the input shape changes (rect inference follows the
        camera's resolution). Runners whose runtime compiles per shape do it here, so no frame
        pays for it; the default accepts the manifest's ``input_size`` and, when
        ``dynamic_shapes`` is set, any other shape.
        """
        if tuple(shape) != tuple(self.config.manifest.input_size) and not self.dynamic_shapes:
            raise RunnerError(f'this runner only takes input shape '
                              f'{tuple(self.config.manifest.input_size)}, not {tuple(shape)}')

    @abstractmethod
    def infer(self, tensor: np.ndarray) -> list[np.ndarray]:
        """Run the network on a contiguous NCHW float32 tensor; return its raw outputs."""

    def unload(self) -> None:
        """Release the model and its memory (handed back to the OS, not kept in the heap)."""
        self._unload()
        self._loaded = False
        gc.collect()
        release_freed_memory()

    def _unload(self) -> None:
        """Backend-specific release (drop references to sessions, modules, buffers)."""

    def describe(self) -> dict[str, Any]:
        """Device and runtime facts, for logs and diagnostics."""
        return {'backend': self.config.backend, 'precision': self.config.precision}
