"""README tells the truth: every command and option it names exists, and every job file it ships validates."""

from __future__ import annotations

import re
import shlex

import pytest
import typer.main

from gobblin_py.cli.main import app
from gobblin_py.config import load_job

from support.jobs import REPO

README = (REPO / "README.md").read_text()


def _commands() -> dict[str, set[str]]:
    """`state show` → its option names (`--json`, `-d` …)."""
    out: dict[str, set[str]] = {}

    def walk(group, prefix: str) -> None:
        for name, command in group.commands.items():
            if hasattr(command, "commands"):
                walk(command, f"{prefix}{name} ")
            else:
                out[prefix + name] = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}

    walk(typer.main.get_command(app), "")
    return out


def _mentions() -> list[tuple[str, list[str]]]:
    """Each `gobblin-py ...` README shows (in code spans and code blocks): the command and the options it uses."""
    commands = _commands()
    found = []
    for line in re.findall(r"gobblin-py ((?:[a-z-]+ ?)+[^`\n]*)", README):
        line = re.split(r"(?<!\\)\|", line)[0]  # a table cell ends at an unescaped |
        words = shlex.split(line.replace("\\|", " ").replace("[", " ").replace("]", " "), posix=False)
        name = next((c for c in sorted(commands, key=len, reverse=True) if " ".join(words).startswith(c)), None)
        if name is None:
            continue
        found.append((name, [w.split("=")[0] for w in words if w.startswith("-")]))
    return found


def test_every_command_and_option_readme_names_exists() -> None:
    commands = _commands()
    mentions = _mentions()
    assert {name for name, _ in mentions} >= {"run", "validate", "plan", "recover", "inspect-commits", "schedule",
                                               "state show", "state reset", "history list", "history show"}
    for name, options in mentions:
        unknown = [o for o in options if o not in commands[name] and o not in ("--help", "-h")]
        assert not unknown, f"README shows `gobblin-py {name}` with {unknown}, which it does not take"


@pytest.mark.parametrize("job_file", sorted(p.name for p in (REPO / "jobs").glob("*.yaml")))
def test_every_shipped_job_file_validates(job_file: str, monkeypatch) -> None:
    monkeypatch.chdir(REPO)  # job files name paths relative to the repository root, as README runs them
    monkeypatch.delenv("GOBBLIN_PY_DEFAULTS", raising=False)
    load_job(REPO / "jobs" / job_file)


def test_the_docs_give_the_gobblin_mapping_tables_as_the_translation_applies_them() -> None:
    """The Gobblin class and key tables (README's "Coming from Apache Gobblin", or a docs/ page as they move there)
    are the mapping module's own, so the documentation cannot drift."""
    from gobblin_py.config.gobblin.mapping import markdown_tables

    tables = markdown_tables()
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("**/*.md"))]
    texts = [page.read_text() for page in pages if page.is_file()]
    for table in ([tables] if isinstance(tables, str) else tables):
        assert any(table.strip() in text for text in texts), "paste markdown_tables() into the page that shows them"
