"""Which benchmark configurations this machine can run; the others are skipped with a reason.

A configuration names a backend and a precision (``openvino:fp16``). One this machine cannot
run (fp16 on a CPU without native bf16 or fp16 arithmetic, a backend whose runtime or device is
missing, a precision the model's manifest does not allow) would otherwise end the run with a
traceback when it is loaded. The node's own decision, taken before any runner exists
(``vision_nodes.runners.registry``: ``select`` for ``auto``, ``resolve`` for a named backend),
says why in one line; the benchmarks print it, record it (``"skipped": {"<name>": "<reason>"}``
in their JSON) and measure the rest. Shared by ``bench_detect.py``, ``bench_segpose.py`` and
``bench_multicam.py``.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, TypeVar

Item = TypeVar('Item')


def cannot_run(manifest: Any, backend: str, precision: str, *, model_dir: str = '',
               device: str = '', calibration_dir: str = '') -> str | None:
    """Return why this machine cannot run the configuration, in one line (None: it can).

    ``manifest`` on ``backend`` at ``precision``, refused as the node refuses it at configure;
    nothing is loaded.
    """
    from vision_nodes.artifacts.cache import ArtifactCache, default_cache_dir
    from vision_nodes.manifest import ManifestError
    from vision_nodes.runners.base import RunnerConfig, RunnerError
    from vision_nodes.runners.registry import resolve, select
    from vision_nodes.text import clip

    if not calibration_dir and manifest.calibration_dir:  # as the pipeline fills it in
        calibration_dir = str(manifest.resolve_path(manifest.calibration_dir, model_dir or None))
    try:
        named = select([manifest], backend).candidates[0] if backend == 'auto' else backend
        resolve(RunnerConfig(manifest=manifest, weights=manifest.weights_path(model_dir or None),
                             backend=named, cache=ArtifactCache(default_cache_dir()),
                             device=device, precision=precision,
                             calibration_dir=calibration_dir))
    except (RunnerError, ManifestError) as exc:
        return clip(exc, 400)
    return None


def runnable(items: Iterable[Item], reason: Callable[[Item], str | None],
             name: Callable[[Item], str] = str,
             say: Callable[[str], None] = lambda line: print(line, flush=True)
             ) -> tuple[list[Item], dict[str, str]]:
    """Split ``items`` into those ``reason`` finds nothing against (in order) and the skipped.

    Each skipped item is said in one line (``skipped NAME: REASON``) and returned by name
    with its reason, for the JSON's ``"skipped"``.
    """
    kept: list[Item] = []
    skipped: dict[str, str] = {}
    for item in items:
        why = reason(item)
        if why is None:
            kept.append(item)
        else:
            skipped[name(item)] = why
            say(f'skipped {name(item)}: {why}')
    return kept, skipped


def with_ultralytics_opencv(fn: Callable[[], Item]) -> Callable[[], Item]:
    """Return ``fn`` run with OpenCV on the one thread that importing Ultralytics sets.

    ``import ultralytics`` calls ``cv2.setNumThreads(0)``; ``vision_nodes`` undoes that for
    its own pre-processing (``loaders.ultralytics.import_ultralytics``), so Ultralytics'
    ``predict`` is timed here as it runs in a process of its own, and OpenCV's count is
    restored after each call.
    """
    import cv2

    def call() -> Item:
        threads = cv2.getNumThreads()
        cv2.setNumThreads(0)
        try:
            return fn()
        finally:
            cv2.setNumThreads(threads)
    return call
