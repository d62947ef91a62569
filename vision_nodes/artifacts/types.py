"""What runners may know of the artifact chain: the request and the finished artifacts.

Runners import this module only; the conversion steps (export, fp16, IR, INT8, engine) stay
behind :class:`~.chain.ArtifactChain`. The registry says which artifact a resolved runner
loads (an :class:`ArtifactRequest`), the pipeline asks the chain for it and hands the result
to the runner in ``RunnerConfig.artifact``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..limits import MAX_TENSORRT_WORKSPACE_BYTES
from ..text import clip
from .cache import CacheError

if TYPE_CHECKING:  # pragma: no cover - types only
    from ..manifest import ModelManifest, Preprocessing
    from ..platform.cuda import GpuInfo
    from .cache import CacheEntry

#: Shape profile: (min, opt, max), each an NCHW shape (NHWC for a u8 image input).
Profile = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]
Log = Callable[[str], None]


def embedded_preprocessing(prep: 'Preprocessing') -> dict[str, Any]:
    """Return the cache-key fields of pre-processing embedded in a model (u8 NHWC input)."""
    from ..images import U8_INPUT_ORDER

    return {'tensor': f'u8 NHWC {U8_INPUT_ORDER}', 'color_order': prep.color_order,
            'scale': float(prep.scale), 'mean': [float(v) for v in prep.mean],
            'std': [float(v) for v in prep.std]}


#: The build facts in every TensorRT engine entry (class names under ``labels``), and the
#: engine file's ending (its name begins with the model's: :func:`engine_file_name`).
BUILD_FACTS, ENGINE_SUFFIX = 'build.json', '.engine'


def engine_file_name(model: str, precision: str) -> str:
    """Human-readable engine file name inside the entry: ``{model}_{precision}.engine``."""
    safe = ''.join(c if c.isalnum() or c in '-_.' else '_' for c in model) or 'model'
    return f'{safe}_{precision}{ENGINE_SUFFIX}'


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


def nhwc_profile(profile: Profile) -> Profile:
    """Return an NCHW ``profile`` laid out NHWC, as a u8 image input takes it."""
    return tuple((n, h, w, c) for n, c, h, w in profile)  # type: ignore[return-value]


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

    def read(self) -> bytes:
        """Return the model's bytes: the verified entry's, or the user's file (bounded)."""
        if self.data is not None:
            return self.data
        from ..loaders import read_weights

        try:
            return read_weights(self.path)
        except OSError as exc:
            raise CacheError(clip(exc, 600)) from exc


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
    #: Folder for OpenVINO's compiled blobs (``CACHE_DIR``), where the device is worth it.
    compile_cache: Path | None = None
    #: The same model taking the u8 NHWC image, its pre-processing embedded (where asked).
    u8_input: 'OpenVinoIr | None' = None


@dataclass(frozen=True)
class OnnxArtifact:
    """What ONNX Runtime loads: the fp32 model and, for a GPU provider at fp16, its conversion.

    ``u8`` and ``fp16_u8`` are the same graphs taking the u8 NHWC image, the pre-processing
    embedded (where the provider that takes it may run here and the model can be wrapped).
    """

    model: OnnxModel
    fp16: OnnxModel | None = None
    u8: OnnxModel | None = None
    fp16_u8: OnnxModel | None = None


@dataclass(frozen=True)
class EngineArtifact:
    """A TensorRT engine: its cache entry and the engine file's name in it."""

    entry: 'CacheEntry'
    name: str

    @property
    def path(self) -> Path:
        """Where the engine file lives."""
        return self.entry.file(self.name)


@dataclass(frozen=True)
class ArtifactRequest:
    """Which finished artifact a runner loads, decided before it exists.

    ``kind`` is the backend table's ``artifact`` ('weights', 'onnx', 'openvino',
    'tensorrt'); the rest are the resolved settings and the device facts that change it.
    """

    kind: str
    manifest: 'ModelManifest'
    weights: Path
    precision: str
    calibration_dir: str = ''
    #: onnx: the execution provider that runs the fp16-converted graph ('' if none does).
    fp16_for: str = ''
    #: openvino: whether compiled blobs are kept (GPU, NPU).
    compile_cache: bool = False
    #: openvino, onnx, tensorrt: also the u8-input twin (the task hands the u8 image; the
    #: runtime converts); tensorrt builds its engine from it instead of the float graph.
    u8_input: bool = False
    #: onnx: the execution provider that runs the u8-input graph ('' if none does).
    u8_for: str = ''
    #: tensorrt: the GPU the engine is built for.
    gpu: 'GpuInfo | None' = None
