"""Which ONNX graph a TensorRT engine is built from: fp32 or fp16, float tensor or u8 image.

TensorRT 10 builds fp16 with its builder flag on the fp32 graph; TensorRT 11 (strongly typed
only) parses the fp16-converted graph. Where the model's task hands the letterboxed u8 image,
that graph's u8-input twin is parsed instead (:mod:`.onnx_u8_input`: ``Cast`` to float32, the
channel order, scale, mean and std, ``Transpose`` to NCHW in front of the network, the
host's float32 operations in the host's order): the engine's input is a UINT8 (N, H, W, 3)
tensor feeding that ``Cast`` directly, as TensorRT requires of a UINT8 network input, and
the conversion runs on the GPU. A model the twin cannot be made of (not one 4-D float image
input of 3 channels, or weights in external files) keeps the float input; the log says why
(the check is :meth:`.chain.ArtifactChain.takes_u8_image`, the ONNX Runtime providers' too).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .types import embedded_preprocessing

if TYPE_CHECKING:  # pragma: no cover - types only
    from ..manifest import ModelManifest


@dataclass(frozen=True)
class EngineSource:
    """The graph to parse, where it lives, and what the engine's key needs of it."""

    #: The exact bytes parsed (their SHA-256 keys the engine).
    data: bytes
    #: Where the graph lives: TensorRT finds external weight files beside it.
    path: Path
    #: The fp32 model's bytes: its metadata holds the class names.
    labels_from: bytes
    #: SHA-256 over the external weight files the fp32 model names (None: it names none).
    external: str | None
    #: The pre-processing embedded in front of the network (None: it takes the float tensor).
    embedded: dict[str, Any] | None

    @property
    def u8(self) -> bool:
        """Whether the engine takes the u8 NHWC image."""
        return self.embedded is not None


def engine_source(chain: Any, manifest: 'ModelManifest', weights: Path, *,
                  fp16_graph: bool, u8_input: bool, tensorrt_version: str) -> EngineSource:
    """Return the graph an engine is built from (its parents built by ``chain``, the asking one).

    ``fp16_graph``: parse the fp16 conversion (TensorRT 11's fp16). ``u8_input``: the task
    hands the u8 image, so take it where the model can. Raises EngineBuildError for an fp16
    conversion of a model with external weights, which the conversion does not follow.
    """
    from . import tensorrt_build as tb

    model = chain.onnx(manifest, weights)
    source = model.read()
    external = tb.external_data_sha256(source, model.path.parent)
    graph, data = model, source
    if fp16_graph:
        if external is not None:
            raise tb.EngineBuildError(
                f'fp16 on TensorRT {tensorrt_version} builds from an fp16-converted ONNX, and '
                'this model keeps its weights in external files, which the conversion does '
                "not follow: save it with its weights inside (under 2 GB), or use precision "
                "'fp32'")
        graph = chain.fp16_onnx(manifest, model)
        data = graph.read()
    embedded = None
    if u8_input and chain.takes_u8_image(manifest, model):
        graph = chain.onnx_u8_input(manifest, graph)
        data = graph.read()
        embedded = embedded_preprocessing(manifest.preprocessing)
    return EngineSource(data, graph.path, source, external, embedded)
