"""Backend runners: one file per backend, all behind :class:`~.base.Runner`."""

from .base import PRECISIONS, Runner, RunnerConfig, RunnerError

__all__ = ['PRECISIONS', 'Runner', 'RunnerConfig', 'RunnerError']
