"""Facts about this machine's CPU: model, usable cores, instruction sets.

The instruction sets decide which precisions run fast: bf16 needs AVX-512 BF16 or AMX, int8
gains most from VNNI or AMX.

Read from ``/proc/cpuinfo`` (Linux); elsewhere the flags are unknown (empty), so no fast
precision is assumed. Runners use these facts for ``precision: auto`` and report them in
``describe()``.
"""

from __future__ import annotations

import functools
import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CPUINFO = Path('/proc/cpuinfo')


@dataclass(frozen=True)
class CpuInfo:
    """What this process can use of the CPU."""

    model: str
    flags: frozenset[str]
    #: Logical CPUs this process may run on (its affinity mask).
    logical_cores: int
    #: Physical cores in the machine (None when /proc/cpuinfo does not say).
    physical_cores: int | None

    @property
    def avx512(self) -> bool:
        """AVX-512 foundation instructions."""
        return 'avx512f' in self.flags

    @property
    def amx(self) -> bool:
        """Advanced Matrix Extensions (tile registers; bf16 and int8 matrix units)."""
        return 'amx_tile' in self.flags

    @property
    def bf16(self) -> bool:
        """Native bfloat16 arithmetic (AVX-512 BF16 or AMX BF16)."""
        return bool({'avx512_bf16', 'amx_bf16'} & self.flags)

    @property
    def vnni(self) -> bool:
        """Int8 dot-product instructions (AVX-512 VNNI or AVX-VNNI)."""
        return bool({'avx512_vnni', 'avx_vnni'} & self.flags)

    def describe(self) -> dict[str, Any]:
        """Return the facts as a plain dict, for logs and diagnostics."""
        return {'cpu': self.model, 'logical_cores': self.logical_cores,
                'physical_cores': self.physical_cores, 'avx512': self.avx512,
                'bf16': self.bf16, 'amx': self.amx, 'vnni': self.vnni}


def parse_cpuinfo(text: str, logical_cores: int) -> CpuInfo:
    """Build :class:`CpuInfo` from the text of ``/proc/cpuinfo``."""
    model = ''
    flags: frozenset[str] = frozenset()
    cores: set[tuple[str, str]] = set()
    physical_id = core_id = ''
    for line in text.splitlines() + ['']:
        key, _, value = (part.strip() for part in line.partition(':'))
        if not key:  # a blank line ends one processor's block
            if core_id:
                cores.add((physical_id, core_id))
            physical_id = core_id = ''
        elif key == 'model name' and not model:
            model = value
        elif key == 'flags' and not flags:
            flags = frozenset(value.split())
        elif key == 'physical id':
            physical_id = value
        elif key == 'core id':
            core_id = value
    return CpuInfo(model=model or platform.processor() or 'unknown CPU', flags=flags,
                   logical_cores=logical_cores, physical_cores=len(cores) or None)


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@functools.lru_cache(maxsize=1)
def cpu_info() -> CpuInfo:
    """Return this machine's CPU facts (read once per process)."""
    try:
        text = CPUINFO.read_text()
    except OSError:
        text = ''
    return parse_cpuinfo(text, _usable_cores())


def int8_float_type(cpu: CpuInfo) -> str:
    """Return the type an INT8 model's float layers run in on ``cpu``: 'bf16' or 'f32'.

    bf16 where the CPU computes it natively (AMX or AVX-512 BF16): the int8 network then
    took 0.84-1.02 of its time with f32 float layers on an AMD EPYC with AVX-512 BF16, and
    1.01 on a Xeon with AMX (docs/backends.md). Elsewhere bf16 would be emulated, slower than
    f32, so they stay f32. ``precision: fp32`` never asks this: it is exact f32.
    """
    return 'bf16' if cpu.bf16 else 'f32'
