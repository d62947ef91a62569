"""Backend name → runner class, and every decision taken before a runner exists.

Every fact comes from the backend table (:mod:`vision_nodes.backends`) and the device facts of
``platform/`` (through each backend's ``plan`` module). Runner modules are imported only when
their backend is chosen, so a deployment installs only the runtimes it uses. :func:`select`
decides which backends to try, in order, with the reason for every other one; for each
candidate :func:`resolve` checks the device, resolves ``precision: auto`` and collects the
device facts, and :func:`artifact_request` says which finished artifact the runner loads.
The pipeline then asks the artifact chain for it and hands it to the runner.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any, Callable, Sequence

from .. import backends
from ..artifacts.types import ArtifactRequest
from ..backends import BACKEND_CHOICES, BACKENDS
from ..manifest import ModelManifest
from .base import Runner, RunnerConfig, RunnerError

#: name → (module, class) of the runner (the table's); ``None``: reserved, not built yet.
BACKEND_MAP: dict[str, tuple[str, str] | None] = {
    name: row.runner for name, row in BACKENDS.items()}
#: Precisions each backend's runner can honour (the table's; see ``Backend.precisions``).
BACKEND_PRECISIONS: dict[str, tuple[str, ...]] = {
    name: row.precisions for name, row in BACKENDS.items()}


def _check_known(backend: str) -> None:
    if backend not in BACKENDS:
        raise RunnerError(f"unknown backend '{backend}' "
                          f"(choose from: {', '.join(BACKEND_CHOICES)})")


def runner_class(backend: str) -> type[Runner]:
    """Return the runner class for a backend name, or a RunnerError saying why there is none."""
    _check_known(backend)
    target = BACKENDS[backend].runner
    if target is None:
        raise RunnerError(f"backend '{backend}' is reserved but has no runner in this version "
                          f"of vision_nodes (implemented: {', '.join(implemented_backends())})")
    module_name, class_name = target
    return getattr(importlib.import_module(module_name), class_name)


def _plan(backend: str) -> ModuleType | None:
    """Return the backend's plan module (the table's ``plan``), or None."""
    name = BACKENDS[backend].plan
    return importlib.import_module(name) if name else None


def _ask(backend: str, what: str, config: RunnerConfig, default: Any) -> Any:
    """Call the plan's ``what(config)``; ``default`` when the backend's plan has none."""
    plan = _plan(backend)
    function = getattr(plan, what, None) if plan is not None else None
    return function(config) if function is not None else default


def implemented_backends() -> tuple[str, ...]:
    """Backend names that have a runner."""
    return tuple(name for name, row in BACKENDS.items() if row.runner is not None)


def check_manifest(manifest: ModelManifest) -> None:
    """Raise RunnerError if the manifest lists a backend that can run none of its precisions."""
    if manifest.precisions is None:
        return
    for backend in manifest.backends:
        if not set(BACKENDS[backend].precisions) & set(manifest.precisions):
            raise RunnerError(
                f"model '{manifest.name}' lists backend '{backend}', which cannot run any of "
                f"its precisions ({', '.join(manifest.precisions)}; '{backend}' runs "
                f"{', '.join(BACKENDS[backend].precisions)}): fix `backends` or `precisions` "
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


@dataclass(frozen=True)
class Candidate:
    """One backend considered for a set of models: usable (``reason`` None) or why not."""

    backend: str
    reason: str | None = None


@dataclass(frozen=True)
class Selection:
    """The one backend decision: what was asked, and every backend considered, in order."""

    requested: str
    considered: tuple[Candidate, ...]

    @property
    def candidates(self) -> list[str]:
        """The backends to load, best first (the first that loads wins)."""
        return [c.backend for c in self.considered if c.reason is None]

    def skipped(self) -> list[str]:
        """One line per backend not tried and why, as the log says it."""
        return [f"backend {self.requested}: skipping '{c.backend}': {c.reason}"
                for c in self.considered if c.reason is not None]


def _reason(backend: str, manifests: Sequence[ModelManifest]) -> str | None:
    """None if every model can run on ``backend`` here, else why not."""
    missing = [m.name for m in manifests if backend not in m.backends]
    if missing:
        return f"not supported by model {', '.join(map(repr, missing))}"
    if BACKENDS[backend].runner is None:
        return 'no runner in this version'
    return runner_class(backend).unavailable_reason(backend)


def select(manifests: Sequence[ModelManifest], backend: str = 'auto',
           log: Callable[[str], None] = lambda _: None) -> Selection:
    """Decide, once, which backends to load ``manifests`` on, in order, with reasons.

    A named backend is checked against every manifest (RunnerError naming the valid ones)
    and is the one candidate. ``auto`` considers every backend in the table's
    :data:`~.backends.AUTO_ORDER`: a backend is a candidate when every model lists it, it has
    a runner and this machine has what the runner needs; the log says why each other one is
    skipped. Raises RunnerError, naming every backend and why, when none is usable.
    """
    if backend != 'auto':
        for manifest in manifests:
            check_supported(backend, manifest)
        return Selection(backend, (Candidate(backend),))
    for manifest in manifests:
        check_manifest(manifest)
    selection = Selection('auto', tuple(Candidate(name, _reason(name, manifests))
                                        for name in backends.AUTO_ORDER))
    for line in selection.skipped():
        log(line)
    if not selection.candidates:
        models = ', '.join(repr(m.name) for m in manifests)
        raise RunnerError(f'backend auto found no usable backend for {models} on this '
                          'machine: ' + '; '.join(f'{c.backend}: {c.reason}'
                                                  for c in selection.considered))
    return selection


def backend_report(manifests: Sequence[ModelManifest]) -> dict[str, str | None]:
    """For each backend in ``auto`` order: None if every model can run on it here, else why not.

    The reasons :func:`select` gives for ``auto``, as a mapping (the node's parameter
    description lists the usable ones).
    """
    return {name: _reason(name, manifests) for name in backends.AUTO_ORDER}


def valid_precisions(backend: str, manifest: ModelManifest | None = None,
                     config: RunnerConfig | None = None) -> tuple[str, ...]:
    """Precisions ``backend`` runs (the table), narrowed by ``manifest`` and by the device."""
    _check_known(backend)
    valid = BACKENDS[backend].precisions
    if manifest is not None and manifest.precisions is not None:
        valid = tuple(p for p in valid if p in manifest.precisions)
    if config is not None and BACKENDS[backend].runner is not None:
        valid = tuple(p for p in valid if _ask(
            backend, 'precision_unavailable', replace(config, backend=backend, precision=p),
            None) is None)
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
    table = BACKENDS[backend].precisions
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
    if config is not None and BACKENDS[backend].runner is not None:
        reason = _ask(backend, 'precision_unavailable',
                      replace(config, backend=backend, precision=precision), None)
        if reason:
            valid = valid_precisions(backend, manifest, config)
            raise RunnerError(f"backend '{backend}' cannot run precision '{precision}' here: "
                              f"{reason} (valid here: {', '.join(('auto',) + valid)})")


def resolve_precision(config: RunnerConfig,
                      log: Callable[[str], None] = lambda _: None) -> RunnerConfig:
    """Return ``config`` with ``precision: auto`` replaced by the backend's choice, checked.

    ``auto`` is the backend's fastest precision that needs no calibration data on this device
    (its plan's ``auto_precision``; fp32 without one); if the manifest does not allow it, the
    first of the manifest's ``precisions`` that can run here. The choice is logged.
    """
    manifest = config.manifest
    check_precision(config.backend, config.precision, manifest, config)
    if config.precision != 'auto':
        return config
    chosen = _ask(config.backend, 'auto_precision', config, 'fp32')
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


def resolve(config: RunnerConfig, log: Callable[[str], None] = lambda _: None
            ) -> RunnerConfig:
    """Return ``config`` decided for one named backend, before its runner exists.

    Checks that the manifest supports the backend and this machine has its runtime, parses
    ``device`` against what the backend takes, resolves ``precision: auto`` (logged) and adds
    the backend plan's device facts (``RunnerConfig.device_facts``). ``auto`` is decided by
    :func:`select` first (the pipeline loads its candidates in order), so it is refused here.
    """
    if config.backend == 'auto':
        raise RunnerError("create_runner loads one named backend: decide 'auto' with "
                          'registry.select (pipeline.build_pipelines does)')
    check_supported(config.backend, config.manifest)
    cls = runner_class(config.backend)
    reason = cls.unavailable_reason(config.backend)
    if reason:
        raise RunnerError(f"backend '{config.backend}' is not available: {reason}")
    cls.check_device(config)
    config = resolve_precision(config, log)
    return replace(config, device_facts=_ask(config.backend, 'plan', config, None))


def artifact_request(config: RunnerConfig) -> ArtifactRequest:
    """Say which finished artifact the runner of a resolved ``config`` loads."""
    return ArtifactRequest(
        BACKENDS[config.backend].artifact, config.manifest, config.weights, config.precision,
        config.calibration_dir, **_ask(config.backend, 'artifact_options', config, {}))
