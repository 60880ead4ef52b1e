"""The deletion commit step of `gobblin-py maintain`: remove listed files (a time partition past its retention, a
table's orphan files, the files only expired snapshots referenced), replayable after a crash anywhere in it."""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass, field
from typing import ClassVar

from gobblin_py.api.commit_step import CommitStep
from gobblin_py.errors import CommitError
from gobblin_py.fs import Location, filesystem_for


def inside(path: str, root: str) -> bool:
    """Whether `path` lies strictly under `root` (both folded: no `..` escape; local symlinks resolved)."""
    p, r = Location(path), Location(root)
    if p.is_local != r.is_local:
        return False
    if p.is_local:
        a, b = os.path.realpath(os.path.normpath(p)), os.path.realpath(os.path.normpath(r))
    else:
        if p.scheme != r.scheme:
            return False
        a, b = posixpath.normpath("/" + str(p).partition("://")[2]), posixpath.normpath("/" + str(r).partition("://")[2])
    return a != b and a.startswith(b.rstrip("/") + "/")


@dataclass
class FsDeleteCommitStep(CommitStep):
    """Delete `files` (path → size when listed), all under `root`, and then `directory` (under `root`) where it is
    left empty, with its empty parents up to `root`. Done when no listed file is there and the directory is gone.

    Every path is checked to lie under `root` where it is deleted, not only where the record was written (the store
    also confines `root` to the job's own directories). A listed file whose size changed since it was listed, or a
    file not listed in `directory`, is not this step's to delete: the step stops, naming it, and deletes nothing more.
    """

    type_name: ClassVar[str] = "fs_delete"
    root: str
    files: dict[str, int] = field(default_factory=dict)
    directory: str = ""
    what: str = ""
    """What is deleted, for operators (`partition 2026/01/01 of clicks`, `orphan files of table db.clicks`)."""

    def paths(self) -> list[str]:
        return [self.root, *([self.directory] if self.directory else []), *self.files]

    def _check(self, path: str) -> None:
        if not inside(path, self.root):
            raise CommitError(f"{self.describe()}: {path} is not under {self.root}; nothing was deleted (the record was "
                              "tampered with: abandon it with `gobblin-py recover JOB.yaml --dataset RECORD --abandon`)")

    def _directory_gone(self) -> bool:
        if not self.directory:
            return True
        loc = Location(self.directory)
        return not loc.is_local or not os.path.lexists(loc)

    def verify(self) -> bool:
        return all(not filesystem_for(f).exists(Location(f)) for f in self.files) and self._directory_gone()

    def execute(self) -> None:
        for path in (*([self.directory] if self.directory else []), *self.files):
            self._check(path)
        for path, size in self.files.items():
            loc = Location(path)
            fs = filesystem_for(loc)
            found = fs.size(loc)
            if found is None:
                continue  # deleted before a crash
            if found != size:
                raise CommitError(f"{self.describe()}: {path} is {found} bytes, not the {size} it was when listed: "
                                  "something wrote it since, so it is not deleted (nor anything after it); run "
                                  "`gobblin-py maintain` again to list it afresh")
            fs.delete(loc)
        self._remove_directory()

    def _remove_directory(self) -> None:
        """The emptied directory (and its emptied parents, up to `root`); a file left there that was not listed stops it."""
        if not self.directory or not Location(self.directory).is_local:
            return  # an object store has no directories to remove
        directory = os.path.normpath(Location(self.directory))
        for current, dirs, names in os.walk(directory, topdown=False):
            if names:
                raise CommitError(f"{self.describe()}: {os.path.join(current, names[0])} was not listed for deletion "
                                  f"(written since?): it and {directory} are kept; run `gobblin-py maintain` again")
            for d in dirs:
                _rmdir(os.path.join(current, d))
        _rmdir(directory)
        root, parent = os.path.normpath(Location(self.root)), os.path.dirname(directory)
        while inside(parent, root) and _rmdir(parent):
            parent = os.path.dirname(parent)

    def describe(self) -> str:
        return f"delete {self.what or self.directory or self.root} ({len(self.files)} file(s))"


def _rmdir(path: str) -> bool:
    """Remove an empty directory; False when it is not empty."""
    try:
        os.rmdir(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True
