"""Pipelines a test module builds on the session's engine cache, all closed at its end."""

from __future__ import annotations

from typing import Any, Callable

from vision_nodes.pipeline import build_pipeline


class PipelineBuilds:
    """Build pipelines (logs discarded unless asked for) and close every one of them."""

    def __init__(self, model_dir: Any, cache_dir: Any, manifest: Any, backend: str) -> None:
        self._model_dir, self._cache_dir = str(model_dir), cache_dir
        self._manifest, self._backend = manifest, backend
        self._built: list[Any] = []

    def __call__(self, backend: str | None = None, model: Any = None,
                 log: Callable[[str], None] | None = None, cache_dir: Any = None,
                 **options: Any) -> Any:
        """Build ``model`` (default: the module's) on ``backend`` (default: the module's)."""
        pipeline = build_pipeline(model or self._manifest, backend or self._backend,
                                  model_dir=self._model_dir,
                                  cache_dir=cache_dir or self._cache_dir,
                                  log=log if log is not None else (lambda _: None), **options)
        self._built.append(pipeline)
        return pipeline

    def close(self) -> None:
        """Unload every pipeline built."""
        for pipeline in self._built:
            pipeline.close()
        self._built = []
