"""A class-data-sharing archive of the Spark driver JVM's classes (Java's dynamic AppCDS), kept per user: the first
run that starts Spark records the classes it loads and the JVM dumps them at exit; later runs map the archive and
their JVM starts in about half the time (5 s rather than 10 s on this project's 2-core machine).

Our own, because nothing packages it for pyspark. It can only help: the JVM checks the archive itself (its Java
version, Spark's classpath, the header) and starts without it, correctly, on any mismatch, so a stale or broken one
costs the saving, never a run. The archive is dumped to a name of this process's own and put in place by the next
run once its header (written last) is there; a writer killed mid-dump leaves a file that is never used.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import time
from pathlib import Path

MAGIC = bytes.fromhex("a8ab0bf0")
"""The first bytes of a finished dynamic archive (HotSpot's 0xf00baba8, little-endian), written after its regions."""

STALE_S = 3600.0
"""A half-written dump older than this is a writer that died: deleted."""


def archive_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gobblin-py"


def archive_path(pyspark_version: str) -> Path:
    """The archive of this pyspark install and this Java (by the java binary's real path and size, and where pyspark's
    jars are): one per pair. The JVM refuses an archive recorded with another classpath, so a second environment
    keyed alike would run without one for ever instead of recording its own."""
    java = shutil.which("java", path=str(Path(os.environ["JAVA_HOME"]) / "bin")) if os.environ.get("JAVA_HOME") else None
    java = java or shutil.which("java") or "java"
    real = Path(java).resolve()
    size = real.stat().st_size if real.exists() else 0
    spec = importlib.util.find_spec("pyspark")
    jars = Path(spec.origin).resolve().parent if spec is not None and spec.origin else ""
    key = hashlib.sha256(f"{real}:{size}:{jars}".encode()).hexdigest()[:12]
    return archive_dir() / f"spark-{pyspark_version}-{key}.jsa"


def java_options(pyspark_version: str) -> list[str]:
    """The driver JVM's options: map the archive when it is there; else record one (dumped at the JVM's exit)."""
    final = archive_path(pyspark_version)
    _promote(final)
    if final.is_file():
        return [f"-XX:SharedArchiveFile={final}"]
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        if any(final.parent.glob(f"{final.name}.*.dump")):
            return []  # another run is recording it
        dump = Path(f"{final}.{os.getpid()}.dump")
        dump.touch()  # says a recording is under way until the JVM writes over it at its exit
    except OSError:
        return []  # no cache directory here (read-only home): run without the archive
    return [f"-XX:ArchiveClassesAtExit={dump}"]


def _promote(final: Path) -> None:
    """A finished dump becomes the archive; one older than STALE_S that never finished is deleted."""
    for dump in sorted(final.parent.glob(f"{final.name}.*.dump")) if final.parent.is_dir() else []:
        try:
            with open(dump, "rb") as f:
                finished = f.read(4) == MAGIC
            if finished and not final.exists():
                os.replace(dump, final)
            elif finished or time.time() - dump.stat().st_mtime > STALE_S:
                dump.unlink()
        except OSError:
            continue  # another run promoted or removed it meanwhile
