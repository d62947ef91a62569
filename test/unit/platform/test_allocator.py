"""The allocator settings vision_node applies: freed frame buffers are reused, not re-faulted.

Each case runs in a fresh interpreter, because the settings are process-wide and must not leak
into the rest of the test session.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith('linux'),
                                reason='glibc allocator settings apply to Linux only')

# A frame passes through several frame-sized buffers that are alive at once (serialised
# message, message, resized image, tensor...) and then freed together. Report page faults
# per frame.
_PROBE = r'''
import json, os, resource, sys
import numpy as np
from vision_nodes.platform.allocator import keep_freed_buffers, release_freed_memory
applied = keep_freed_buffers() if sys.argv[1] == 'tuned' else False
frame = 1080 * 810 * 3

def one_frame():
    buffers = [np.ones(frame, np.uint8) for _ in range(4)]
    return sum(int(b[::4096].sum()) for b in buffers)

for _ in range(5):                      # warm up
    one_frame()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    one_frame()
faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 20
release_freed_memory()
print(json.dumps({'applied': applied, 'faults_per_frame': faults}))
'''


# Worker threads that come and go, as the node's do (a fresh thread for each transition, the
# inference workers at each activate), each touching 60 MB of frame buffers and freeing them;
# then the release that cleanup does. Report how much of it the process still holds.
_THREADS_PROBE = r'''
import json, sys
sys.path.insert(0, sys.argv[2])
from thread_churn import churn
from vision_nodes.platform.allocator import keep_freed_buffers
applied = keep_freed_buffers() if sys.argv[1] == 'tuned' else False
print(json.dumps({'applied': applied, 'kept_mb': churn()}))
'''


def _probe(mode: str, code: str = _PROBE, **env: str) -> dict:
    import os

    from thread_churn import PATH

    result = subprocess.run([sys.executable, '-c', code, mode, PATH], capture_output=True,
                            text=True, timeout=120, env={**os.environ, **env})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_frame_buffers_are_reused_once_tuned():
    pages_per_frame = 1080 * 810 * 3 // 4096
    default = _probe('default')
    tuned = _probe('tuned')
    # glibc's default: every frame-sized buffer is a fresh mmap, faulted in page by page.
    assert default['faults_per_frame'] > 0.5 * pages_per_frame, default
    assert tuned['applied'] is True
    assert tuned['faults_per_frame'] < 0.05 * pages_per_frame, tuned


def test_tuning_can_be_turned_off():
    result = _probe('tuned', VISION_NODES_MALLOC_TUNING='0')
    assert result['applied'] is False
    assert result['faults_per_frame'] > 0.5 * (1080 * 810 * 3 // 4096), result


def test_release_gives_back_what_worker_threads_freed():
    """Frame buffers that threads of their own freed are given back by the release (cleanup).

    Each thread used to allocate from an arena of its own, whose free top glibc's malloc_trim
    never returns: 60 MB stayed after the release, and a node whose threads come and go grew
    lifecycle cycle after lifecycle cycle (scripts/soak.py --lifecycle).
    """
    tuned = _probe('tuned', _THREADS_PROBE)
    assert tuned['applied'] is True
    assert tuned['kept_mb'] < 10, tuned
