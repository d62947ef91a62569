"""Tasks: pre- and post-processing per task, shared by every runner."""

from .base import Task, default_values
from .registry import KNOWN_TASKS, TASK_MAP, TaskEntry, TaskError, create_task, param_defaults, \
    param_specs, task_class

__all__ = ['KNOWN_TASKS', 'TASK_MAP', 'Task', 'TaskEntry', 'TaskError', 'create_task',
           'default_values', 'param_defaults', 'param_specs', 'task_class']
