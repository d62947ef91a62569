"""Model loads and calibration reads of hostile files, in a bounded child process.

Not a test module: tests run it as a script (``python hostile_loads.py SPEC.json``) through
:func:`run_cases`. The child limits its address space (a read without end fails the case,
not the machine), makes every network connection fail and records it, times each case out,
and prints one JSON line: per case the outcome, the exception's type and message, how far
the process's peak RSS grew, and the connections attempted.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: Address space of the child: the libraries need a few GiB of it, a hostile read more.
ADDRESS_SPACE = 6 << 30


def run_cases(cases: list[dict[str, Any]], folder: Path, warmup: dict[str, Any] | None = None,
              env: dict[str, str] | None = None, timeout: float = 900) -> list[dict[str, Any]]:
    """Run ``cases`` in a child (after ``warmup``, not measured); return their results."""
    spec = folder / 'spec.json'
    spec.write_text(json.dumps({'cases': cases, 'warmup': warmup}))
    child_env = {**os.environ, 'PYTHONPATH': os.pathsep.join(
        [str(ROOT), str(ROOT / 'test')]
        + [p for p in os.environ.get('PYTHONPATH', '').split(os.pathsep) if p]), **(env or {})}
    child_env = {k: v for k, v in child_env.items() if v is not None}
    proc = subprocess.run([sys.executable, __file__, str(spec)], capture_output=True,
                          text=True, timeout=timeout, env=child_env, cwd=folder)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class _Timeout(Exception):
    pass


def _expire(signum: int, frame: Any) -> None:
    raise _Timeout('still running after the case timeout')


def _load_model(case: dict[str, Any]) -> str:
    from vision_nodes.loaders import load_torch_module
    from vision_nodes.tasks import parse_manifest

    load_torch_module(parse_manifest(case['manifest']), Path(case['weights']))
    return 'loaded'


def _imports(case: dict[str, Any]) -> str:
    """Import libraries (a warm-up: what a first load costs is not the input's doing)."""
    import importlib

    for name in case['modules']:
        importlib.import_module(name)
    return 'imported'


def _pipeline(case: dict[str, Any]) -> str:
    from vision_nodes.tasks import parse_manifest
    from vision_nodes.pipeline import build_pipeline

    build_pipeline(parse_manifest(case['manifest']), case['backend'],
                   cache_dir=case['cache']).close()
    return 'built'


def _calibrate(case: dict[str, Any]) -> dict[str, Any]:
    from vision_nodes.artifacts.calibration import calibration_image, calibration_set

    lines: list[str] = []
    found = calibration_set(case['folder'], log=lines.append)
    shapes = [list(calibration_image(path).shape) for path in found.images]
    return {'images': [p.name for p in found.images], 'skipped': found.skipped,
            'log': lines, 'shapes': shapes}


def _hub_query(case: dict[str, Any]) -> str:
    """Ask the Hub about a model as transformers would: offline mode must refuse it."""
    from huggingface_hub import HfApi

    HfApi().model_info(case['repo'])
    return 'answered'


KINDS = {'model': _load_model, 'pipeline': _pipeline, 'calibration': _calibrate,
         'hub_query': _hub_query, 'imports': _imports}


def _run(case: dict[str, Any], attempts: list[str]) -> dict[str, Any]:
    before, seen, started = _peak_mb(), len(attempts), time.monotonic()
    result: dict[str, Any] = {'name': case.get('name', ''), 'error': None, 'message': ''}
    signal.alarm(int(case.get('timeout', 60)))
    try:
        result['outcome'] = KINDS[case['kind']](case)
    except BaseException as exc:  # noqa: BLE001 - every outcome is reported
        result['error'], result['message'] = type(exc).__name__, str(exc)
    finally:
        signal.alarm(0)
    result.update(rss_growth_mb=_peak_mb() - before, network=attempts[seen:],
                  seconds=time.monotonic() - started)
    return result


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
    attempts: list[str] = []

    def refuse(*args: Any, **kwargs: Any) -> None:
        attempts.append(repr(args[-1] if args else kwargs)[:120])
        raise OSError('a test made a network connection')

    socket.create_connection = refuse  # type: ignore[assignment]
    socket.socket.connect = refuse  # type: ignore[method-assign]
    socket.getaddrinfo = refuse  # type: ignore[assignment]
    signal.signal(signal.SIGALRM, _expire)
    if spec.get('warmup'):
        warm = _run(spec['warmup'], attempts)
        assert warm['error'] is None, warm
    print(json.dumps([_run(case, attempts) for case in spec['cases']]))


if __name__ == '__main__':
    main()
