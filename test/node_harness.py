"""A node process plus a client wired to its topics, for the tests that drive a real node.

Not a test module: the integration tests import it (reference code used only by tests lives
in test/).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import rclpy
import yaml
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from vision_nodes.tasks import resolve_manifest
from vision_nodes.tools.client import NodeProcess, VisionNodeClient, publish_until_answered

LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)


@contextmanager
def own_context() -> Iterator[Any]:
    """Give an rclpy context of its own (the session's DDS domain); shut it down after."""
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        yield context
    finally:
        rclpy.shutdown(context=context)


@contextmanager
def node_in_own_context(name: str) -> Iterator[Any]:
    """Give a plain rclpy node in :func:`own_context`; destroy it after."""
    with own_context() as context:
        node = rclpy.create_node(name, context=context)
        try:
            yield node
        finally:
            node.destroy_node()


class Harness:
    """A node process plus a client; ``subscribe``/``publisher`` are relative to the node."""

    def __init__(self, params: dict, name: str, remaps: dict[str, str] | None = None,
                 namespace: str = '', env: dict[str, str] | None = None,
                 wait: bool = True) -> None:
        self.node = NodeProcess(params, node_name=name, remaps=remaps, namespace=namespace,
                                env=env)
        full = '/'.join(p for p in ('', namespace.strip('/'), name) if p) or f'/{name}'
        self.client = VisionNodeClient(full, f'{name}_test_client')
        self._seq = 0
        if wait:
            self.wait_for_node()

    def wait_for_node(self, timeout: float = 30.0) -> None:
        """Wait until the node answers; if it does not, stop it and the client before raising.

        A harness that failed to start must not outlive its test: its client's publishers and
        the node would stay in the DDS graph and change what the next tests see.
        """
        try:
            self.client.wait_for_node(timeout)
        except BaseException as exc:
            self.close()
            if not isinstance(exc, TimeoutError):
                raise
            tail = '\n'.join(self.node.output().splitlines()[-15:])
            raise TimeoutError(f'{exc}; the node printed:\n{tail}') from exc

    def ensure_active(self, configure_timeout: float = 300.0) -> None:
        """Bring the node to 'active' from the state earlier tests left it in.

        A module's tests share one node and mostly run in order; with this, a test that needs
        an active node also runs alone (``pytest -k``).
        """
        client = self.client
        state = client.get_state()
        if state == 'unconfigured':
            assert client.change_state('configure', configure_timeout), self.node.output()[-2000:]
            state = client.get_state()
        if state == 'inactive':
            assert client.change_state('activate'), self.node.output()[-2000:]
        assert client.get_state() == 'active'

    def send(self, image, answers, publisher, timeout: float = 60.0):
        """Publish until a result for this frame arrives (discovery may drop the first)."""
        self._seq += 1
        image.header.frame_id = f'frame_{self._seq}'
        return publish_until_answered(publisher, image, answers, timeout)

    def close(self) -> int:
        self.client.close()
        return self.node.stop()


def manifest_copy(folder: Path, name: str, base: str = 'yolov8n', **changes: Any) -> str:
    """Write a copy of a shipped manifest under another name (and changes); return its path."""
    source = resolve_manifest(base).source
    data = yaml.safe_load(Path(source).read_text())
    data.update(name=name, **changes)
    path = folder / f'{name}.yaml'
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def call_latencies(call: Callable[[], Any], stop: threading.Event,
                   interval: float = 0.02) -> list[float]:
    """Time ``call`` again and again until ``stop`` is set; return the latencies (s)."""
    out = []
    while not stop.is_set():
        start = time.monotonic()
        call()
        out.append(time.monotonic() - start)
        time.sleep(interval)
    return out


def p95(samples: list[float]) -> float:
    """95th percentile (nearest rank) of a non-empty list."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


def median(samples: list[float]) -> float:
    """Median of a non-empty list."""
    return statistics.median(samples)


def start_camera(image: Path, seconds: float, rate: float = 30.0, topic: str = '/image',
                 *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start a camera in a process of its own (``vision_nodes.tools.image_publisher``)."""
    return subprocess.Popen(
        [sys.executable, '-m', 'vision_nodes.tools.image_publisher', str(image),
         '--topic', topic, '--rate', str(rate), '--seconds', str(seconds), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, 'PYTHONUNBUFFERED': '1', **(env or {})})
