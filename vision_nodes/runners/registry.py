"""The backend map: backend name → runner class, plus ``auto`` selection with fallback.

Runner modules are imported only when their backend is chosen, so a deployment installs only
the runtimes it uses. Adding a backend means adding one runner file and one line here.
"""

from __future__ import annotations

import importlib
from dataclasses import replace
from typing import Callable, Sequence

from ..manifest import KNOWN_BACKENDS, ModelManifest
from .base import Runner, RunnerConfig, RunnerError

#: name → (module, class). ``None`` marks a backend name that is reserved but not built yet.
BACKEND_MAP: dict[str, tuple[str, str] | None] = {
    'cpu': ('vision_nodes.runners.torch_runner', 'TorchRunner'),
    'cuda': ('vision_nodes.runners.torch_runner', 'TorchRunner'),
    'rocm': ('vision_nodes.runners.torch_runner', 'TorchRunner'),
    'onnx': ('vision_nodes.runners.onnx_runner', 'OnnxRunner'),
    'tensorrt': ('vision_nodes.runners.tensorrt_runner', 'TensorRTRunner'),
    'openvino': ('vision_nodes.runners.openvino_runner', 'OpenVinoRunner'),
}
assert set(BACKEND_MAP) == set(KNOWN_BACKENDS)

#: Precisions each backend's runner can honour, in one place ('fp16' is the device's fast
#: reduced precision: fp16 on GPUs, bf16 on CPUs that have it). A manifest may narrow them
#: (``precisions``) and a runner may refuse one for the device it finds
#: (``Runner.precision_unavailable``: OpenVINO fp16 on a CPU without bf16); all three are
#: checked in :func:`check_precision`, and nothing ever runs another precision silently.
BACKEND_PRECISIONS: dict[str, tuple[str, ...]] = {
    'cpu': ('fp32',),
    'cuda': ('fp32', 'fp16'),
    'rocm': ('fp32', 'fp16'),
    'onnx': ('fp32', 'fp16'),  # fp16 on GPU execution providers and OpenVINO, not CPU
    'tensorrt': ('fp32', 'fp16', 'int8'),
    'openvino': ('fp32', 'fp16', 'int8'),
}
assert set(BACKEND_PRECISIONS) == set(KNOWN_BACKENDS)

#: ``backend: auto`` tries these in order (the first that loads wins).
AUTO_PRIORITY = ('tensorrt', 'cuda', 'rocm', 'openvino', 'onnx', 'cpu')

#: Values accepted by the ``backend`` parameter.
BACKEND_CHOICES = ('auto',) + KNOWN_BACKENDS


def _check_known(backend: str) -> None:
    if backend not in BACKEND_MAP:
        raise RunnerError(f"unknown backend '{backend}' "
                          f"(choose from: {', '.join(BACKEND_CHOICES)})")


def runner_class(backend: str) -> type[Runner]:
    """Return the runner class for a backend name, or a RunnerError saying why there is none."""
    _check_known(backend)
    target = BACKEND_MAP[backend]
    if target is None:
        raise RunnerError(f"backend '{backend}' is reserved but has no runner in this version "
                          f"of vision_nodes (implemented: {', '.join(implemented_backends())})")
    module_name, class_name = target
    return getattr(importlib.import_module(module_name), class_name)


def implemented_backends() -> tuple[str, ...]:
    """Backend names that have a runner."""
    return tuple(name for name, target in BACKEND_MAP.items() if target is not None)


def check_manifest(manifest: ModelManifest) -> None:
    """Raise RunnerError if the manifest lists a backend that can run none of its precisions."""
    if manifest.precisions is None:
        return
    for backend in manifest.backends:
        if not set(BACKEND_PRECISIONS[backend]) & set(manifest.precisions):
            raise RunnerError(
                f"model '{manifest.name}' lists backend '{backend}', which cannot run any of "
                f"its precisions ({', '.join(manifest.precisions)}; '{backend}' runs "
                f"{', '.join(BACKEND_PRECISIONS[backend])}): fix `backends` or `precisions` "
                f'in {manifest.source or "the manifest"}')


def check_supported(backend: str, manifest: ModelManifest) -> None:
    """Raise RunnerError unless the manifest supports ``backend`` (``auto`` always passes)."""
    check_manifest(manifest)
    if backend == 'auto':
        return
    _check_known(backend)
    if backend not in manifest.backends:
        raise RunnerError(
            f"model '{manifest.name}' does not support backend '{backend}'; valid backends "
            f"for it: {', '.join(manifest.backends)}")


def auto_candidates(manifest: ModelManifest) -> list[str]:
    """Backends ``auto`` would try for this manifest, best first."""
    return [b for b in AUTO_PRIORITY
            if b in manifest.backends and BACKEND_MAP.get(b) is not None]


def backend_report(manifests: Sequence[ModelManifest]) -> dict[str, str | None]:
    """For each backend in ``auto`` order: None if every model can run on it here, else why not.

    A backend is usable for a set of models (one global runtime) when every manifest lists
    it, it has a runner, and this machine has what the runner needs.
    """
    report: dict[str, str | None] = {}
    for backend in AUTO_PRIORITY:
        missing = [m.name for m in manifests if backend not in m.backends]
        if missing:
            report[backend] = f"not supported by model {', '.join(map(repr, missing))}"
        elif BACKEND_MAP.get(backend) is None:
            report[backend] = 'no runner in this version'
        else:
            report[backend] = runner_class(backend).unavailable_reason(backend)
    return report


def auto_order(manifests: Sequence[ModelManifest],
               log: Callable[[str], None] = lambda _: None) -> list[str]:
    """Return the backends ``auto`` tries for these models, best first; log why it skips others.

    Raises RunnerError, naming every backend and why, when none is usable.
    """
    report = backend_report(manifests)
    for name, reason in report.items():
        if reason is not None:
            log(f"backend auto: skipping '{name}': {reason}")
    candidates = [name for name, reason in report.items() if reason is None]
    if not candidates:
        models = ', '.join(repr(m.name) for m in manifests)
        raise RunnerError(f'backend auto found no usable backend for {models} on this '
                          'machine: ' + '; '.join(f'{n}: {r}' for n, r in report.items()))
    return candidates


def valid_precisions(backend: str, manifest: ModelManifest | None = None,
                     config: RunnerConfig | None = None) -> tuple[str, ...]:
    """Precisions ``backend`` runs (the table), narrowed by ``manifest`` and by the device."""
    _check_known(backend)
    valid = BACKEND_PRECISIONS[backend]
    if manifest is not None and manifest.precisions is not None:
        valid = tuple(p for p in valid if p in manifest.precisions)
    if config is not None and BACKEND_MAP[backend] is not None:
        cls = runner_class(backend)
        valid = tuple(p for p in valid if cls.precision_unavailable(
            replace(config, backend=backend, precision=p)) is None)
    return valid


def check_precision(backend: str, precision: str, manifest: ModelManifest | None = None,
                    config: RunnerConfig | None = None) -> None:
    """Raise RunnerError unless ``backend`` can honour ``precision`` (or 'auto').

    The one place precisions are checked: the backend table, the manifest's ``precisions``
    and, given a ``config``, what its runner can do on that device. The message lists the
    valid ones.
    """
    _check_known(backend)
    if precision == 'auto':
        return
    table = BACKEND_PRECISIONS[backend]
    if precision not in table:
        raise RunnerError(f"backend '{backend}' cannot run precision '{precision}' "
                          f"(valid for it: {', '.join(('auto',) + table)})")
    if manifest is not None and manifest.precisions is not None and \
            precision not in manifest.precisions:
        valid = valid_precisions(backend, manifest)
        raise RunnerError(f"model '{manifest.name}' runs only precision "
                          f"{', '.join(manifest.precisions)} (its manifest's `precisions`), "
                          f"not '{precision}' (valid on '{backend}': "
                          f"{', '.join(('auto',) + valid)})")
    if config is not None and BACKEND_MAP[backend] is not None:
        reason = runner_class(backend).precision_unavailable(
            replace(config, backend=backend, precision=precision))
        if reason:
            valid = valid_precisions(backend, manifest, config)
            raise RunnerError(f"backend '{backend}' cannot run precision '{precision}' here: "
                              f"{reason} (valid here: {', '.join(('auto',) + valid)})")


def resolve_precision(config: RunnerConfig,
                      log: Callable[[str], None] = lambda _: None) -> RunnerConfig:
    """Return ``config`` with ``precision: auto`` replaced by the runner's choice, checked.

    ``auto`` is the runner's fastest precision that needs no calibration data on this device
    (:meth:`Runner.auto_precision`); if the manifest does not allow it, the first of the
    manifest's ``precisions`` that can run here. The choice is logged.
    """
    manifest = config.manifest
    check_precision(config.backend, config.precision, manifest, config)
    if config.precision != 'auto':
        return config
    chosen = runner_class(config.backend).auto_precision(config)
    valid = valid_precisions(config.backend, manifest, config)
    why = 'fastest without calibration data on this device'
    if chosen not in valid:
        allowed = [p for p in (manifest.precisions or ('fp32',)) if p in valid]
        if not allowed:
            raise RunnerError(f"precision auto: backend '{config.backend}' can run none of "
                              f"model '{manifest.name}'s precisions here "
                              f"({', '.join(manifest.precisions or ('fp32',))})")
        chosen, why = allowed[0], f"the model's first allowed one; {chosen} is not allowed"
    log(f"precision auto: '{chosen}' on backend '{config.backend}' ({why})")
    return replace(config, precision=chosen)


def create_runner(config: RunnerConfig, log: Callable[[str], None] = lambda _: None
                  ) -> Runner:
    """Create and load the runner for ``config.backend`` (trying candidates for ``auto``)."""
    check_supported(config.backend, config.manifest)
    if config.backend != 'auto':
        cls = runner_class(config.backend)
        reason = cls.unavailable_reason(config.backend)
        if reason:
            raise RunnerError(f"backend '{config.backend}' is not available: {reason}")
        cls.check_device(config)
        runner = cls(resolve_precision(config, log))
        runner.load()
        return runner
    failures = []
    for backend in auto_order([config.manifest], log):
        cls = runner_class(backend)
        try:
            candidate = replace(config, backend=backend)
            cls.check_device(candidate)
            runner = cls(resolve_precision(candidate, log))
            runner.load()
        except Exception as exc:  # noqa: BLE001 - fall back to the next backend
            failures.append(f'{backend}: {exc}')
            log(f"backend auto: '{backend}' failed to load ({exc}); trying the next one")
            continue
        log(f"backend auto: chose '{backend}'")
        return runner
    raise RunnerError('backend auto found no usable backend for model '
                      f"'{config.manifest.name}': " + '; '.join(failures))
