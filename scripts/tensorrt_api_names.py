#!/usr/bin/env python3
"""Write the names the real TensorRT Python bindings register to test/data/tensorrt_api.json.

The tests run the TensorRT runner against a fake ``tensorrt`` (no GPU here); this list keeps
the fake honest: ``test/unit/runners/test_tensorrt.py`` checks every public name and enum
value of the fake against it. How the names are obtained, for each version given:

1. ``pip download --no-deps tensorrt-cu12-bindings==VERSION`` into a temporary folder (the
   wheel for this Python; about 1.3 MB). It holds ``tensorrt_bindings/tensorrt.so``, the
   pybind11 module, but not TensorRT's libraries: those come in ``tensorrt-cu12-libs``, whose
   PyPI package is a stub that downloads from NVIDIA's own index.
2. The module links against ``libnvinfer``, ``libnvonnxparser`` and ``libnvinfer_plugin`` for
   a handful of C entry points (``createInferBuilder_INTERNAL`` and the like; ``nm -D`` lists
   them). Empty stand-ins exporting those symbols are compiled with ``cc`` into the temporary
   folder, so that the module imports: registering classes, methods and enum values needs
   none of TensorRT's code (calling anything that creates a TensorRT object would).
3. A child Python imports the module with those stand-ins on ``LD_LIBRARY_PATH`` and lists,
   with ``dir()``, the module's public names, the members of the classes the runner uses,
   and the members and integer values of the enums it uses.

Nothing is kept but the JSON. Needs network access to PyPI, ``cc`` and ``nm``; run it from
the project root with the Python the tests use, e.g. (10.3 is JetPack 6's TensorRT):

    .venv/bin/python scripts/tensorrt_api_names.py 10.3.0 10.16.1.11 11.4.0.106
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / 'test' / 'data' / 'tensorrt_api.json'
#: Classes whose members are listed (what the runner and the fake use).
CLASSES = ('Builder', 'OnnxParser', 'Runtime', 'ITensor', 'INetworkDefinition',
           'IBuilderConfig', 'IOptimizationProfile', 'ITimingCache', 'ICudaEngine',
           'IExecutionContext', 'ILogger', 'IProgressMonitor', 'IInt8EntropyCalibrator2',
           'IHostMemory')
#: Enums whose members and values are listed ('ILogger.Severity' is nested).
ENUMS = ('NetworkDefinitionCreationFlag', 'BuilderFlag', 'MemoryPoolType', 'TensorIOMode',
         'DataType', 'ILogger.Severity')

_DUMP = '''
import json, sys
import tensorrt_bindings as trt

def find(path):
    obj = trt
    for part in path.split('.'):
        obj = getattr(obj, part, None)
    return obj

classes, enums = json.loads(sys.argv[1]), json.loads(sys.argv[2])
out = {'version': trt.__version__,
       'module': sorted(n for n in dir(trt) if not n.startswith('_')),
       'classes': {}, 'enums': {}}
for name in classes:
    cls = find(name)
    if cls is not None:
        out['classes'][name] = sorted(n for n in dir(cls) if not n.startswith('_'))
for name in enums:
    kind = find(name)
    if kind is not None:
        out['enums'][name] = {k: int(v) for k, v in kind.__members__.items()}
print(json.dumps(out))
'''


def _stub_source(symbols: list[str]) -> str:
    return ''.join(f'void *{name}(void) {{ return 0; }}\n' for name in symbols)


def _entry_points(module: Path) -> list[str]:
    """List the C entry points of TensorRT the module imports (undefined, not libc's)."""
    listing = subprocess.run(['nm', '-D', '--undefined-only', str(module)], check=True,
                             capture_output=True, text=True).stdout
    names = []
    for line in listing.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == 'U' and '@' not in parts[1] and \
                not re.match(r'_?Py|dl|pthread|_', parts[1]):
            names.append(parts[1])
    return sorted(names)


def dump(version: str, work: Path) -> dict:
    """Download the bindings wheel of ``version`` and list its names (see the module doc)."""
    wheels = work / f'wheel-{version}'
    subprocess.run([sys.executable, '-m', 'pip', 'download', '--no-deps', '--quiet', '-d',
                    str(wheels), f'tensorrt-cu12-bindings=={version}'], check=True)
    wheel = next(wheels.glob('*.whl'))
    unpacked = work / f'unpacked-{version}'
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(unpacked)
    module = next(unpacked.glob('tensorrt_bindings/tensorrt*.so'))
    major = version.split('.')[0]
    stubs = work / f'stubs-{version}'
    stubs.mkdir()
    source = stubs / 'stub.c'
    source.write_text(_stub_source(_entry_points(module)))
    for lib in ('libnvinfer', 'libnvonnxparser', 'libnvinfer_plugin'):
        subprocess.run(['cc', '-shared', '-fPIC', '-o', str(stubs / f'{lib}.so.{major}'),
                        str(source)], check=True)
    env = dict(os.environ, LD_LIBRARY_PATH=str(stubs), PYTHONPATH=str(unpacked))
    result = subprocess.run([sys.executable, '-c', _DUMP, json.dumps(CLASSES),
                             json.dumps(ENUMS)], check=True, capture_output=True, text=True,
                            env=env)
    data = json.loads(result.stdout)
    data['wheel'] = wheel.name
    return data


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('versions', nargs='+', help='tensorrt-cu12-bindings versions')
    parser.add_argument('--out', type=Path, default=OUT)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        versions = {v: dump(v, Path(tmp)) for v in args.versions}
    how = ('scripts/tensorrt_api_names.py: each version\'s tensorrt-cu12-bindings wheel '
           '(PyPI), imported with empty stand-ins for the TensorRT libraries it links to; '
           'names from dir(), enum values from __members__')
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({'how': how, 'python': sys.version.split()[0],
                                    'versions': versions}, indent=1, sort_keys=True) + '\n')
    print(f'wrote {args.out} ({", ".join(versions)})')
    return 0


if __name__ == '__main__':
    sys.exit(main())
