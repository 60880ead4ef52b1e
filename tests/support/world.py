"""A model-based test of runs × crashes × world changes: a generator of histories over one files → Avro job, each step
a real `gobblin-py` command in a child process (or a change to the world around it), checked by an oracle that reads
the output with the Apache `avro` package (a reader gobblin-py did not write).

The model knows every id it produced and which of them a successful run must have published: after every step no id
is in the output twice, no id is there that was never produced, and after a successful run every id complete before
it started is there; a command that does not succeed must say why (exit 1 or 2 with a message, or SIGKILL by the
history itself). A history is a seed: `History(seed, steps).run(tmp)` replays it exactly; the soak
(`scripts/soak_world.py`) runs many and prints the seed of any that breaks a rule.

Rules (each a step the generator draws): append a new file; append lines to a file (with a line still being written
at the end, as a tailing writer leaves it); run; run killed at a commit point; run killed at a random time; recover;
recover --abandon; compact (with and without dedup); a second run while one holds the lock; a file the job cannot read
as a file (a dangling symlink, removed again by the next such step); a file deleted upstream after it was ingested."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from gobblin_py.crashpoints import ENV
from gobblin_py.testing.crash import SIGKILLED, cli

SCHEMA = {"type": "record", "name": "Event", "fields": [
    {"name": "id", "type": "long"}, {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "v", "type": "string"}]}
DAY_MS = 86_400_000
START_MS = 1_767_225_600_000  # 2026-01-01
CRASH_POINTS = ("commit.before_store_write", "commit.store_write_midway", "commit.after_store_write",
                "commit.after_step:1", "commit.after_step:2", "commit.after_step:3", "commit.after_step:5",
                "commit.before_record_removal", "commit.after_record_removal", "recovery.before_commit")


@dataclass
class Violation(AssertionError):
    """A rule the history broke, with the seed and step that reproduce it."""

    seed: int
    step: int
    rule: str
    detail: str

    def __str__(self) -> str:
        return f"seed {self.seed}, step {self.step} ({self.rule}): {self.detail}"


@dataclass
class World:
    """The job's directory and what the model knows: ids produced, ids complete (a whole line) at each moment."""

    root: Path
    next_id: int = 1
    complete: set[int] = field(default_factory=set)    # ids on a whole line of a file the job may read
    partial: dict[Path, tuple[int, str]] = field(default_factory=dict)  # a file's unfinished last line: (id, rest)
    withdrawn: set[int] = field(default_factory=set)    # ids whose file the world rewrote: may be in the output or not
    broken: list[Path] = field(default_factory=list)    # paths that make a run fail until repaired
    log: list[str] = field(default_factory=list)

    @property
    def data(self) -> Path:
        return self.root / "data"

    def line(self, day: int) -> tuple[int, str]:
        i = self.next_id
        self.next_id += 1
        return i, json.dumps({"id": i, "ts": START_MS + day * DAY_MS + i, "v": f"v{i}"}) + "\n"


class History:
    """One seeded history of `steps` steps over a fresh world in `root`."""

    def __init__(self, seed: int, steps: int) -> None:
        self.seed, self.steps = seed, steps
        self.rng = random.Random(seed)

    def job(self, world: World) -> dict[str, Any]:
        schema = world.root / "event.avsc"
        schema.write_text(json.dumps(SCHEMA))
        return {
            "job": {"name": "w", "work_dir": str(world.root / "work"), "max_task_retries": 1, "commit_parallelism": 1,
                    "commit_max_attempts": 100},
            "source": {"class": "files", "path": str(world.data), "ingest_appended": True},
            "converters": [{"class": "json_to_avro", "schema": str(schema)}],
            "writer": {"class": "avro", "codec": "null", "partition": {"column": "ts", "granularity": "DAY",
                                                                       "pattern": "yyyy/MM/dd"}},
            "publisher": {"final_dir": str(world.root / "output")},
            "spark": {"master": "local[1]"},
        }

    def run(self, root: Path) -> World:
        world = World(root)
        world.data.mkdir(parents=True)
        (root / "job.yaml").write_text(yaml.safe_dump(self.job(world), sort_keys=False))
        rules: list[tuple[int, Callable[[World, int], None]]] = [
            (4, self.new_file), (3, self.append), (4, self.run_job), (3, self.run_killed_at_point),
            (1, self.run_killed_at_random), (1, self.recover), (1, self.abandon), (1, self.compact),
            (1, self.concurrent_runs), (1, self.dangling_symlink), (1, self.delete_file)]
        weights = [w for w, _ in rules]
        self.new_file(world, 0)
        for step in range(1, self.steps + 1):
            _, rule = self.rng.choices(rules, weights)[0]
            rule(world, step)
            self.check(world, step, rule.__name__, final=False)
        self.finish(world)
        return world

    # --- the oracle -------------------------------------------------------------------------------------------

    def output_ids(self, world: World) -> Counter[int]:
        from avro.datafile import DataFileReader
        from avro.io import DatumReader

        found: Counter[int] = Counter()
        for path in sorted((world.root / "output").rglob("*.avro")):
            if any(part.startswith((".", "_")) for part in path.relative_to(world.root / "output").parts):
                continue  # staged or hidden: readers skip them
            with open(path, "rb") as f, DataFileReader(f, DatumReader()) as reader:
                found.update(r["id"] for r in reader)
        return found

    def check(self, world: World, step: int, rule: str, final: bool) -> None:
        ids = self.output_ids(world)
        doubled = sorted(i for i, n in ids.items() if n > 1)
        if doubled:
            raise Violation(self.seed, step, rule, f"{len(doubled)} id(s) published twice, e.g. {doubled[:5]}")
        unknown = sorted(set(ids) - world.complete - world.withdrawn)
        if unknown:
            raise Violation(self.seed, step, rule, f"ids never produced as a whole line: {unknown[:5]}")
        if final:
            missing = sorted(world.complete - world.withdrawn - set(ids))
            if missing:
                raise Violation(self.seed, step, rule, f"{len(missing)} id(s) never published, e.g. {missing[:5]}")

    def finish(self, world: World) -> None:
        """Repair the world, recover, run until nothing is new: then every complete id is published once."""
        for path in world.broken:
            path.unlink(missing_ok=True)
        world.broken.clear()
        self.cli(world, ["recover", "job.yaml", "--all"], self.steps + 1, "recover", ok=(0, 1))
        for _ in range(2):
            done = self.cli(world, ["run", "job.yaml", "--in-process"], self.steps + 1, "final run", ok=(0,))
            if "no new data" in done.stdout:
                break
        self.check(world, self.steps + 1, "final", final=True)

    def cli(self, world: World, args: list[str], step: int, rule: str, ok: tuple[int, ...], crash_at: str | None = None,
            ) -> subprocess.CompletedProcess[str]:
        done = cli(args, world.root, crash_at=crash_at)
        world.log.append(f"{step} {rule}: {' '.join(args)} {crash_at or ''} -> {done.returncode}")
        if done.returncode not in ok:
            raise Violation(self.seed, step, rule, f"`{' '.join(args)}` exited {done.returncode}: "
                                                   f"{(done.stderr or done.stdout).strip()[-600:]}")
        if done.returncode in (1, 2) and not (done.stderr or done.stdout).strip():
            raise Violation(self.seed, step, rule, f"`{' '.join(args)}` failed without saying why")
        if "Traceback" in done.stdout + done.stderr:
            raise Violation(self.seed, step, rule, f"a traceback without --verbose: {done.stderr[-600:]}")
        return done

    # --- rules ------------------------------------------------------------------------------------------------

    def new_file(self, world: World, step: int) -> None:
        dataset = self.rng.choice(["a", "b"])
        directory = world.data / dataset
        directory.mkdir(exist_ok=True)
        lines = [world.line(self.rng.randrange(3)) for _ in range(self.rng.randint(1, 30))]
        path = directory / f"f{world.next_id}.jsonl"
        path.write_text("".join(text for _, text in lines))
        world.complete.update(i for i, _ in lines)

    def append(self, world: World, step: int) -> None:
        files = sorted(p for p in world.data.rglob("*.jsonl") if p.is_file() and not p.is_symlink())
        if not files:
            return self.new_file(world, step)
        path = self.rng.choice(files)
        text = ""
        if path in world.partial:  # finish the line left half-written
            i, rest = world.partial.pop(path)
            text += rest
            world.complete.add(i)
        lines = [world.line(self.rng.randrange(3)) for _ in range(self.rng.randint(1, 10))]
        text += "".join(t for _, t in lines)
        world.complete.update(i for i, _ in lines)
        if self.rng.random() < 0.4:  # a line still being written when the next run plans
            i, line = world.line(self.rng.randrange(3))
            cut = self.rng.randint(1, len(line) - 2)
            text += line[:cut]
            world.partial[path] = (i, line[cut:])
        with path.open("a") as f:
            f.write(text)

    def run_job(self, world: World, step: int) -> None:
        self.cli(world, ["run", "job.yaml", "--in-process"], step, "run", ok=(0, 1) if world.broken else (0,))

    def run_killed_at_point(self, world: World, step: int) -> None:
        point = self.rng.choice(CRASH_POINTS)
        self.cli(world, ["run", "job.yaml", "--in-process"], step, "run killed", ok=(0, 1, SIGKILLED), crash_at=point)

    def run_killed_at_random(self, world: World, step: int) -> None:
        env = {k: v for k, v in os.environ.items() if k != ENV}
        proc = subprocess.Popen([sys.executable, "-m", "gobblin_py.cli.main", "run", "job.yaml", "--in-process"],
                                cwd=world.root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(self.rng.uniform(0.2, 2.0))
        proc.kill()
        world.log.append(f"{step} run killed at random -> {proc.wait()}")

    def recover(self, world: World, step: int) -> None:
        self.cli(world, ["recover", "job.yaml", "--all"], step, "recover", ok=(0, 1))

    def abandon(self, world: World, step: int) -> None:
        self.cli(world, ["recover", "job.yaml", "--all", "--abandon", "--yes"], step, "abandon", ok=(0, 1))

    def compact(self, world: World, step: int) -> None:
        args = ["compact", "job.yaml", "--in-process", "--min-files", "2"]
        if self.rng.random() < 0.5:
            args += ["--dedup-key", "id"]
        self.cli(world, args, step, "compact", ok=(0, 1))

    def concurrent_runs(self, world: World, step: int) -> None:
        """Two runs at once: the job lock lets one through; the other exits 1 saying the job is running."""
        env = {k: v for k, v in os.environ.items() if k != ENV}
        cmd = [sys.executable, "-m", "gobblin_py.cli.main", "run", "job.yaml", "--in-process"]
        procs = [subprocess.Popen(cmd, cwd=world.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for _ in range(2)]
        codes = [p.wait(timeout=300) for p in procs]
        world.log.append(f"{step} concurrent runs -> {codes}")
        if any(c not in (0, 1) for c in codes):
            raise Violation(self.seed, step, "concurrent runs", f"exit codes {codes}")

    def dangling_symlink(self, world: World, step: int) -> None:
        if world.broken:  # repair: the next runs can succeed again
            for path in world.broken:
                path.unlink(missing_ok=True)
            world.broken.clear()
            return
        link = world.data / self.rng.choice(["a", "b"]) / f"gone{step}.jsonl"
        link.parent.mkdir(exist_ok=True)
        link.symlink_to(world.root / "nowhere.jsonl")
        world.broken.append(link)

    def delete_file(self, world: World, step: int) -> None:
        """A file removed upstream (retention): what was published of it stays, once; nothing of it is required."""
        files = sorted(p for p in world.data.rglob("*.jsonl") if p.is_file() and not p.is_symlink() and p not in world.partial)
        if not files:
            return
        path = self.rng.choice(files)
        old = {json.loads(line)["id"] for line in path.read_text().splitlines() if line.strip()}
        world.withdrawn |= old & world.complete
        world.complete -= old
        path.unlink()  # the source never re-reads a removed file; its published records stay
