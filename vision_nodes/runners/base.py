"""The runner interface: a runner only runs the network (tensor in, raw outputs out).

Pre- and post-processing belong to the task and are shared by every runner. A runner is
created with a :class:`RunnerConfig` already decided (``registry.resolve``: device, precision,
device facts) and holding its finished artifact (the pipeline asks the artifact chain), is
``load()``-ed at configure, called with ``infer()`` per frame and ``unload()``-ed at cleanup,
releasing its memory.
"""

from __future__ import annotations

import gc
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar

import numpy as np

from ..artifacts.cache import ArtifactCache
from ..backends import BACKENDS, PRECISIONS
from ..platform.allocator import release_freed_memory
from ..platform.devices import Device, DeviceError, require_device
from ..text import clip

if TYPE_CHECKING:
    from ..manifest import ModelManifest

__all__ = ['PRECISIONS', 'Runner', 'RunnerConfig', 'RunnerError']


class RunnerError(RuntimeError):
    """A runner that cannot be used with the given settings; the message says why."""


@dataclass(frozen=True)
class RunnerConfig:
    """Everything a runner needs to load a model."""

    manifest: ModelManifest
    weights: Path
    backend: str
    cache: ArtifactCache
    device: str = ''
    precision: str = 'fp32'
    execution_provider: str = ''
    #: Folder of calibration images for int8: the node's ``calibration_dir`` parameter, else
    #: the manifest's field resolved like its weights (the pipeline fills it in); '' = none.
    calibration_dir: str = ''
    #: PyTorch on a GPU: run non-Ultralytics models through ``torch.compile`` (compiled and
    #: warmed up in ``load``; a failure falls back to eager with a warning).
    torch_compile: bool = True
    #: PyTorch on a GPU: take the u8 image and convert it there, and decode detections there
    #: (only the kept boxes come back); off: the host's float tensor and decode.
    device_io: bool = True
    #: PyTorch on a GPU: replay the eager module as CUDA graphs, captured per input shape
    #: (a failed capture falls back to eager with a warning).
    cuda_graphs: bool = True
    #: Progress and decisions worth a user's eye (the node's ROS log); one line per call.
    log: Callable[[str], None] = field(default=lambda _: None, compare=False, repr=False)
    #: Device facts decided before the runner exists (``registry.resolve``, from the
    #: backend's plan: an ``OpenVinoPlan``, the TensorRT GPU's ``GpuInfo``); None if none.
    device_facts: Any = field(default=None, compare=False)
    #: The finished artifact the runner loads, from the artifact chain (``OnnxArtifact``,
    #: ``OpenVinoIr``, ``EngineArtifact``); None for runners that load the weights.
    artifact: Any = field(default=None, compare=False, repr=False)


class Runner(ABC):
    """Base class of every backend runner."""

    #: Backend names (keys of the backend map) this class serves.
    backends: ClassVar[tuple[str, ...]] = ()
    #: ``infer`` can take the letterboxed u8 (1, H, W, 3) bgr image, the model's
    #: pre-processing done by the runtime; the pipeline turns it on (``takes_u8``)
    #: when the task can hand such images.
    supports_u8_input: ClassVar[bool] = False
    #: ``infer`` can return outputs that stay on the device (see ``infer``)
    #: for a task that decodes them there; the pipeline turns it on (``device_outputs``).
    supports_device_outputs: ClassVar[bool] = False

    def __init__(self, config: RunnerConfig) -> None:
        self.config = config
        #: Class names found in the model artifact, if any.
        self.labels: list[str] | None = None
        #: True when the last load found its artifact in the engine cache.
        self.cache_hit: bool | None = None
        #: True when ``infer`` accepts input shapes other than the manifest's ``input_size``
        #: (rect inference); set by ``_load`` for runtimes that allow it.
        self.dynamic_shapes = False
        #: Shapes of the outputs of the warm-up run at ``input_size``, for the task to check
        #: that the model is what the manifest says (see ``DetectionTask.check_model``).
        self.output_shapes: list[tuple[int, ...]] | None = None
        #: Most frames one ``infer`` call takes (the first tensor dimension); set by ``_load``
        #: up to the manifest's ``max_batch`` where the loaded model has a free batch axis.
        self.max_batch = 1
        #: Threads that may call ``infer`` at once, each with its own frame, running side by
        #: side on the device (OpenVINO on a CPU serving several cameras: its streams); 1 =
        #: one call at a time.
        self.concurrent_frames = 1
        #: Frames come as the u8 image (see ``supports_u8_input``).
        self.takes_u8 = False
        #: ``infer`` returns device outputs (see ``supports_device_outputs``).
        self.device_outputs = False
        #: Names of the outputs, in ``infer``'s order, where the runtime names them (None for
        #: PyTorch modules): tasks with several outputs check them at configure.
        self.output_names: list[str] | None = None
        self._loaded = False

    @classmethod
    def unavailable_reason(cls, backend: str) -> str | None:
        """None when ``backend`` can run on this machine, else a sentence saying why not."""
        return None

    @classmethod
    def device_kinds(cls, config: RunnerConfig) -> tuple[str, ...]:
        """Kinds of ``device`` this runner can honour for ``config`` (the default at least).

        The kinds are :func:`~vision_nodes.platform.devices.parse_device`'s; by default the
        backend table's (:data:`~.backends.BACKENDS`), which a runner may narrow per setting.
        """
        row = BACKENDS.get(config.backend)
        return row.device_kinds if row is not None else ('default',)

    @classmethod
    def device_user(cls, config: RunnerConfig) -> str:
        """Who uses the device, as a refusal names it ("backend 'cpu'")."""
        return f"backend '{config.backend}'"

    @classmethod
    def check_device(cls, config: RunnerConfig) -> Device:
        """Return ``config.device`` parsed, or a one-line RunnerError if it cannot be used.

        Every backend reads the setting with the same parser and refuses the kinds it cannot
        honour (:meth:`device_kinds`), before anything is loaded.
        """
        try:
            return require_device(config.device, cls.device_kinds(config),
                                  cls.device_user(config))
        except DeviceError as exc:
            raise RunnerError(str(exc)) from None

    @property
    def loaded(self) -> bool:
        """Whether ``load`` has succeeded and ``unload`` has not been called since."""
        return self._loaded

    def load(self) -> None:
        """Load the model (the weights, or the finished artifact in the config) and warm it up.

        The model's input shape is checked against the manifest before the warm-up run, and
        a model that fails either is unloaded again: a RunnerError says why, in one line.
        """
        try:
            self._load()
            self._loaded = True
            self.check_input_shape(self.model_input_shape())
            height, width = self.config.manifest.input_size
            try:
                outputs = self.infer(self.blank_input(height, width))
            except RunnerError:
                raise
            except Exception as exc:  # noqa: BLE001 - each runtime raises its own types
                raise RunnerError(f'the warm-up run on a blank {height}x{width} image failed: '
                                  f'{clip(exc, 300)}') from exc
            self.output_shapes = [tuple(np.shape(out)) for out in outputs]
        except BaseException:
            self.unload()
            raise

    def model_input_shape(self) -> tuple[int | None, ...] | None:
        """Return the loaded model's input shape, None for a free dimension; None if unknown."""
        return None

    def blank_input(self, height: int, width: int) -> np.ndarray:
        """Return the warm-up's blank (1, 3, height, width) frame in the form ``infer`` takes."""
        return np.zeros((1, 3, height, width), dtype=np.float32)

    def batch_limit(self, free_batch_axis: bool) -> int:
        """Most frames per run: the manifest's ``max_batch`` if the model's batch axis is free."""
        return max(1, int(self.config.manifest.max_batch)) if free_batch_axis else 1

    def check_input_shape(self, shape: tuple[int | None, ...] | None) -> None:
        """Raise RunnerError unless a model input of ``shape`` takes the manifest's tensors.

        The tensors are (1, 3, height, width) at the manifest's ``input_size``; a free (None)
        dimension takes anything.
        """
        if shape is None:
            return
        manifest = self.config.manifest
        height, width = manifest.input_size
        where = f"model '{manifest.name}'"
        shown = 'x'.join('?' if d is None else str(d) for d in shape)
        if len(shape) != 4:
            raise RunnerError(f'{where}: the model takes a {len(shape)}-D input ({shown}); a '
                              'vision model takes (1, 3, height, width)')
        if shape[0] not in (None, 1) or shape[1] not in (None, 3):
            raise RunnerError(f'{where}: the model takes input {shown}; vision_nodes feeds '
                              'one 3-channel image at a time (1 x 3 x height x width)')
        model_hw = shape[2:]
        if any(d is not None and d != want for d, want in zip(model_hw, (height, width))):
            fix = [d if d is not None else want for d, want in zip(model_hw, (height, width))]
            raise RunnerError(f'{where}: the model takes input {shown} but the manifest says '
                              f'`input_size: [{height}, {width}]`: set `input_size: '
                              f'[{fix[0]}, {fix[1]}]` in the manifest')

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

    def input_buffer(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """Return a host array for a batch's input that :meth:`infer` takes as it is.

        The caller fills it (each frame into its row) and passes it to :meth:`infer`; a runner
        that stages its input somewhere (PyTorch on a GPU: a pinned buffer) hands that out, so
        the frames are copied once.
        """
        return np.empty(shape, dtype)

    @abstractmethod
    def infer(self, tensor: np.ndarray) -> list[np.ndarray]:
        """Run the network on a contiguous NCHW float32 tensor; return its raw outputs.

        N is 1, or up to :attr:`max_batch` frames of one shape; output i belongs to frame i.
        With ``takes_u8`` the input may be the u8 image instead; with ``device_outputs`` the
        outputs may be array-likes that stay on the device: ``np.asarray`` copies one back,
        and offers ``decode_ops`` (the steps of the task's decode done there, only the
        kept boxes copied back).
        """

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

    def compute_type(self) -> str:
        """Return the arithmetic the model really runs in: fp32, fp16, bf16 or int8.

        The resolved precision, unless the runtime turns it into another type (OpenVINO
        computes ``fp16`` in bf16 on CPUs with native bf16); the node's ``precision_in_use``,
        its log and its diagnostics say this.
        """
        return self.config.precision
