"""Tasks: pre- and post-processing per task, shared by every runner."""

from .base import Task, default_values
from .registry import TASK_MAP, TaskError, create_task, task_class

__all__ = ['TASK_MAP', 'Task', 'TaskError', 'create_task', 'default_values', 'task_class']
