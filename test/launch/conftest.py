"""Launch test files skip with one reason where the ROS 2 launch stack is missing.

Each launch_testing file guards its own imports too (for ``launch_test``), but under pytest
this gives every file that uses launch_testing the same reason, saying where the stack comes
from (``launch_skip.NO_LAUNCH_STACK``), whatever its own guard says.
"""

from __future__ import annotations

import pytest

from launch_skip import NO_LAUNCH_STACK


class _NeedsTheLaunchStack(pytest.Module):
    """A test module that is not imported: it skips, saying why."""

    def _getobj(self):
        pytest.skip(NO_LAUNCH_STACK, allow_module_level=True)


try:
    import launch_testing  # noqa: F401
except ImportError:
    def pytest_pycollect_makemodule(module_path, parent):
        """Make a launch_testing file a module that skips with NO_LAUNCH_STACK."""
        if 'launch_testing' in module_path.read_text(errors='replace'):
            return _NeedsTheLaunchStack.from_parent(parent, path=module_path)
        return None
