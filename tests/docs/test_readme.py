"""README and docs/ tell the truth: every command and option they name exists, every complete job they show and every
job file shipped validates, every relative link leads to a file and heading that exist, and the generated reference
pages are what the code gives now."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import typer.main
import yaml
from support.jobs import REPO

from gobblin_py.cli.main import app
from gobblin_py.config import load_job
from gobblin_py.config.loader import load_document

DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
"""Every page a reader is sent to: the front door and docs/, generated pages included."""


def _name(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


@cache
def _commands() -> dict[str, set[str]]:
    """`state show` → its option names (`--json`, `-d` …), for every command that runs something."""
    out: dict[str, set[str]] = {}

    def walk(group: Any, prefix: str) -> None:
        for name, command in group.commands.items():
            if hasattr(command, "commands"):
                walk(command, f"{prefix}{name} ")
            else:
                out[prefix + name] = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}

    walk(typer.main.get_command(app), "")
    return out


def _words(line: str) -> list[str]:
    cleaned = line.replace("\\|", " ").replace("[", " ").replace("]", " ")
    try:
        return shlex.split(cleaned, posix=False)
    except ValueError:  # an apostrophe in prose
        return cleaned.split()


def _mentions(text: str) -> list[tuple[str, list[str]]]:
    """Each `gobblin-py ...` a page shows (in code spans, code blocks and prose): the command and the options it uses."""
    commands = sorted(_commands(), key=len, reverse=True)
    found = []
    for line in re.findall(r"gobblin-py ((?:[a-z-]+ ?)+[^`\n]*)", text):
        line = re.split(r"(?<!\\)\|", line)[0]  # a table cell ends at an unescaped |
        words = _words(line)
        name = next((c for c in commands if words[:len(c.split())] == c.split()), None)
        if name is not None:
            found.append((name, [w.split("=")[0].rstrip(",.;:)") for w in words if w.startswith("-")]))
    return found


@pytest.mark.parametrize("page", [_name(p) for p in DOCS])
def test_every_command_and_option_a_page_names_exists(page: str) -> None:
    commands = _commands()
    for name, options in _mentions((REPO / page).read_text()):
        unknown = [o for o in options if o not in commands[name] and o not in ("--help", "-h", "-") and not o.startswith("--no-")]
        assert not unknown, f"{page} shows `gobblin-py {name}` with {unknown}, which it does not take"


def test_the_docs_name_every_command() -> None:
    named = {name for page in DOCS if page.parent.name != "reference" for name, _ in _mentions(page.read_text())}
    missing = sorted(set(_commands()) - named)
    assert not missing, f"no page but the generated reference names `gobblin-py {missing[0]}`: say in docs/cli.md what it is for"


def test_the_readme_is_a_front_door() -> None:
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 150, "README.md is the front door: at most 150 lines; move the rest to docs/"
    assert (REPO / "jobs" / "example.yaml").read_text().strip() in text, "README shows jobs/example.yaml whole"
    for page in ("docs/sources/kafka.md", "docs/sources/jdbc.md", "docs/publishers/iceberg.md"):
        assert f"]({page})" in text, f"README links {page} (one click from the front door)"


def test_the_readme_gives_the_command_ci_runs() -> None:
    """.ci/run runs exactly README's second command."""
    ci = (REPO / ".ci" / "run").read_text()
    command = ".venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest -q -n 2"
    assert command in ci and command in (REPO / "README.md").read_text()


@pytest.mark.parametrize("job_file", sorted(p.name for p in (REPO / "jobs").glob("*.yaml")))
def test_every_shipped_job_file_validates(job_file: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # job files name paths relative to the repository root, as README runs them
    monkeypatch.delenv("GOBBLIN_PY_DEFAULTS", raising=False)
    load_job(REPO / "jobs" / job_file)


def _job_blocks() -> list[tuple[str, str]]:
    """(`page:line`, YAML) of every ```yaml block that is a whole job: it has job:, source: and writer: sections."""
    out = []
    for page in DOCS:
        text = page.read_text()
        for match in re.finditer(r"^```yaml\n(.*?)^```", text, re.DOTALL | re.MULTILINE):
            try:
                doc = yaml.safe_load(match.group(1))
            except yaml.YAMLError:
                continue
            if isinstance(doc, dict) and {"job", "source", "writer"} <= set(doc):
                out.append((f"{_name(page)}:{text[:match.start()].count(chr(10)) + 1}", match.group(1)))
    return out


@pytest.mark.parametrize(("where", "block"), _job_blocks(), ids=[w for w, _ in _job_blocks()])
def test_every_complete_job_a_page_shows_validates(where: str, block: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from the checkout, as the pages say; a database job needs its driver and its password variable set."""
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("GOBBLIN_PY_DEFAULTS", raising=False)
    document = yaml.safe_load(block)
    source = document.get("source") or {}
    if source.get("class") in ("jdbc", "postgres_cdc", "mysql_cdc"):
        pytest.importorskip("psycopg", reason="the database sources need the jdbc extra")
        if source["class"] == "mysql_cdc":
            pytest.importorskip("pymysqlreplication", reason="mysql_cdc needs the jdbc extra")
        monkeypatch.setenv(source["password_env"], "not-a-real-password")
    load_document(REPO / "docs" / "block.yaml", document)


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


@cache
def _anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    anchors = set()
    fence = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fence = not fence
        if fence or not line.startswith("#"):
            continue
        slug = _slug(line.lstrip("#"))
        anchors.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


@pytest.mark.parametrize("page", [_name(p) for p in DOCS])
def test_every_relative_link_leads_to_a_file_and_heading_that_exist(page: str) -> None:
    path = REPO / page
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.DOTALL | re.MULTILINE)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        if not linked.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{target} (no such heading in {linked.relative_to(REPO)})")
    assert not broken, f"{page}: broken links: {broken}"


def _gen_docs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_docs", REPO / "scripts" / "gen_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_reference_pages_are_what_the_code_gives_now() -> None:
    gen = _gen_docs()
    stale = gen.stale()
    assert not stale, f"{', '.join(stale)} out of date with the code: regenerate with `python scripts/gen_docs.py`"


def test_every_setting_and_job_key_has_a_description() -> None:
    missing = _gen_docs().undocumented()
    assert not missing, f"settings without Field(description=...): {missing}"


def test_the_gobblin_page_points_at_the_mapping_the_translation_applies() -> None:
    from gobblin_py.config.gobblin.mapping import markdown_tables

    assert markdown_tables().strip() in (REPO / "docs" / "reference" / "gobblin-mapping.md").read_text()
    assert "](reference/gobblin-mapping.md)" in (REPO / "docs" / "from-gobblin.md").read_text()


def _gobblin(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "GOBBLIN_PY_DEFAULTS"}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run([sys.executable, "-m", "gobblin_py.cli.main", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


def test_the_readme_start_over_commands_rerun_the_example_onto_the_same_files(tmp_path: Path) -> None:
    """"Watch it run on Spark": after `state reset` of both datasets the next run ingests everything again, onto the
    same file names, doubling nothing (run here in the driver; the commands are the same)."""
    shutil.copytree(REPO / "jobs", tmp_path / "jobs")
    assert _gobblin(["run", "jobs/example.yaml", "--in-process"], tmp_path).returncode == 0
    files = sorted(p.relative_to(tmp_path) for p in (tmp_path / "output").rglob("*") if p.is_file())
    readme = (REPO / "README.md").read_text()
    for dataset in ("clicks", "orders"):
        command = f"gobblin-py state reset jobs/example.yaml --dataset {dataset} --yes"
        assert command in readme
        assert _gobblin(command.split()[1:], tmp_path).returncode == 0
    again = _gobblin(["run", "jobs/example.yaml", "--in-process"], tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert [line.split()[:4] for line in again.stdout.splitlines() if line.split()[:1] in (["clicks"], ["orders"])] == [
        ["clicks", "committed", "2001", "2000"], ["orders", "committed", "999", "998"]]
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "output").rglob("*") if p.is_file()) == files


def test_the_iceberg_query_snippet_runs_after_the_iceberg_example(tmp_path: Path) -> None:
    pytest.importorskip("pyiceberg", reason="needs the tables extra")
    pytest.importorskip("duckdb", reason="needs the tables extra")
    shutil.copytree(REPO / "jobs", tmp_path / "jobs")
    done = _gobblin(["run", "jobs/example-iceberg.yaml", "--in-process"], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    page = (REPO / "docs" / "publishers" / "iceberg.md").read_text()
    snippet = re.search(r"^## Querying a table\n.*?^```python\n(.*?)^```", page, re.DOTALL | re.MULTILINE)
    assert snippet is not None
    query = subprocess.run([sys.executable, "-c", snippet.group(1)], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                           check=False)
    assert query.returncode == 0, query.stderr
    assert "2026-01-05" in query.stdout and "400" in query.stdout and "gobblin-py" not in query.stderr
    assert {line.split()[1] for line in query.stdout.splitlines() if line[:1].isdigit()} >= {done.stdout.split()[3]}
