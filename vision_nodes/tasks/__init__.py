"""Tasks: pre- and post-processing per task, shared by every runner; manifest loading."""

from .base import Task, default_values
from .registry import KNOWN_TASKS, TASK_MAP, TaskEntry, TaskError, create_task, load_manifest, \
    param_defaults, param_specs, parse_manifest, resolve_manifest, task_class

__all__ = ['KNOWN_TASKS', 'TASK_MAP', 'Task', 'TaskEntry', 'TaskError', 'create_task',
           'default_values', 'load_manifest', 'param_defaults', 'param_specs',
           'parse_manifest', 'resolve_manifest', 'task_class']
