"""OpenVINO's and NNCF's usage telemetry stays off in every process that imports vision_nodes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types

import pytest

from vision_nodes.telemetry import TELEMETRY_MODULE, no_telemetry

pytest.importorskip('openvino')

#: Imports OpenVINO (whose converter starts the telemetry) and NNCF, converts a one-layer ONNX
#: model with OpenVINO's converter (which reports each conversion), and says what ran.
PROBE = '''
import json, os, sys, threading
if sys.argv[1] == 'vision_nodes':
    import vision_nodes
import numpy as np
import onnx
from onnx import TensorProto, helper
import openvino as ov
import nncf.telemetry.wrapper as nncf_telemetry
from openvino.tools.ovc import telemetry_utils
graph = helper.make_graph([helper.make_node('Relu', ['x'], ['y'])], 'g',
                          [helper.make_tensor_value_info('x', TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info('y', TensorProto.FLOAT, [1, 4])])
path = os.path.join(sys.argv[2], 'relu.onnx')
onnx.save(helper.make_model(graph), path)
model = ov.convert_model(path)
out = ov.Core().compile_model(model, 'CPU')(np.array([[-1, 2, -3, 4]], np.float32))[0]
print(json.dumps({
    'answer': out.tolist(),
    'converter_telemetry': telemetry_utils.tm.__name__,
    'nncf_telemetry': type(nncf_telemetry.telemetry).__name__,
    'home': sorted(os.listdir(os.environ['HOME'])),  # the model is written beside it
    'pool_threads': sum(t.name.startswith('ThreadPoolExecutor') for t in threading.enumerate()),
}))
'''


def _run(first: str, folder) -> dict:
    """Run the probe in a fresh interpreter, home in ``folder/home``, outside CI and tests."""
    home = folder / 'home'
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ('CI', 'TF_BUILD', 'JENKINS_URL') and not k.startswith('NNCF_')}
    env['HOME'] = str(home)
    out = subprocess.run([sys.executable, '-c', PROBE, first, str(folder)], capture_output=True,
                         text=True, timeout=300, env=env, check=True)
    return json.loads(out.stdout.splitlines()[-1])


def test_importing_vision_nodes_keeps_the_runtimes_telemetry_off(tmp_path):
    without, within = tmp_path / 'without', tmp_path / 'within'
    without.mkdir()
    within.mkdir()
    plain = _run('openvino', without)
    if plain['converter_telemetry'] != TELEMETRY_MODULE or 'intel' not in plain['home']:
        pytest.skip(f'OpenVINO no longer starts its telemetry on import here ({plain}): '
                    'nothing to keep off')
    # What a process that imports OpenVINO alone does: a client ID in the home folder, the
    # converter's and NNCF's telemetry live.
    assert plain['nncf_telemetry'] == 'NNCFTelemetry' and plain['pool_threads'] >= 1

    ours = _run('vision_nodes', within)
    assert ours['answer'] == plain['answer'] == [[0.0, 2.0, 0.0, 4.0]]  # OpenVINO works
    assert ours['converter_telemetry'] == 'openvino.tools.ovc.telemetry_stub'
    assert ours['nncf_telemetry'] == 'MagicMock'  # NNCFTelemetryStub
    assert ours['home'] == []  # nothing written under ~/intel
    assert ours['pool_threads'] == 0


def test_a_telemetry_package_imported_first_is_left_alone(monkeypatch):
    monkeypatch.delitem(sys.modules, TELEMETRY_MODULE, raising=False)
    assert no_telemetry()
    assert sys.modules[TELEMETRY_MODULE] is None
    with pytest.raises(ImportError):
        __import__(TELEMETRY_MODULE)
    imported = types.ModuleType(TELEMETRY_MODULE)
    monkeypatch.setitem(sys.modules, TELEMETRY_MODULE, imported)
    assert not no_telemetry()
    assert sys.modules[TELEMETRY_MODULE] is imported
