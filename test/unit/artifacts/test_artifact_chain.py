"""The artifact chain's layering: runners load and run, artifacts never reach up to tasks.

Runners may import only the artifact types, the cache lookup, the label readers and TensorRT's
shared logger (``RUNNER_MAY_IMPORT``); the conversion steps (ONNX export, fp16, IR, INT8,
engine build, calibration) stay behind the chain, which the pipeline asks for the finished
artifact it hands the runner (``RunnerConfig.artifact``).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / 'vision_nodes'
#: What of artifacts/ a runner may import: types and lookups, no conversion step.
RUNNER_MAY_IMPORT = {'cache', 'types', 'labels', 'tensorrt_log'}
#: The conversion steps, behind the chain.
STEPS = ('chain', 'onnx_export', 'onnx_fp16', 'openvino_convert', 'quantize', 'tensorrt_build',
         'calibration', 'openvino_u8_input', 'onnx_u8_input')


def _imports(path: Path) -> list[str]:
    """Every module ``path`` imports (relative ones resolved), at any depth of the file."""
    package = ['vision_nodes'] + list(path.relative_to(PACKAGE).parent.parts)
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = '.'.join(base + ([node.module] if node.module else []))
            found.append(module)
            found += [f'{module}.{alias.name}' for alias in node.names]
    return found


def test_runners_import_no_conversion_step():
    """runners/ names nothing of artifacts/ beyond its types, lookups and shared logger."""
    for path in sorted((PACKAGE / 'runners').glob('*.py')):
        for module in _imports(path):
            parts = module.split('.')
            if parts[:2] == ['vision_nodes', 'artifacts'] and len(parts) > 2:
                assert parts[2] in RUNNER_MAY_IMPORT, f'{path.name} imports {module}'


def test_artifacts_never_import_tasks():
    """artifacts/ gets the model's preprocessing from the caller, never from tasks/."""
    for path in sorted((PACKAGE / 'artifacts').glob('*.py')):
        for module in _imports(path):
            assert not module.startswith('vision_nodes.tasks'), f'{path.name} imports {module}'


def test_loading_a_runner_loads_no_conversion_step():
    """Importing every runner module brings in none of the conversion steps."""
    code = ('import sys\n'
            'import vision_nodes.runners.onnx_runner, vision_nodes.runners.openvino_runner\n'
            'import vision_nodes.runners.tensorrt_runner, vision_nodes.runners.torch_runner\n'
            f'print([m for m in {STEPS!r} if "vision_nodes.artifacts." + m in sys.modules])\n')
    result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                            cwd=PACKAGE.parent, timeout=300, check=True)
    assert result.stdout.strip() == '[]', result.stdout + result.stderr
