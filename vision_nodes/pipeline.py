"""The ROS-free core: manifest + backend → loaded runner + task, and image → results.

The node, the demo and the benchmark all go through :func:`build_pipeline` and
:meth:`Pipeline.process`, so there is one code path from image to decoded results.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from .runners.registry import create_runner
from .artifacts.cache import EngineCache, default_cache_dir
from .manifest import ModelManifest
from .runners.base import Runner, RunnerConfig
from .tasks import Task, create_task
from .tasks.detect import DetectionParams, Detections


@dataclass
class Pipeline:
    """A loaded model: its task (pre/post-processing) and its runner (the network)."""

    manifest: ModelManifest
    runner: Runner
    task: Task
    labels: list[str]

    def process(self, image: np.ndarray, encoding: str,
                params: DetectionParams) -> Detections:
        """Run one decoded image array through the model; results are in source pixels."""
        tensor, meta = self.task.preprocess(image, encoding)
        outputs = self.runner.infer(tensor)
        return self.task.postprocess(outputs, meta, params)

    def close(self) -> None:
        """Unload the runner and free its memory."""
        self.runner.unload()


def build_pipeline(manifest: ModelManifest, backend: str, *, model_dir: str = '',
                   cache_dir: str | Path = '', device: str = '', precision: str = 'fp32',
                   execution_provider: str = '',
                   log: Callable[[str], None] = lambda _: None) -> Pipeline:
    """Create the task, resolve the weights, create and load the runner."""
    task = create_task(manifest)
    config = RunnerConfig(
        manifest=manifest, weights=manifest.weights_path(model_dir or None), backend=backend,
        cache=EngineCache(cache_dir or default_cache_dir()), device=device,
        precision=precision, execution_provider=execution_provider)
    runner = create_runner(config, log)
    labels = list(manifest.labels) if manifest.labels else list(runner.labels or [])
    return Pipeline(manifest, runner, task, labels)
