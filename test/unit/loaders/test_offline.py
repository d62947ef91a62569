"""Ultralytics never looks for the network, whichever path of the package imports it first."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip('ultralytics')

#: Records every name lookup and connection, then imports Ultralytics through the given path
#: of this package (or plainly), and says what was looked up.
PROBE = '''
import json, socket, sys
asked = []
def lookup(host, *args, **kwargs):
    asked.append(str(host))
    raise socket.gaierror(socket.EAI_NONAME, 'no network in this test')
def connect(self, address):
    asked.append(str(address))
    raise OSError('no network in this test')
socket.getaddrinfo = lookup
socket.socket.connect = connect
socket.create_connection = lambda address, *a, **k: connect(None, address)
if sys.argv[1] == 'botsort':  # a tracker on a node whose models came from the engine cache
    from vision_nodes.tracking import _make_tracker, tracker_settings
    tracker = type(_make_tracker('botsort', tracker_settings('botsort'))).__name__
else:
    import ultralytics
    tracker = None
print(json.dumps({'asked': asked, 'tracker': tracker}))
'''


def _run(path: str, home) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith('YOLO_')}
    env['HOME'] = str(home)
    out = subprocess.run([sys.executable, '-c', PROBE, path], capture_output=True, text=True,
                         timeout=300, env=env, check=True)
    return json.loads(out.stdout.splitlines()[-1])


def test_a_tracker_imports_ultralytics_offline(tmp_path):
    plain = _run('plain', tmp_path)
    if not plain['asked']:
        pytest.skip('Ultralytics no longer looks for the network at its import: nothing to '
                    'keep off')
    ours = _run('botsort', tmp_path)
    assert ours == {'asked': [], 'tracker': 'BOTSORT'}
