"""Optional dependencies of built-in plugins, checked when a job file is validated: a plugin that needs an extra
package names what to install instead of failing inside a task."""

from __future__ import annotations

import importlib


def require(module: str, what: str, extra: str) -> None:
    """Raise a ValueError (reported with the setting's key) when `module` cannot be imported: `what` needs it,
    and `pip install 'gobblin-py[extra]'` brings it."""
    try:
        importlib.import_module(module)
    except ImportError:
        raise ValueError(f"{what}: pip install 'gobblin-py[{extra}]'") from None
