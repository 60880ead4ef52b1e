"""What the benchmarks share: a command's wall time, CPU and peak memory per part of its process tree and how busy
the rest of the machine was meanwhile; each contender's output read back by an independent reader; and rounds that
alternate the contenders, with medians and ratios to gobblin-py from the same invocation.

A contender whose output misses or repeats a row is WRONG, one that exits non-zero FAILED: either is reported with
its time, but never counts as the fastest, and its ratio is marked so.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REFERENCE = "gobblin-py"


# --- one command, measured ------------------------------------------------------------------------------------------

class TreeSampler:
    """Peak RSS and CPU seconds of a process tree, split into the driver (the root), the JVM and the Python workers.
    CPU is each process's user + system time as last sampled (every 0.1 s), so a process loses at most its last
    0.1 s: the CPU per record it gives does not depend on how busy the machine is, where the wall time does."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = {"driver": 0, "jvm": 0, "executors": 0}
        self._cpu: dict[int, tuple[str, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def cpu(self) -> dict[str, float]:
        """CPU seconds per part of the tree (driver, jvm, executors)."""
        out = {"driver": 0.0, "jvm": 0.0, "executors": 0.0}
        for kind, seconds in self._cpu.values():
            out[kind] += seconds
        return out

    def _run(self) -> None:
        while True:
            tree = process_tree(self.pid)
            sums = {"driver": 0, "jvm": 0, "executors": 0}
            for pid, cmd in tree:
                kind = "driver" if pid == self.pid else "jvm" if "java" in cmd else "executors" if "python" in cmd else None
                if kind is None:
                    continue
                sums[kind] += rss(pid)
                seconds = _cpu_seconds(pid)
                if seconds is not None:
                    self._cpu[pid] = (kind, seconds)
            for k, v in sums.items():
                self.peak[k] = max(self.peak[k], v)
            if self._stop.wait(0.1):
                return


def scratch_dir(prefix: str) -> Path:
    """A new directory under the system's temporary one, removed when the script exits (on an error too), so a
    benchmark leaves nothing behind."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, True)
    return path


def cpu_pressure_us() -> int | None:
    """Microseconds some runnable task of the machine waited for a CPU (Linux PSI), or None where not reported."""
    try:
        for line in open("/proc/pressure/cpu"):
            if line.startswith("some"):
                return int(line.rsplit("total=", 1)[1])
    except (OSError, IndexError, ValueError):
        pass
    return None


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                ppid = int(open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            out.setdefault(ppid, []).append(int(d))
    return out


def process_tree(root: int) -> list[tuple[int, str]]:
    """(pid, command line) of `root` and every live descendant."""
    kids = _children()
    todo, out = [root], []
    while todo:
        pid = todo.pop()
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        out.append((pid, cmd))
        todo.extend(kids.get(pid, []))
    return out


def rss(pid: int) -> int:
    """Resident bytes of a process, 0 once it is gone."""
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used (to show what the broker costs)."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float | None:
    try:
        return cpu_seconds(pid)
    except (OSError, IndexError, ValueError):
        return None


def server_cpu_seconds(root: int) -> float:
    """CPU seconds of a server and all its processes, the exited ones included (a database's per-connection backends):
    each live process's own time and that of its children it has reaped."""
    total = 0.0
    for pid, _ in process_tree(root):
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    return total


@dataclass
class Measured:
    """One command's run: wall time, peak RSS and CPU seconds per part of its process tree, the share of the
    wall time in which some task of the machine waited for a CPU (ours included; None where Linux has no PSI), and
    the CPU the whole machine used meanwhile (what other work took of it is that less this tree's and the broker's)."""

    wall_s: float
    peak_rss: dict[str, int]
    cpu_s: dict[str, float]
    cpu_pressure: float | None
    machine_busy_s: float  # CPU seconds every process of the machine used meanwhile, this tree's and the broker's included
    done: subprocess.CompletedProcess[str]


def machine_busy_s() -> float:
    """CPU seconds all cores of the machine have been busy since boot (/proc/stat: all but idle and iowait)."""
    ticks = [int(x) for x in open("/proc/stat").readline().split()[1:9]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def measure(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, check: bool = True) -> Measured:
    """Run `cmd` to its end, sampling its process tree; a non-zero exit stops the benchmark unless `check` is False."""
    pressure, busy = cpu_pressure_us(), machine_busy_s()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with TreeSampler(proc.pid) as sampler:
        out, err = proc.communicate()
    took = time.perf_counter() - t0
    waited, busy = cpu_pressure_us(), machine_busy_s() - busy
    done = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    if proc.returncode != 0 and check:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{out}\n{err}")
    share = (waited - pressure) / (took * 1e6) if pressure is not None and waited is not None else None
    return Measured(took, sampler.peak, sampler.cpu, share, busy, done)


def run_measured(cmd: list[str], cwd: Path) -> tuple[float, dict[str, int], subprocess.CompletedProcess[str]]:
    """Wall time, peak RSS per part of the tree, and the finished process (see `measure` for CPU as well)."""
    m = measure(cmd, cwd)
    return m.wall_s, m.peak_rss, m.done


def pressure_text(share: float | None) -> str:
    return "" if share is None else f"cpu pressure {share:.0%}"


def other_cores(m: Measured, server_cpu_s: float = 0.0) -> float:
    """Cores' worth of CPU the rest of the machine (other work, not this command or the server it reads) used during `m`."""
    return max(0.0, m.machine_busy_s - sum(m.cpu_s.values()) - server_cpu_s) / m.wall_s


# --- outputs, read back ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ReadBack:
    """What an independent reader finds in a contender's output: its rows and how many distinct ids they hold."""

    rows: int
    distinct_ids: int

    def verdict(self, expected: int) -> str:
        """ok when every one of the `expected` rows is there exactly once, else WRONG."""
        return "ok" if self.rows == self.distinct_ids == expected else "WRONG"


def parquet_read_back(files: Iterable[Path], id_column: str = "id") -> ReadBack:
    """Rows and distinct ids of Parquet files, read with pyarrow."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    tables = [pq.read_table(f, columns=[id_column]) for f in sorted(files)]
    if not tables:
        return ReadBack(0, 0)
    ids = pa.concat_tables(tables).column(id_column)
    return ReadBack(len(ids), pc.count_distinct(ids).as_py())


def avro_read_back(files: Iterable[Path], id_column: str = "id") -> ReadBack:
    """Rows and distinct ids of Avro files, read with fastavro."""
    import fastavro

    rows, ids = 0, set()
    for f in sorted(files):
        with open(f, "rb") as fh:
            for record in fastavro.reader(fh):
                rows += 1
                ids.add(record[id_column])
    return ReadBack(rows, len(ids))


def data_files(root: Path, suffix: str) -> list[Path]:
    """Every `*<suffix>` file under `root` but error files and hidden or underscore directories (`_errors`, `_dlt_*`)."""
    return [p for p in root.rglob(f"*{suffix}")
            if not any(part.startswith(("_", ".")) for part in p.relative_to(root).parts)]


# --- contenders in alternating rounds -------------------------------------------------------------------------------

@dataclass
class Tool:
    """One contender: the command and environment for a fresh round directory (the command may write files there
    first, a job file), how to read back what it wrote, and any figures of its own (gobblin-py's phases)."""

    name: str
    writes: str  # the format of its output, as the summary shows it
    command: Callable[[Path], list[str]]
    read_back: Callable[[Path], ReadBack]
    env: Callable[[Path], dict[str, str]] | None = None
    details: Callable[[Path, Measured], dict[str, Any]] | None = None
    keep_last: bool = False  # keep the last round's directory (to run again on it)


def round_dir(scratch: Path, r: int, tool: Tool) -> Path:
    return scratch / f"round{r}-{tool.name}"


def run_rounds(tools: list[Tool], rounds: int, expected: int, scratch: Path,
               server_cpu: Callable[[], float] | None = None) -> dict[str, list[dict[str, Any]]]:
    """Each tool once per round, cold in a child process, the order rotated every round so none always goes first;
    each output read back and judged, then removed. `server_cpu` gives the CPU seconds of a server the tools read
    (a database, a broker), which is not counted as other work."""
    figures: dict[str, list[dict[str, Any]]] = {t.name: [] for t in tools}
    for r in range(rounds):
        for tool in tools[r % len(tools):] + tools[:r % len(tools)]:
            d = round_dir(scratch, r, tool)
            d.mkdir(parents=True)
            server0 = server_cpu() if server_cpu else 0.0
            m = measure(tool.command(d), d, env=tool.env(d) if tool.env else None, check=False)
            server = server_cpu() - server0 if server_cpu else 0.0
            entry: dict[str, Any] = {"round": r + 1, "wall_s": m.wall_s, "rows_per_s": expected / m.wall_s,
                                     "cpu_s": m.cpu_s, "peak_rss": m.peak_rss, "cpu_pressure": m.cpu_pressure,
                                     "server_cpu_s": server, "other_work_cores": other_cores(m, server)}
            if m.done.returncode != 0:
                entry.update(verdict="FAILED", error=(m.done.stderr or m.done.stdout).strip()[-2000:])
            else:
                found = tool.read_back(d)
                entry.update(rows=found.rows, distinct_ids=found.distinct_ids, verdict=found.verdict(expected))
                if tool.details is not None:
                    entry.update(tool.details(d, m))
            figures[tool.name].append(entry)
            seen = "" if entry["verdict"] == "FAILED" else f"  read back {entry['rows']} rows, {entry['distinct_ids']} ids"
            print(f"round {r + 1}: {tool.name:<22} {m.wall_s:7.2f}s  {expected / m.wall_s:9.0f} rows/s  "
                  f"cpu {sum(m.cpu_s.values()):6.1f}s  rss {sum(m.peak_rss.values()) / 2**20:5.0f} MiB  "
                  f"{entry['verdict']}{seen}  {pressure_text(m.cpu_pressure)}, other work {entry['other_work_cores']:.2f} cores",
                  flush=True)
            if entry["verdict"] == "FAILED":
                print(entry["error"], flush=True)
            if not (tool.keep_last and r == rounds - 1):
                shutil.rmtree(d, ignore_errors=True)
    return figures


def compare(figures: dict[str, list[dict[str, Any]]], expected: int, writes: dict[str, str]) -> dict[str, Any]:
    """Per tool: the median time of its rounds, rows/s, its verdict; per peer the ratio of its median to gobblin-py's
    (above 1: gobblin-py is faster) and each round's; the fastest among tools right in every round."""
    med = statistics.median
    out: dict[str, Any] = {"tools": {}, "fastest": None}
    for name, runs in figures.items():
        timed = [f["wall_s"] for f in runs if f["verdict"] != "FAILED"]
        verdicts = [f["verdict"] for f in runs]
        verdict = "FAILED" if "FAILED" in verdicts else "WRONG" if "WRONG" in verdicts else "ok"
        median_s = med(timed) if timed else None
        out["tools"][name] = {
            "writes": writes[name], "verdict": verdict, "verdicts": verdicts, "median_s": median_s,
            "rows_per_s": expected / median_s if median_s else None,
            "cpu_s": med(sum(f["cpu_s"].values()) for f in runs),
            "peak_rss_mib": max(sum(f["peak_rss"].values()) for f in runs) / 2**20,
            "cpu_pressure": [f["cpu_pressure"] for f in runs],
            "other_work_cores": [round(f["other_work_cores"], 3) for f in runs],
        }
    ref = out["tools"].get(REFERENCE)
    for name, tool in out["tools"].items():
        if name == REFERENCE or ref is None:
            continue
        tool["ratio_vs_gobblin_py"] = (tool["median_s"] / ref["median_s"]
                                       if tool["median_s"] and ref["median_s"] else None)
        tool["round_ratios"] = [p["wall_s"] / g["wall_s"] for p, g in zip(figures[name], figures[REFERENCE])
                                if p["verdict"] == g["verdict"] == "ok"]
    right = {n: t["median_s"] for n, t in out["tools"].items() if t["verdict"] == "ok"}
    out["fastest"] = min(right, key=right.get) if right else None
    return out


def print_comparison(summary: dict[str, Any]) -> None:
    """The comparison as a table: median time, rows/s, ratio to gobblin-py, verdict."""
    print(f"\n{'tool':<24}{'writes':<10}{'median s':>10}{'rows/s':>12}{'peer/gobblin-py':>17}  verdict")
    for name, t in summary["tools"].items():
        ratio = t.get("ratio_vs_gobblin_py")
        ratio_text = "—" if name == REFERENCE else "n/a" if ratio is None else f"{ratio:.2f}×"
        if name != REFERENCE and t["verdict"] != "ok" and ratio is not None:
            ratio_text += f" ({t['verdict']})"
        median = "—" if t["median_s"] is None else f"{t['median_s']:.2f}"
        rate = "—" if t["rows_per_s"] is None else f"{t['rows_per_s']:.0f}"
        print(f"{name:<24}{t['writes']:<10}{median:>10}{rate:>12}{ratio_text:>17}  {t['verdict']}")
    print(f"fastest of the tools right in every round: {summary['fastest']}  (above 1×: gobblin-py is faster)\n")


def last_run(tmp: Path, job: str = "bench") -> dict[str, Any]:
    """The state record of job `job`'s newest run under `tmp`/work."""
    runs = sorted((tmp / "work" / "state" / job / "runs").glob("*.json"), key=lambda p: p.stat().st_mtime_ns)
    return json.loads(runs[-1].read_text())["body"]


def gobblin_details(tmp: Path, m: Measured) -> dict[str, Any]:
    """gobblin-py's own account of its run (a `Tool.details`): phases, tasks, records written and how many of them
    took the columnar path."""
    state = last_run(tmp)
    return {"phases": state["phases"], "tasks": len(state["tasks"]),
            "records_written": sum(t["records_written"] for t in state["tasks"]),
            "records_columnar": sum(t.get("records_columnar", 0) for t in state["tasks"])}
