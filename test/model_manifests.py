"""Model manifests for tests: a minimal valid one, with only the fields a test sets.

Not a test module: test files import it (``test/`` is on ``sys.path``, see conftest.py).
Tests of the manifest parser itself keep their raw dicts, so that what they check stays in
view.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from vision_nodes.manifest import ModelManifest
from vision_nodes.tasks import parse_manifest


def manifest_data(base: Mapping[str, Any] | None = None, /, **fields: Any) -> dict[str, Any]:
    """Return a valid manifest as YAML gives it: a detector, then ``base``, then ``fields``.

    The minimal manifest is ``name: m, task: detect, weights: m.pt, input_size: 640,
    backends: [cpu]``. ``base`` (a file's recurring fields) and ``fields`` replace whole
    top-level values (a ``preprocessing`` or ``depth`` block is given whole); paths
    (``os.PathLike``) are written as strings, as a manifest file holds them.
    """
    data: dict[str, Any] = {'name': 'm', 'task': 'detect', 'weights': 'm.pt',
                            'input_size': 640, 'backends': ['cpu']}
    data.update(base or {})
    data.update(fields)
    return {key: os.fspath(value) if isinstance(value, os.PathLike) else value
            for key, value in data.items()}


def model_manifest(base: Mapping[str, Any] | None = None, /, *, source: str = 'test.yaml',
                   **fields: Any) -> ModelManifest:
    """Return :func:`manifest_data` parsed as a manifest file ``source`` would be."""
    return parse_manifest(manifest_data(base, **fields), source)
