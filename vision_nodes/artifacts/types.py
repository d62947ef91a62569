"""What runners may know of the artifact chain: the artifact types and the source protocol.

Runners import this module only; the conversion steps (export, fp16, IR, INT8, engine) stay
behind :class:`~.chain.ArtifactChain`, which the pipeline hands to each runner in
``RunnerConfig.artifacts``. A runner asks that source for its finished artifact with its
resolved precision and device facts, then loads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence

from ..limits import MAX_TENSORRT_WORKSPACE_BYTES

if TYPE_CHECKING:  # pragma: no cover - types only
    from ..manifest import ModelManifest
    from ..platform.cuda import GpuInfo
    from .cache import CacheEntry, ArtifactCache

#: Shape profile: (min, opt, max), each an NCHW shape.
Profile = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]
Log = Callable[[str], None]


def engine_file_name(model: str, precision: str) -> str:
    """Human-readable engine file name inside the entry: ``{model}_{precision}.engine``."""
    safe = ''.join(c if c.isalnum() or c in '-_.' else '_' for c in model) or 'model'
    return f'{safe}_{precision}.engine'


def static_profile(input_size: Sequence[int], batch: int = 1) -> Profile:
    """Return the profile of a fixed-shape engine: input_size, batches 1 (min) to ``batch``."""
    height, width = int(input_size[0]), int(input_size[1])
    return (1, 3, height, width), (batch, 3, height, width), (batch, 3, height, width)


def rect_profile(input_size: Sequence[int], stride: int = 32, batch: int = 1) -> Profile:
    """Return the profile of a rect-inference engine: stride multiples up to ``input_size``.

    Rect inference keeps the long side at input_size and rounds the other up to the stride,
    so every shape it makes lies between one stride and input_size on each side. opt is the
    full input_size at the largest batch: fixed-shape use, batched cameras and int8
    calibration run there.
    """
    height, width = int(input_size[0]), int(input_size[1])
    return (1, 3, stride, stride), (batch, 3, height, width), (batch, 3, height, width)


def model_profile(manifest: 'ModelManifest') -> Profile:
    """Return the profile a model's engine is built for: rect when it letterboxes with ``rect``.

    The batch dimension runs from 1 to the manifest's ``max_batch`` (one per camera batched).
    """
    batch = max(1, int(manifest.max_batch))
    if manifest.rect and manifest.preprocessing.letterbox:
        return rect_profile(manifest.input_size, manifest.stride, batch)
    return static_profile(manifest.input_size, batch)


def workspace_bytes(gpu: 'GpuInfo') -> int:
    """Builder workspace for ``gpu``: a quarter of its memory, at most the limit in limits.py."""
    return int(min(MAX_TENSORRT_WORKSPACE_BYTES, max(gpu.memory_total // 4, 256 << 20)))


@dataclass(frozen=True)
class OnnxModel:
    """An ONNX model to load: the verified bytes of a cache entry, or the user's own file.

    ``data`` is None for the user's ``.onnx`` (loaded by path: it may keep its weights in
    external files beside it). ``hit`` is None when no cache entry was involved.
    """

    path: Path
    data: bytes | None
    hit: bool | None


@dataclass(frozen=True)
class OpenVinoIr:
    """An OpenVINO IR to load: its verified bytes, where it lives and what made it.

    ``kind`` is 'ir' (converted), 'int8-ir' (quantized by the chain) or 'weights' (the
    manifest's own IR); ``sha256`` identifies the exact bytes (the INT8 step's parent key).
    """

    xml: bytes
    weights: bytes
    path: Path
    kind: str
    hit: bool | None
    labels: list[str] | None
    sha256: str


class ArtifactSource(Protocol):
    """What a runner asks for its artifact (implemented by :class:`~.chain.ArtifactChain`)."""

    cache: 'ArtifactCache'

    def onnx(self, manifest: 'ModelManifest', weights: Path) -> OnnxModel:
        """Return the model as ONNX (fp32): the manifest's own file or the cached export."""

    def fp16_onnx(self, manifest: 'ModelManifest', model: OnnxModel) -> OnnxModel:
        """Return the fp16-converted graph of ``model`` (GPU execution providers, TensorRT 11)."""

    def tensorrt_engine(self, manifest: 'ModelManifest', weights: Path, precision: str,
                        calibration_dir: str, *, trt: Any, rt: Any, gpu: 'GpuInfo'
                        ) -> 'CacheEntry':
        """Return the engine entry for this TensorRT, GPU and precision (built on a miss)."""

    def openvino_ir(self, manifest: 'ModelManifest', weights: Path) -> OpenVinoIr:
        """Return the model as an fp32 OpenVINO IR (converted on a miss) or the manifest's IR."""

    def openvino_int8(self, manifest: 'ModelManifest', parent: OpenVinoIr,
                      read_parent: Callable[[], Any], rect: bool, calibration_dir: str
                      ) -> OpenVinoIr:
        """Return the INT8 IR quantized from ``parent`` (calibrated at rect shapes if ``rect``)."""

    def openvino_u8_input(self, manifest: 'ModelManifest', parent: OpenVinoIr,
                          read_parent: Callable[[], Any]) -> OpenVinoIr:
        """Return ``parent`` taking the u8 NHWC image, its pre-processing embedded."""

    def openvino_compile_cache(self) -> Path:
        """Return the folder for OpenVINO's compiled blobs (``CACHE_DIR``), inside the cache."""


def artifact_source(cache: 'ArtifactCache', given: ArtifactSource | None, log: Log
                    ) -> ArtifactSource:
    """Return ``given``, else a chain over ``cache`` without calibration preprocessing.

    The pipeline always gives one (with the task's preprocessing for int8 calibration); the
    fallback serves runners created directly (``registry.create_runner``) for fp32/fp16.
    """
    if given is not None:
        return given
    from .chain import ArtifactChain

    return ArtifactChain(cache, log)
