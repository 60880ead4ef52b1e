"""Optional dependencies of built-in plugins, checked when a job file is validated: a plugin that needs an extra
package names what to install instead of failing inside a task."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path


def require(module: str, what: str, extra: str) -> None:
    """Raise a ValueError (reported with the setting's key) when `module` cannot be imported: `what` needs it,
    and `pip install 'gobblin-py[extra]'` brings it."""
    if not installed(module):
        raise ValueError(f"{what}: pip install 'gobblin-py[{extra}]'") from None


def installed(module: str) -> bool:
    """Whether `module` is there to import, found without importing it where its files can be seen: validating a job
    must not cost pyarrow's and numpy's import (a third of a second of every run); imported where they cannot."""
    parts = module.split(".")
    for i in range(len(parts), 0, -1):
        name = ".".join(parts[:i])
        if name in sys.modules:  # imported already (or hidden: None)
            if sys.modules[name] is None:
                return False
            if i == len(parts):
                return True
    try:
        spec = importlib.util.find_spec(parts[0])
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    places = list(spec.submodule_search_locations or [])
    for part in parts[1:]:
        found = [Path(p) / part for p in places if (Path(p) / part).is_dir()]
        if found:
            places = [str(p) for p in found]
            continue
        if any((Path(p) / f"{part}{suffix}").is_file() for p in places for suffix in importlib.machinery.all_suffixes()):
            return True
        return _imports(module)  # not in a plain layout: ask the import system
    return True


def _imports(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True
