"""Pending commit sequences of many datasets, built from real task-output files (tests and scripts/bench_commit.py)."""

from __future__ import annotations

from pathlib import Path

from gobblin_py.commit.sequence import CommitSequence
from gobblin_py.commit.steps import DatasetStateCommitStep, FsRenameCommitStep, HighWatermarkCommitStep
from gobblin_py.durable import file_checksum


def dataset_name(d: int) -> str:
    return f"ds{d:04d}"


def task_output(root: Path, datasets: int, files: int, size: int = 4096, run_id: str = "run", job: str | None = None) -> list[list[Path]]:
    """`files` task-output files for each of `datasets` datasets under `root/task-output/<run>`
    (`root/task-output/<job>/<run>` with `job`, where a job's runner puts them).

    Each file starts with its dataset and index (so a test can tell every published file apart) and is
    padded to `size` bytes.
    """
    out = []
    for d in range(datasets):
        ds = dataset_name(d)
        paths = []
        for f in range(files):
            p = root / "task-output" / (job or "") / run_id / f"wu{d}" / ds / "2026" / "01" / f"{f % 3 + 1:02d}" / f"f{f}.avro"
            p.parent.mkdir(parents=True, exist_ok=True)
            head = f"{ds}/{f}\n".encode()
            p.write_bytes(head + b"x" * max(0, size - len(head)))
            paths.append(p)
        out.append(paths)
    return out


def published_path(root: Path, src: Path) -> Path:
    """Where the sequences of `publish_sequences` move a task-output file: `root/output/<dataset>/…`."""
    return root / "output" / src.relative_to(src.parents[4])


def publish_sequences(root: Path, job: str, task_files: list[list[Path]], run_id: str = "run") -> list[CommitSequence]:
    """One sequence per dataset, as the committer builds it: fs_rename of each file, watermarks, state."""
    state_dir = str(root / "state" / job)
    seqs = []
    for d, files in enumerate(task_files):
        ds = dataset_name(d)
        steps = [FsRenameCommitStep(src=str(p), dst=str(published_path(root, p)), size=p.stat().st_size, checksum=file_checksum(p))
                 for p in files]
        steps.append(HighWatermarkCommitStep(state_dir=state_dir, dataset=ds, watermarks={p.name: 100 for p in files}))
        steps.append(DatasetStateCommitStep(state_dir=state_dir, dataset=ds, run_id=run_id, state={"files_published": len(files)}))
        seqs.append(CommitSequence(job=job, dataset=ds, run_id=run_id, steps=steps))
    return seqs
