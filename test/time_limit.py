"""A time limit for test blocks that could hang (hostile input must fail fast, not spin).

Not a test module: test_fuzz and test_manifest import it.
"""

from __future__ import annotations

import contextlib
import signal
from typing import Iterator


@contextlib.contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    """Fail (TimeoutError) instead of hanging when the block runs longer than ``seconds``."""
    def expire(signum, frame):
        raise TimeoutError(f'still running after {seconds} s')

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
