"""The machinery of the model-based test of runs × crashes × world changes (issue 26): a seeded generator of
histories, each step a real `gobblin-py` command in a child process (or a change to the world around the job), and an
oracle that counts every produced id in what an independent reader sees. Each job shape is a world of its own that
subclasses `History`: world_files.py (files → Avro), world_kafka.py (Kafka → Avro on a local Tansu broker),
world_iceberg.py (files → an Iceberg table), world_delta.py (files → a Delta Lake table, with `maintain`'s vacuum and
log expiry), world_upsert.py (a keyed Kafka topic with tombstones → an Iceberg table in upsert mode, whose oracle is
by key, not by id: it overrides `check`), world_cdc.py and world_mysql_cdc.py (postgres_cdc and mysql_cdc into
Iceberg or Delta upsert tables, sharing world_keyed.py), world_jdbc.py (MariaDB tables → jdbc → Avro or Parquet files, whose
oracle counts row versions and checks the committed high); `WORLDS` in `scripts/soak_world.py` names them for the soak.

The oracle: every id has a number of copies the output must hold at the end (one once produced, one more for each
`state reset` that asks for it to be read again) and never holds more, after any step; an id the world took back (its
file deleted, its topic deleted) or a dedup compaction merged may end with fewer, down to what was published when
that happened. A command that does not succeed must say why (exit 1 or 2 with a message and no traceback; a run
failing while the world is broken names what broke), or be killed by the history itself. A history is a seed:
`KIND(seed, steps).run(dir)` replays it.

A second host (issue 43): in a share `leased_share` of the histories (half in the files, Kafka, Iceberg and Delta
worlds, drawn by a generator of their own) the job sets `job.lease: {url: <world>/leases, ttl: 2}`, a directory
standing for the store several hosts share, so that two drivers of the one work directory are kept apart by the lease
alone (no lock); the other histories keep the work directory's lock. After a step's rule such a world may also take
`paused_past_lease` (as often as a rule of weight `pause_weight`, drawn by a generator of its own, so that a seed
draws every other step as before): a run frozen at a commit point (SIGSTOP) with another driver beside it, see its
docstring."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import yaml

from gobblin_py.crashpoints import ENV, PAUSE_ENV, WINDOW_ENV
from gobblin_py.testing.crash import SIGKILLED

SCHEMA = {"type": "record", "name": "Event", "fields": [
    {"name": "id", "type": "long"}, {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "v", "type": "string"}]}
DAY_MS = 86_400_000
START_MS = 1_767_225_600_000  # 2026-01-01
CRASH_POINTS = ("commit.before_store_write", "commit.store_write_midway", "commit.after_store_write",
                "commit.after_step:1", "commit.after_step:2", "commit.after_step:3", "commit.after_step:5",
                "commit.before_record_removal", "commit.after_record_removal", "recovery.before_commit")
RUN = ["run", "job.yaml", "--in-process"]
JOB = "w"
"""Every world's job name."""
LEASE_TTL = 2
"""`job.lease.ttl` of a leased history, in seconds: short, so that a frozen driver's lease expires within a step."""
HELD_ELSEWHERE = "is running elsewhere"
"""What a run refused by another driver's live lease says."""
LOCKED = "is already running"
"""What a run refused by the work directory's lock says."""

Rule = Callable[["World", int], None]


@dataclass
class Violation(AssertionError):
    """A rule the history broke, with the seed and step that reproduce it."""

    seed: int
    step: int
    rule: str
    detail: str
    log: list[str] = field(default_factory=list)  # the history's steps up to the violation

    def __str__(self) -> str:
        return f"seed {self.seed}, step {self.step} ({self.rule}): {self.detail}"


@dataclass
class World:
    """The job's directory and what the model knows: how many copies of each id the output must end with."""

    root: Path
    next_id: int = 1
    expected: Counter[int] = field(default_factory=Counter)  # id → copies at the end, and at most at any time
    lowest: dict[int, int] = field(default_factory=dict)     # id → fewer copies the end may hold (taken back, merged)
    withdrawn: set[int] = field(default_factory=set)         # ids taken back at their source: never read again
    broken: dict[str, Callable[[], None]] = field(default_factory=dict)  # what a failing run names → its repair
    log: list[str] = field(default_factory=list)

    def record(self, day: int) -> tuple[int, dict[str, Any]]:
        """A new record with the next id, on day `day` of 2026."""
        i = self.next_id
        self.next_id += 1
        return i, {"id": i, "ts": START_MS + day * DAY_MS + i, "v": f"v{i}"}

    def produced(self, ids: list[int] | set[int]) -> None:
        """Ids the job can now read: each must end in the output once."""
        for i in ids:
            self.expected[i] = 1

    def withdraw(self, ids: list[int] | set[int], now: Counter[int]) -> None:
        """Ids the world took back: what is published of them stays; the rest may never be."""
        self.withdrawn.update(ids)
        for i in ids:
            self.lowest[i] = min(now[i], self.lowest.get(i, self.expected[i]))

    def reread(self, ids: list[int] | set[int], now: Counter[int]) -> None:
        """Ids a `state reset` asked to be read again: at most one more copy than the output holds now, and at least
        the one owed. (A re-read of the very range published before makes the very file names, whose publication
        then finds the files there, byte-identical, and takes them for its own replay: no second copy.)"""
        for i in ids:
            self.expected[i] = now[i] + 1
            self.lowest[i] = min(max(now[i], 1), self.lowest.get(i, now[i] + 1))

    def merged(self) -> None:
        """A dedup compaction ran: an id read more than once may end with one copy."""
        for i, n in self.expected.items():
            if n > 1:
                self.lowest[i] = min(1, self.lowest.get(i, n))


def drew(log: list[str], rules: list[str] | tuple[str, ...]) -> None:
    """The CI histories' log has a line matching each regular expression of `rules` (what the chosen seeds must
    cover); else the failure names the rules no history drew."""
    missing = [rule for rule in rules if not any(re.search(rule, line) for line in log)]
    assert not missing, f"no history drew {missing}: pick other seeds"


def command(args: list[str]) -> list[str]:
    """`gobblin-py ARGS` as a child process runs it."""
    return [sys.executable, "-m", "gobblin_py.cli.main", *args]


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This environment without any crash or pause point, plus `extra`."""
    return {k: v for k, v in os.environ.items() if k not in (ENV, WINDOW_ENV, PAUSE_ENV)} | (extra or {})


def start(world: World, args: list[str], env: dict[str, str] | None = None, **popen: Any) -> subprocess.Popen[str]:
    """`gobblin-py ARGS` started in the world's directory, in a process group of its own (Spark's JVM joins it)."""
    popen.setdefault("stdout", subprocess.DEVNULL)
    popen.setdefault("stderr", subprocess.DEVNULL)
    return subprocess.Popen(command(args), cwd=world.root, env=child_env(env), text=True, start_new_session=True,
                            **popen)


def reap(proc: subprocess.Popen[str], kill: bool = False) -> int:
    """SIGKILL the child if `kill`, wait for it, then SIGKILL what is left of its group; its return code."""
    if kill and proc.poll() is None:
        proc.kill()
    rc = proc.wait(timeout=300)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return rc


def avro_ids(directory: Path) -> Counter[int]:
    """id → copies in the Avro files under `directory`, read by the Apache `avro` package (staged, hidden skipped)."""
    from avro.datafile import DataFileReader
    from avro.io import DatumReader

    found: Counter[int] = Counter()
    for path in sorted(directory.rglob("*.avro")):
        if any(part.startswith((".", "_")) for part in path.relative_to(directory).parts):
            continue  # staged or hidden: readers skip them
        with open(path, "rb") as f, DataFileReader(f, DatumReader()) as reader:
            found.update(r["id"] for r in reader)
    return found


class History:
    """One seeded history of `steps` steps over a fresh world; a subclass gives the job, its world and its rules.
    `include` names rules taken once each at evenly spaced steps (so a short history in CI has its rare ones)."""

    kind: ClassVar[str] = ""
    crash_points: ClassVar[tuple[str, ...]] = CRASH_POINTS  # where a run is killed (`run_killed_at_point`, on Spark)
    leased_share: ClassVar[float] = 0.0
    """The share of histories whose job sets `job.lease.url` (see the module's docstring); 0: every history keeps the
    work directory's lock."""
    pause_weight: ClassVar[int] = 0
    """How often `paused_past_lease` is drawn, as a weight among `rules()`; 0 in the worlds without it."""

    def __init__(self, seed: int, steps: int, include: tuple[str, ...] = (), pauses: tuple[int, ...] = ()) -> None:
        self.seed, self.steps = seed, steps
        self.rng = random.Random(seed)
        self.include = {steps * (n + 1) // (len(include) + 1): name for n, name in enumerate(include)}
        # a second host, drawn by generators of its own, so that a seed draws every other step as it did before it
        self.leased = random.Random(f"{seed}/lease").random() < self.leased_share
        self.pause_rng = random.Random(f"{seed}/pause")
        self.pauses = set(pauses)  # steps that also take `paused_past_lease` (so a short history in CI has it)

    # --- what a world gives ---------------------------------------------------------------------------------

    def new_world(self, root: Path) -> World:
        """A fresh world in `root`, before its job file is written."""
        raise NotImplementedError

    def job(self, world: World) -> dict[str, Any]:
        """The job's settings, paths inside the world."""
        raise NotImplementedError

    def output_ids(self, world: World) -> Counter[int]:
        """id → copies in the output, as a reader gobblin-py did not write sees it."""
        raise NotImplementedError

    def produce(self, world: World, step: int) -> None:
        """New input the job can read."""
        raise NotImplementedError

    def rules(self) -> list[tuple[int, Rule]]:
        """(weight, rule) of every step the generator draws; Spark runs are slow, so rare."""
        return [(4, self.produce), (4, self.run_job), (3, self.run_killed_at_point), (1, self.run_killed_at_random),
                (1, self.recover), (1, self.abandon), (1, self.compact), (1, self.concurrent_runs),
                (1, self.state_reset), (1, self.run_on_spark)]

    def with_lease(self, world: World, job: dict[str, Any]) -> dict[str, Any]:
        """The job's settings, with `job.lease` on the world's shared directory in a leased history."""
        if self.leased:
            job["job"]["lease"] = {"url": str(world.root / "leases"), "ttl": LEASE_TTL}
        return job

    # --- the history ----------------------------------------------------------------------------------------

    def run(self, root: Path) -> World:
        world = self.new_world(root)
        (root / "job.yaml").write_text(yaml.safe_dump(self.with_lease(world, self.job(world)), sort_keys=False))
        if self.pause_weight:  # a world with a second host: which kind this history is
            world.log.append(f"0 leased: job.lease.url {root / 'leases'}" if self.leased else "0 locked: the work directory lock")
        rules = self.rules()
        weights = [w for w, _ in rules]
        step, name = 0, "produce"
        try:
            self.produce(world, 0)
            pause = self.pause_weight / (sum(weights) + self.pause_weight)
            for step in range(1, self.steps + 1):
                _, rule = self.rng.choices(rules, weights)[0]
                if step in self.include:
                    rule = getattr(self, self.include[step])
                name = rule.__name__
                rule(world, step)
                self.check(world, step, name, final=False)
                if self.pause_rng.random() < pause or step in self.pauses:  # after the step's rule, as if drawn next
                    name = "paused_past_lease"
                    self.paused_past_lease(world, step)
                    self.check(world, step, name, final=False)
            step, name = self.steps + 1, "finish"
            self.finish(world)
        except subprocess.TimeoutExpired as exc:  # a command that hangs is a finding, not the end of a soak
            raise Violation(self.seed, step, name, f"`{' '.join(map(str, exc.cmd))}` did not end in {exc.timeout:.0f} s",
                            world.log) from None
        except Violation as exc:
            exc.log = world.log
            raise
        return world

    def read(self, world: World, step: int, rule: str) -> Counter[int]:
        """`output_ids`, a reader that fails (a file the table lists is gone, two readers disagree) a violation."""
        try:
            return self.output_ids(world)
        except Exception as exc:  # what the independent reader raises is the finding, whatever its type
            raise Violation(self.seed, step, rule, f"the reader failed: {type(exc).__name__}: {exc}") from exc

    def check(self, world: World, step: int, rule: str, final: bool) -> None:
        """Every id at most as often as expected; at the end, at least as often as the world leaves it owed."""
        ids = self.read(world, step, rule)
        unknown = sorted(set(ids) - set(world.expected))
        if unknown:
            raise Violation(self.seed, step, rule, f"ids never produced: {unknown[:5]}")
        extra = sorted(i for i, n in ids.items() if n > world.expected[i])
        if extra:
            raise Violation(self.seed, step, rule, f"{len(extra)} id(s) published more often than expected, e.g. "
                                                   + ", ".join(f"{i} ×{ids[i]} (≤ {world.expected[i]})" for i in extra[:5]))
        if final:
            owed = sorted(i for i, n in world.expected.items() if ids[i] < world.lowest.get(i, n))
            if owed:
                raise Violation(self.seed, step, rule, f"{len(owed)} id(s) published too few times, e.g. "
                                + ", ".join(f"{i} ×{ids[i]} (≥ {world.lowest.get(i, world.expected[i])})" for i in owed[:5]))

    def finish(self, world: World) -> None:
        """Repair the world, recover, run until nothing is new: then every id is there as often as owed."""
        for repair in world.broken.values():
            repair()
        world.broken.clear()
        self.cli(world, ["recover", "job.yaml", "--all"], self.steps + 1, "recover", ok=(0, 1))
        for _ in range(3):
            done = self.cli(world, RUN, self.steps + 1, "final run", ok=(0,))
            if "no new data" in done.stdout:
                break
        self.check(world, self.steps + 1, "final", final=True)

    def cli(self, world: World, args: list[str], step: int, rule: str, ok: tuple[int, ...], crash_at: str | None = None,
            preexec: Callable[[], None] | None = None) -> subprocess.CompletedProcess[str]:
        """`gobblin-py ARGS` to its end; a violation unless it exits as `ok` allows, saying why when it fails, and
        without a traceback."""
        proc = start(world, args, {ENV: crash_at} if crash_at else None, stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, preexec_fn=preexec)
        try:
            stdout, stderr = proc.communicate(timeout=300)
        finally:
            rc = reap(proc, kill=True)
        done = subprocess.CompletedProcess(args, rc, stdout, stderr)
        world.log.append(f"{step} {rule}: {' '.join(args)} {crash_at or ''} -> {rc}")
        return self.judge(done, step, rule, ok)

    def judge(self, done: subprocess.CompletedProcess[str], step: int, rule: str,
              ok: tuple[int, ...]) -> subprocess.CompletedProcess[str]:
        """`done`, a violation unless it exited as `ok` allows, saying why when it failed, and without a traceback."""
        args, rc, stdout, stderr = done.args, done.returncode, done.stdout, done.stderr
        if rc not in ok:
            raise Violation(self.seed, step, rule, f"`{' '.join(args)}` exited {rc}: {stdout.strip()[-1200:]}\n"
                                                   f"{stderr.strip()[-1200:]}")
        if rc in (1, 2) and not (stderr or stdout).strip():
            raise Violation(self.seed, step, rule, f"`{' '.join(args)}` failed without saying why")
        if "Traceback" in stdout + stderr:
            raise Violation(self.seed, step, rule, f"a traceback without --verbose: {stderr[-800:]}")
        return done

    def failed_naming_the_break(self, world: World, step: int, rule: str, done: subprocess.CompletedProcess[str]) -> None:
        """A run that failed while the world is broken must name what broke."""
        said = done.stdout + done.stderr
        if done.returncode == 1 and not any(name in said for name in world.broken):
            raise Violation(self.seed, step, rule, f"failed without naming any of {sorted(world.broken)}: "
                                                   f"{said.strip()[-800:]}")

    # --- rules every world has ------------------------------------------------------------------------------

    def run_job(self, world: World, step: int) -> None:
        done = self.cli(world, RUN, step, "run", ok=(0, 1) if world.broken else (0,))
        self.failed_naming_the_break(world, step, "run", done)

    def run_on_spark(self, world: World, step: int) -> None:
        """A run on real local Spark (the job sets spark.in_driver_below: 0), half the time killed at a commit point."""
        point = self.rng.choice(self.crash_points) if self.rng.random() < 0.5 else None
        ok = (0, 1) if world.broken else (0,)
        done = self.cli(world, ["run", "job.yaml"], step, "run on Spark", ok=(*ok, SIGKILLED) if point else ok,
                        crash_at=point)
        self.failed_naming_the_break(world, step, "run on Spark", done)

    def run_killed_at_point(self, world: World, step: int) -> None:
        point = self.rng.choice(self.crash_points)
        done = self.cli(world, RUN, step, "run killed", ok=(0, 1, SIGKILLED) if world.broken else (0, SIGKILLED),
                        crash_at=point)
        self.failed_naming_the_break(world, step, "run killed", done)

    def run_killed_at_random(self, world: World, step: int) -> None:
        proc = start(world, RUN)
        time.sleep(self.rng.uniform(0.2, 2.0))
        world.log.append(f"{step} run killed at random -> {reap(proc, kill=True)}")

    def recover(self, world: World, step: int) -> None:
        self.cli(world, ["recover", "job.yaml", "--all"], step, "recover", ok=(0, 1))

    def abandon(self, world: World, step: int) -> None:
        """`recover --abandon`: it withdraws what a pending commit published before its watermarks were committed (as
        it prints); of an id the world took back at its source since (`withdraw`), that copy is gone for good. (The
        model held it owed until the soak found it: files seed 2609358620, a file deleted after a commit killed
        between its steps, then abandoned.)"""
        before = self.output_ids(world) if world.withdrawn else None
        self.cli(world, ["recover", "job.yaml", "--all", "--abandon", "--yes"], step, "abandon", ok=(0, 1))
        if before is not None:
            after = self.output_ids(world)
            for i in world.withdrawn:
                if after[i] < before[i]:
                    world.lowest[i] = min(world.lowest.get(i, after[i]), after[i])

    def compact(self, world: World, step: int) -> None:
        args = ["compact", "job.yaml", "--in-process", "--min-files", "2"]
        dedup = self.rng.random() < 0.5
        if dedup:
            args += ["--dedup-key", "id"]
        if self.cli(world, args, step, "compact", ok=(0, 1)).returncode == 0 and dedup:
            world.merged()

    @property
    def refusal(self) -> str:
        """What a run turned away by another live driver of the job says: the lease's refusal in a leased history,
        the lock's otherwise."""
        return HELD_ELSEWHERE if self.leased else LOCKED

    def concurrent_runs(self, world: World, step: int) -> None:
        """Two runs at once: the job lock (in a leased history, the lease) lets one through; the other exits 0 (it
        started after the first ended) or 1 saying the job is running (`refusal`). Never both refused; a run that
        fails otherwise names what broke."""
        procs = [start_warm(world, RUN, say_warm=True) for _ in range(2)]
        for p in procs:  # both loaded, then let go at one instant: the runs overlap whatever the machine's load
            wait_warm(p)
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("\n")
            p.stdin.flush()
        outs = [p.communicate(timeout=300) for p in procs]
        codes = [reap(p) for p in procs]
        refused = [code == 1 and self.refusal in stderr for code, (_, stderr) in zip(codes, outs)]
        world.log.append(f"{step} concurrent runs -> {codes}" + (f", one refused: {self.refusal}" if any(refused) else ""))
        if all(refused):
            raise Violation(self.seed, step, "concurrent runs", f"both runs refused: {outs[0][1][-600:]}\n{outs[1][1][-600:]}")
        for code, (stdout, stderr), turned_away in zip(codes, outs, refused):
            done = self.judge(subprocess.CompletedProcess(RUN, code, stdout, stderr), step, "concurrent runs",
                              ok=(0, 1) if world.broken or turned_away else (0,))
            if not turned_away:
                self.failed_naming_the_break(world, step, "concurrent runs", done)

    # --- a second host ------------------------------------------------------------------------------------------

    def paused_past_lease(self, world: World, step: int) -> None:
        """A run frozen (SIGSTOP, `GOBBLIN_PY_PAUSE_AT`) at the N-th hit of a commit point, and a second driver of the
        same work directory beside it.

        Leased: while the frozen driver's lease is live, a second driver started at once (half the time) is refused
        naming its pid (or, only if the lease had expired by the time it looked, takes it over, saying so). Once the
        lease has expired a second driver takes it over, recovers every commit record the frozen one left pending (one
        waiting on no backoff) and exits 0 (or 1 naming what broke). Woken (SIGCONT), the first driver commits nothing
        more: it exits 1 naming the lost lease. Locked: the work directory's lock turns the second driver away (past the
        lease's TTL, which is the default 60 s here, nothing expires), and the woken driver ends as any run (0, or 1
        naming what broke). A run that ends before it reaches the point (nothing to commit there) ends as any run."""
        self.settle(world, step)
        rng = self.pause_rng
        name, _, nth = rng.choice(self.crash_points).partition(":")
        point = f"{name}:{nth or rng.choice((1, 1, 2))}"
        at_once = not self.leased or rng.random() < 0.5
        rule = "paused past its lease" if self.leased else "paused holding the lock"
        out, err = world.root / f"paused-{step}.out", world.root / f"paused-{step}.err"  # never a full pipe
        with out.open("w") as stdout, err.open("w") as stderr:
            frozen = start(world, RUN, {PAUSE_ENV: point}, stdout=stdout, stderr=stderr)
        warm = start_warm(world, RUN) if at_once else None
        try:
            try:
                reached = wait_stopped(frozen)
            except TimeoutError as exc:
                raise Violation(self.seed, step, rule, f"the run to be paused at {point}: {exc}") from None
            if not reached:
                if warm is not None:
                    reap(warm, kill=True)
                rc = reap(frozen)
                done = self.judge(subprocess.CompletedProcess(RUN, rc, out.read_text(), err.read_text()), step, rule,
                                  ok=(0, 1) if world.broken else (0,))
                self.failed_naming_the_break(world, step, rule, done)
                world.log.append(f"{step} {rule}: the run ended before {point} -> {rc}")
                return
            pending = self.fresh_records(world)
            second = self.beside(world, step, frozen.pid, warm, pending) if warm is not None else "no driver at once"
            if self.leased and not second.startswith("taken over"):
                self.past_expiry(world)
                self.took_over(world, step, self.cli(world, RUN, step, "run past a paused driver's lease",
                                                     ok=(0, 1) if world.broken else (0,)), pending, expired_first=False)
                second += ", then taken over after its expiry"
            if self.leased:  # what the second driver published, before the first wakes
                self.check(world, step, rule, final=False)
            os.kill(frozen.pid, signal.SIGCONT)
            rc = reap(frozen)
            if not self.leased:  # the lock turned the second driver away; read once the first is done: a driver frozen
                # inside the embedded SQLite catalog's commit holds its write lock, and a reader waits on it (seed
                # 120624646 of the CDC world)
                self.check(world, step, rule, final=False)
            done = subprocess.CompletedProcess(RUN, rc, out.read_text(), err.read_text())
        finally:
            for proc in (frozen, warm):
                if proc is not None and proc.poll() is None:
                    reap(proc, kill=True)
        said = done.stdout + done.stderr
        if self.leased:  # it may fail earlier naming what broke (a pause before planning: recovery.before_commit)
            self.judge(done, step, rule, ok=(1,))
            if "lost the lease" not in said and not any(name in said for name in world.broken):
                raise Violation(self.seed, step, rule, f"woken past its lease, the run exited 1 without naming the lost "
                                                       f"lease: {said.strip()[-800:]}")
        else:
            self.failed_naming_the_break(world, step, rule, self.judge(done, step, rule, ok=(0, 1) if world.broken else (0,)))
        world.log.append(f"{step} {rule} at {point} with {len(pending)} record(s) pending: {second}; woken -> {rc}"
                         + (", the lease lost" if "lost the lease" in said else ""))

    def settle(self, world: World, step: int) -> None:
        """Before a pause: bring the world to where a run takes no remedy of the world's own (a world whose refusals
        it remedies itself overrides this; here nothing)."""

    def fresh_records(self, world: World) -> list[str]:
        """The datasets whose commit record is pending and may be attempted at once (no failed attempt, so no backoff):
        a driver taking the job over must recover each (a maintenance record blocks nothing and waits for `maintain`)."""
        from gobblin_py import checked_json
        from gobblin_py.commit.recovery import is_maintenance
        from gobblin_py.commit.store import CommitStepStore
        from gobblin_py.errors import CorruptCommitRecordError

        store = CommitStepStore(world.root / "work")
        fresh = []
        for dataset in store.datasets(JOB):
            try:
                body = checked_json.read(store.path(JOB, dataset), CorruptCommitRecordError, "commit record")
            except CorruptCommitRecordError:
                continue  # torn by an earlier kill: no run recovers it by itself
            if not is_maintenance(dataset) and body["attempts"] == 0:
                fresh.append(body["dataset"])
        return fresh

    def beside(self, world: World, step: int, pid: int, warm: subprocess.Popen[str], pending: list[str]) -> str:
        """A second driver (`warm`, its job loaded) let go the moment the frozen `pid` stopped: refused by the lease
        (naming the pid) or the lock; in a leased history it may find the lease already expired (a slow start): then
        it takes the job over, saying the lease it took had expired. What it did."""
        try:
            stdout, stderr = warm.communicate("\n", timeout=300)
        finally:
            rc = reap(warm, kill=True)
        done = subprocess.CompletedProcess(RUN, rc, stdout, stderr)
        world.log.append(f"{step} run beside a paused driver: {' '.join(RUN)} -> {rc}")
        self.judge(done, step, "run beside a paused driver", ok=(0, 1))
        said = done.stdout + done.stderr
        if self.leased and "took over the lease" in said:
            self.took_over(world, step, done, pending, expired_first=True)
            return "taken over at once, its lease expired"
        if done.returncode != 1 or self.refusal not in done.stderr or (self.leased and f"pid {pid}" not in done.stderr):
            raise Violation(self.seed, step, "run beside a paused driver", f"a second driver beside the frozen pid {pid} "
                            f"exited {done.returncode} without the refusal ({self.refusal!r}, naming pid {pid}): "
                            f"{said.strip()[-800:]}")
        return f"a second driver refused: {self.refusal}"

    def past_expiry(self, world: World) -> None:
        """Sleep until the frozen driver's lease has expired (its file, read as any reader would), at most its TTL."""
        from gobblin_py.fs.conditional import open_blobs
        from gobblin_py.state.lease import read_lease

        held = read_lease(open_blobs(world.root / "leases"), JOB)
        expires = held.expires_at if held is not None else time.time() + LEASE_TTL
        time.sleep(min(max(expires - time.time(), 0.0), LEASE_TTL) + 0.2)

    def took_over(self, world: World, step: int, done: subprocess.CompletedProcess[str], pending: list[str],
                  expired_first: bool) -> None:
        """A driver that took over a frozen one's lease: it says so (the lease had expired), fails only naming what
        broke, and, when it exits 0, recovered every record the frozen one left pending."""
        rule = "run past a paused driver's lease"
        said = done.stdout + done.stderr
        taken = [line for line in said.splitlines() if "took over the lease" in line]
        if not taken or "expired" not in taken[0]:
            raise Violation(self.seed, step, rule, "the second driver did not say it took over an expired lease"
                                                   + (" (started at once)" if expired_first else "") + f": {said.strip()[-800:]}")
        self.failed_naming_the_break(world, step, rule, done)
        missed = [d for d in pending if f"recovered the pending commit of dataset {d} " not in said  # the log line (-v)
                  and f"{d}: recovered the pending commit of run" not in said]  # the summary's, quiet by default
        if done.returncode == 0 and missed:
            raise Violation(self.seed, step, rule, f"the driver that took the job over exited 0 without recovering the "
                                                   f"pending commit of {missed}: {said.strip()[-800:]}")

    def maintain_with(self, world: World, step: int, args: list[str], rule: str = "maintain",
                      may_lose: Callable[[int], bool] = lambda i: False) -> subprocess.CompletedProcess[str]:
        """`maintain job.yaml --yes ARGS`, half the time killed at a commit point: it exits 0, or 1 saying why, and no id
        a reader saw loses a copy (upkeep never removes a live file; its recovery of pending commits only adds), but
        those `may_lose` allows (a retention the user asked for)."""
        point = self.rng.choice(CRASH_POINTS) if self.rng.random() < 0.5 else None
        before = self.read(world, step, rule)
        done = self.cli(world, ["maintain", "job.yaml", "--yes", *args], step, rule,
                        ok=(0, 1, SIGKILLED) if point else (0, 1), crash_at=point)
        after = self.read(world, step, rule)
        lost = sorted(i for i, n in before.items() if after[i] < n and not may_lose(i))
        if lost:
            raise Violation(self.seed, step, rule, f"{len(lost)} id(s) lost a copy, e.g. "
                                                   + ", ".join(f"{i} ×{before[i]} → ×{after[i]}" for i in lost[:5]))
        return done

    def state_reset(self, world: World, step: int) -> None:
        """`state reset` to a position: what lies after it is read again, a re-ingest the user asked for."""
        args, ids = self.reset_to(world)
        now = self.read(world, step, "state reset")
        if self.cli(world, ["state", "reset", "job.yaml", "--yes", *args], step, "state reset", ok=(0, 1, 2)).returncode == 0:
            world.reread(ids(), now)

    def reset_to(self, world: World) -> tuple[list[str], Callable[[], set[int]]]:
        """A `state reset`'s arguments, and the ids it makes the next run read again (asked once it succeeded)."""
        raise NotImplementedError


WARM = """import os, sys, runpy
try:
    from gobblin_py.config.job_files import load_job
    load_job("job.yaml")  # what the job's plugins import, and its checks: the run, let go, starts at once
except Exception:
    pass  # the run itself says what is wrong
if os.environ.get("GOBBLIN_WORLD_SAY_WARM"):
    print("warm", flush=True)  # loaded: the harness may now let several go at one instant
sys.stdin.readline()
sys.argv = ["gobblin-py", *sys.argv[1:]]
runpy.run_module("gobblin_py.cli.main", run_name="__main__", alter_sys=True)
"""


def start_warm(world: World, args: list[str], say_warm: bool = False) -> subprocess.Popen[str]:
    """`gobblin-py ARGS` with its job loaded, waiting for a line on its stdin before it runs: a driver whose start takes
    no time (a cold one spends longer than a short lease's TTL importing the job's plugins). `say_warm`: it prints
    `warm` on stdout once loaded (`wait_warm`)."""
    env = child_env({"GOBBLIN_WORLD_SAY_WARM": "1"} if say_warm else None)
    return subprocess.Popen([sys.executable, "-c", WARM, *args], cwd=world.root, env=env, text=True,
                            start_new_session=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_warm(proc: subprocess.Popen[str]) -> None:
    """Wait until a driver started with `start_warm(…, say_warm=True)` has loaded its job."""
    line = proc.stdout.readline() if proc.stdout else ""
    if line.strip() != "warm":
        raise RuntimeError(f"a warm driver did not say it was loaded: {line!r}")


def wait_stopped(proc: subprocess.Popen[str], timeout: float = 300) -> bool:
    """Wait until the child is stopped (True) or has exited (False)."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        try:
            with open(f"/proc/{proc.pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "T":
                    return True
        except FileNotFoundError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"pid {proc.pid} neither stopped nor exited in {timeout:.0f} s")
        time.sleep(0.05)
    return False


def load_events(world: World, job: str) -> list[dict[str, Any]]:
    """The job's event log; a last line torn by a kill is left out."""
    path = world.root / "work" / "events" / f"{job}.jsonl"
    out = []
    for line in path.read_bytes().splitlines() if path.exists() else []:
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out
