"""The files world of the model-based test (see world.py): a files → Avro job over two datasets of JSON-lines files,
read back with the Apache `avro` package.

Its rules, besides those every world has (a run in the driver or on real local Spark, a run killed at a commit point
or at random, recover, recover --abandon, compact with and without dedup, a second run at the same time, `state
reset`): a new file (or a batch of them, packed by the next run into one work unit); lines appended to a file (with a line still being written at the end, as a tailing writer leaves
it); a file the job cannot read as a file (a dangling symlink, removed again by the next such step); a file deleted
upstream after it was ingested; a file rotated as copytruncate does (truncated and written again, longer: runs fail
naming it until `state reset --to FILE=0`, then its new lines are read); a disk full for one run (RLIMIT_FSIZE in the child, SIGXFSZ ignored, so a write past
the limit fails with EFBIG: the run fails saying why, or succeeds); `maintain --yes` (the table options, which files
datasets note as not supported, alone or with a `--retention` cut between two days of the data: the older days' ids
may go, must be gone when it exits 0, and no other id may lose a copy; half the time killed at a commit point; the
table worlds draw their own, with the same retention). `state reset --dataset D` drops the dataset's
watermarks: the next run reads each of its files again from the start, so every whole line of them is owed once more
(at most; see World.reread)."""

from __future__ import annotations

import json
import random
import resource
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from gobblin_py.state.store import StateStore
from support.world import DAY_MS, RUN, SCHEMA, START_MS, History, Rule, Violation, World, avro_ids

DATASETS = ("a", "b")


@dataclass
class FilesWorld(World):
    """A world of input files; a file's unfinished last line is not yet an id the job may read."""

    partial: dict[Path, tuple[int, str]] = field(default_factory=dict)  # a file's unfinished last line: (id, rest)
    rotated: set[str] = field(default_factory=set)  # files rotated (`rotate`) and not yet repaired, by name
    days: dict[int, int] = field(default_factory=dict)  # id → its day of 2026 (its time partition)
    retired: int = 0  # a `maintain --retention` was asked to remove days 0 .. retired-1 (it may replay any time later)

    def record(self, day: int) -> tuple[int, dict[str, Any]]:
        i, record = super().record(day)
        self.days[i] = day
        return i, record

    def retiring(self, days: int) -> Callable[[int], bool]:
        """Whether an id lies in the days 0 .. days-1 a retention removes."""
        return lambda i: self.days.get(i, days) < days

    @property
    def data(self) -> Path:
        return self.root / "data"

    def line(self, day: int) -> tuple[int, str]:
        i, record = self.record(day)
        return i, json.dumps(record) + "\n"

    def files(self, dataset: str | None = None) -> list[Path]:
        """The regular input files (of one dataset), in a stable order."""
        under = self.data / dataset if dataset else self.data
        return sorted(p for p in under.rglob("*.jsonl") if p.is_file() and not p.is_symlink())


def retention_age(days: int) -> str:
    """`--retention` that removes the time partitions of days 0 .. days-1 of the world's data and keeps the later
    ones: the cut lies half a day past the end of day `days - 1`."""
    hours = (time.time() * 1000 - START_MS - days * DAY_MS) / 3_600_000 - 12
    return f"{int(hours)}h"


def whole_lines(path: Path) -> set[int]:
    """The ids on the whole lines of an input file (a torn last line is not one)."""
    return {json.loads(line)["id"] for line in path.read_text().splitlines(keepends=True) if line.endswith("\n")}


class FilesHistory(History):
    """A history of a files → Avro job (see the module's docstring)."""

    kind = "files"
    world_type: ClassVar[type[FilesWorld]] = FilesWorld
    leased_share = 0.5  # half the histories: two drivers of the work directory kept apart by the lease alone
    pause_weight = 1

    def new_world(self, root: Path) -> World:
        world = self.world_type(root)
        world.data.mkdir(parents=True)
        return world

    def job(self, world: World) -> dict[str, Any]:
        schema = world.root / "event.avsc"
        schema.write_text(json.dumps(SCHEMA))
        return {
            "job": {"name": "w", "work_dir": str(world.root / "work"), "max_task_retries": 1, "commit_parallelism": 1,
                    "commit_max_attempts": 100},
            "source": {"class": "files", "path": str(world.root / "data"), "ingest_appended": True},
            "converters": [{"class": "json_to_avro", "schema": str(schema)}],
            "writer": self.writer(),
            "publisher": self.publisher(world),
            "spark": {"master": "local[1]", "in_driver_below": 0},
        }

    def writer(self) -> dict[str, Any]:
        return {"class": "avro", "codec": "null", "partition": {"column": "ts", "granularity": "DAY", "pattern": "yyyy/MM/dd"}}

    def publisher(self, world: World) -> dict[str, Any]:
        return {"final_dir": str(world.root / "output")}

    def output_ids(self, world: World) -> Counter[int]:
        return avro_ids(world.root / "output")

    rotate_weight: ClassVar[int] = 1
    """How often `rotate` is drawn; 0 in the table worlds (a weight-0 rule never changes which rule a seed draws)."""
    files_upkeep_weight: ClassVar[int] = 1
    """How often the files dataset's `maintain` is drawn; 0 in the table worlds, which have their own."""

    def rules(self) -> list[tuple[int, Rule]]:
        return [*super().rules(), (3, self.append), (1, self.dangling_symlink), (1, self.delete_file),
                (1, self.disk_full), (self.rotate_weight, self.rotate), (self.files_upkeep_weight, self.maintain)]

    def finish(self, world: World) -> None:
        """As every world finishes; then logs whether the runs read packed work units (several new files a task, see
        the files source) and single ones (one file, or its appended bytes): the rules must draw both."""
        super().finish(world)
        tasks = [t for run in StateStore(world.root / "work", "w").runs() for t in run.get("tasks", [])]
        if any(t.get("packed_keys") for t in tasks):
            world.log.append("ran packed work units")
        if any(not t.get("packed_keys") for t in tasks):
            world.log.append("ran single work units")

    def check(self, world: World, step: int, rule: str, final: bool) -> None:
        """As every world checks; an id of a day a retention was asked to remove may end with no copy."""
        assert isinstance(world, FilesWorld)
        for i, day in world.days.items():
            if day < world.retired:
                world.lowest[i] = 0
        super().check(world, step, rule, final)

    # --- upkeep ---------------------------------------------------------------------------------------------

    def with_retention(self, world: World, step: int, actions: list[str]) -> tuple[list[str], int]:
        """`actions` with or without a `--retention` cut between two days of the data, or the retention alone (the
        combined form the docs show among them), and how many days it removes (0: none). Drawn by a generator of its
        own, so that a seed draws every other step as it did before retention was a rule."""
        assert isinstance(world, FilesWorld)
        upkeep = random.Random(f"{self.seed}/{step}/retention")
        retire = upkeep.choice((0, 0, 1, 2))
        if retire:
            actions = [*([] if upkeep.random() < 0.25 else actions), "--retention", retention_age(retire)]
            world.retired = max(world.retired, retire)  # from now on even a killed maintain may have removed them
        return actions, retire

    def retention_done(self, world: World, step: int, retire: int, done: subprocess.CompletedProcess[str]) -> None:
        """A retention that exited 0 refusing nothing left no id of the days it removes."""
        assert isinstance(world, FilesWorld)
        if not retire or done.returncode != 0 or "refused" in done.stdout:
            return
        left = sorted(i for i in self.read(world, step, "maintain") if world.retiring(retire)(i))
        if left:
            raise Violation(self.seed, step, "maintain", f"the retention of days before {retire} exited 0 and left "
                                                         f"ids {left[:5]} of those days: {done.stdout[-800:]}")
        world.log.append(f"{step} maintain removed the partitions of days before {retire}")

    def maintain(self, world: World, step: int) -> None:
        """`maintain --yes` on the files datasets: the table options alone or with a retention (the former note
        that they are not supported for files), half the time killed at a commit point; no other id may lose a copy,
        nor the next run be blocked."""
        assert isinstance(world, FilesWorld)
        actions, retire = self.with_retention(world, step, ["--expire-snapshots-older-than", "1h",
                                                            "--remove-orphans-older-than", "1h"])
        done = self.maintain_with(world, step, actions, may_lose=world.retiring(retire))
        self.retention_done(world, step, retire, done)

    # --- rules ------------------------------------------------------------------------------------------------

    produce_batches: ClassVar[bool] = True
    """Whether `produce` lands, half the time, a batch of files in one dataset (which the next run packs into one work
    unit, see the files source); False in the table worlds."""

    def produce(self, world: World, step: int) -> None:
        """A new file in one of the datasets; half the time a batch of two to four (drawn by a generator of their own,
        so a seed draws every other step as it did before batches)."""
        assert isinstance(world, FilesWorld)
        directory = world.data / self.rng.choice(DATASETS)
        directory.mkdir(exist_ok=True)
        lines = [world.line(self.rng.randrange(3)) for _ in range(self.rng.randint(1, 30))]
        path = directory / f"f{world.next_id}.jsonl"
        path.write_text("".join(text for _, text in lines))
        world.produced([i for i, _ in lines])
        batch = random.Random(f"{self.seed}/{step}/batch")
        if self.produce_batches and batch.random() < 0.5:
            for _ in range(batch.randint(1, 3)):
                lines = [world.line(batch.randrange(3)) for _ in range(batch.randint(1, 30))]
                (directory / f"f{world.next_id}.jsonl").write_text("".join(text for _, text in lines))
                world.produced([i for i, _ in lines])

    def append(self, world: World, step: int) -> None:
        assert isinstance(world, FilesWorld)
        files = world.files()
        if not files:
            return self.produce(world, step)
        path = self.rng.choice(files)
        text = ""
        if path in world.partial:  # finish the line left half-written
            i, rest = world.partial.pop(path)
            text += rest
            world.produced([i])
        lines = [world.line(self.rng.randrange(3)) for _ in range(self.rng.randint(1, 10))]
        text += "".join(t for _, t in lines)
        world.produced([i for i, _ in lines])
        if self.rng.random() < 0.4:  # a line still being written when the next run plans
            i, line = world.line(self.rng.randrange(3))
            cut = self.rng.randint(1, len(line) - 2)
            text += line[:cut]
            world.partial[path] = (i, line[cut:])
        with path.open("a") as f:
            f.write(text)

    def dangling_symlink(self, world: World, step: int) -> None:
        """A dangling symlink among the inputs: runs fail naming it until the next such step removes it."""
        assert isinstance(world, FilesWorld)
        links = [name for name in world.broken if name.startswith("gone")]
        for name in links:
            world.broken.pop(name)()
        if links:
            return
        link = world.data / self.rng.choice(DATASETS) / f"gone{step}.jsonl"
        link.parent.mkdir(exist_ok=True)
        link.symlink_to(world.root / "nowhere.jsonl")
        world.broken[link.name] = lambda: link.unlink(missing_ok=True)
        world.log.append(f"{step} dangling symlink {link.relative_to(world.root)}")

    def delete_file(self, world: World, step: int) -> None:
        """A file removed upstream (retention): what was published of it stays, once; nothing more of it is owed."""
        assert isinstance(world, FilesWorld)
        files = [p for p in world.files() if p not in world.partial]
        if not files:
            return
        path = self.rng.choice(files)
        world.withdraw(whole_lines(path), self.output_ids(world))
        path.unlink()  # the source never re-reads a removed file; its published records stay
        world.log.append(f"{step} deleted {path.relative_to(world.root)}")

    def rotate(self, world: World, step: int) -> None:
        """copytruncate log rotation: a file truncated and written again with new lines, longer than before. A run
        must not read it on from its old offset (losing the new first lines): it fails naming the file until the
        repair the message gives (`recover`, then `state reset --dataset D --to FILE=0`), which the next such step,
        or the end, makes; then its new lines are read (once more than the output holds, at most: World.reread). A
        file no run read since its dataset's reset needs no repair: the next run reads it from its start, and a reset
        to 0 then would read again what that run published (soak seed 3299353497: the model's, not the product's)."""
        assert isinstance(world, FilesWorld)
        pending = [name for name in world.broken if name in world.rotated]
        for name in pending:
            world.rotated.discard(name)
            world.broken.pop(name)()
        if pending:
            return
        files = [p for p in world.files() if p not in world.partial]
        if not files:
            return
        path = self.rng.choice(files)
        world.withdraw(whole_lines(path), self.output_ids(world))  # the old lines went to the rotated copy
        size = path.stat().st_size
        lines: list[tuple[int, str]] = []
        while sum(len(t) for _, t in lines) <= size:
            lines.append(world.line(self.rng.randrange(3)))
        path.write_text("".join(t for _, t in lines))
        new = [i for i, _ in lines]
        world.produced(new)
        dataset, rel = path.relative_to(world.data).parts[0], "/".join(path.relative_to(world.data).parts[1:])

        def repair() -> None:
            self.cli(world, ["recover", "job.yaml", "--all"], step, "recover before reset", ok=(0, 1))
            now = self.output_ids(world)
            self.cli(world, ["state", "reset", "job.yaml", "--dataset", dataset, "--to", f"{rel}=0", "--yes"], step,
                     "state reset after rotation", ok=(0,))
            # the reset asks for every line the file holds now to be read again: the rotation's, and any appended
            # since and already published by a run the dataset's own reset let read it (soak seed 3175714563)
            world.reread(whole_lines(path) if path.exists() else set(), now)

        world.log.append(f"{step} rotated {path.relative_to(world.root)}: {size} → {path.stat().st_size} bytes")
        self.cli(world, ["recover", "job.yaml", "--all"], step, "recover after rotation", ok=(0, 1))
        offset = StateStore(world.root / "work", "w").watermarks().get(dataset, {}).get(rel)
        if isinstance(offset, int) and offset > 0:  # read before: the next run must not read on from there
            world.broken[path.name] = repair  # a failing run names the file
            world.rotated.add(path.name)
            done = self.cli(world, RUN, step, "run after rotation", ok=(1,))
            if path.name not in done.stdout + done.stderr:
                raise Violation(self.seed, step, "run after rotation", f"failed without naming {path.name}")

    def disk_full(self, world: World, step: int) -> None:
        """A run on a disk that fills up: no file it writes may grow past a few KiB (EFBIG, as ENOSPC would fail)."""
        limit = self.rng.choice((512, 4096, 32768))
        self.cli(world, RUN, step, f"run, disk full at {limit} bytes", ok=(0, 1), preexec=file_size_limit(limit))

    def reset_to(self, world: World) -> tuple[list[str], Callable[[], set[int]]]:
        """Drop one dataset's watermarks: every whole line of its files is read again (and what such a reset
        repairs, `reset_repairs`, is repaired)."""
        assert isinstance(world, FilesWorld)
        dataset = self.rng.choice(DATASETS)

        def owed() -> set[int]:
            for key in self.reset_repairs(dataset):
                world.broken.pop(key, None)
            return {i for p in world.files(dataset) for i in whole_lines(p)}
        return ["--dataset", dataset], owed

    def reset_repairs(self, dataset: str) -> list[str]:
        """The `World.broken` keys a `state reset --dataset D` repairs (a table restored or dropped); none here."""
        return []

    def reset_dataset(self, world: FilesWorld, dataset: str, step: int, recover: list[str], rule: str, what: str) -> None:
        """A repair by `state reset --dataset D`, after `recover RECOVER…` (logged as `rule`): every whole line of D's
        files is owed once more than the output holds then."""
        self.cli(world, ["recover", "job.yaml", *recover], step, rule, ok=(0, 1))
        now = self.read(world, step, f"state reset after {what}")
        self.cli(world, ["state", "reset", "job.yaml", "--yes", "--dataset", dataset], step, f"state reset after {what}",
                 ok=(0,))
        world.reread({i for p in world.files(dataset) for i in whole_lines(p)}, now)


def file_size_limit(limit: int) -> Callable[[], None]:
    """For a child's preexec_fn: no file it writes may grow past `limit` bytes, and a write past it fails (EFBIG)."""
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply
