"""Docs that cannot drift: every file a command in README or docs/ names ships with the checkout, every `scripts/…` and
`docs/…` path a page names exists, `docs/architecture.md`'s package tree names every subpackage, and the install hint
has one form, the same in the CLI's errors and in the docs."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from support.jobs import REPO

PAGES = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").rglob("*.md"))]
OUTPUT_FLAGS = {"-o", "--out", "--output", "--jobs-dir", "--dir", "--data-dir", "--metrics-json", "--metrics-prom"}
"""Options whose value is a file or directory the command makes: a path there need not exist before."""
SHIPPED = re.compile(r"^(?:\./)?((?:jobs|scripts|docs)/[^\s`'\"),;:]+)")
PLACEHOLDER = re.compile(r"<|…|\.\.\.|\bNAME\b|\{")


def _name(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


def _code(text: str) -> list[str]:
    """Every line of every fenced block, and every inline code span outside them."""
    out: list[str] = []
    for block in re.findall(r"^```[^\n]*\n(.*?)^```", text, re.DOTALL | re.MULTILINE):
        out += block.splitlines()
    prose = re.sub(r"^```.*?^```", "", text, flags=re.DOTALL | re.MULTILINE)
    out += re.findall(r"`([^`\n]+)`", prose)
    return out


def _commands(text: str) -> list[str]:
    """What the page tells a person to run: `gobblin-py …` and `python … scripts/…`, a line or span each."""
    found = []
    for line in _code(text):
        line = line.split("#", 1)[0] if not line.lstrip().startswith("#") else ""
        match = re.search(r"(?:^|\s|/)(gobblin-py\s.*|python3?\s.*)", line)
        if match:
            found.append(match.group(1))
    return found


def _exists(path: str) -> bool:
    return bool(list(REPO.glob(path))) if "*" in path else (REPO / path).exists()


def _named_by(command: str) -> list[str]:
    """The repository paths a command reads (a path after an output flag, or a placeholder, is not one)."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        words = command.split()
    paths, after = [], ""
    for word in words:
        match = SHIPPED.match(word)
        if match and after not in OUTPUT_FLAGS and not PLACEHOLDER.search(word):
            paths.append(match.group(1).rstrip("."))
        after = word
    return paths


@pytest.mark.parametrize("page", [_name(p) for p in PAGES])
def test_every_file_a_command_names_ships(page: str) -> None:
    missing = sorted({f"{p} (in `{c.strip()}`)" for c in _commands((REPO / page).read_text()) for p in _named_by(c)
                      if not _exists(p)})
    assert not missing, f"{page} runs commands on files that do not ship: {missing}"


@pytest.mark.parametrize("page", [_name(p) for p in PAGES])
def test_every_scripts_and_docs_path_a_page_names_exists(page: str) -> None:
    text = (REPO / page).read_text()
    named = {m.rstrip(".") for m in re.findall(r"(?<![\w/.-])((?:scripts|docs)/[\w./*<>-]+)", text)}
    missing = sorted(p for p in named if not PLACEHOLDER.search(p) and not _exists(p))
    assert not missing, f"{page} names paths that do not exist: {missing}"


def _tree() -> str:
    text = (REPO / "docs" / "architecture.md").read_text()
    match = re.search(r"^## Architecture\n.*?^```\n(.*?)^```", text, re.DOTALL | re.MULTILINE)
    assert match is not None, "docs/architecture.md has no package tree under ## Architecture"
    return match.group(1)


def test_the_architecture_tree_names_every_subpackage() -> None:
    tree = _tree()
    components = set(re.findall(r"([A-Za-z_]\w*)(?=/|[,}]\S*/)", tree))  # `state/`, `{files,kafka}/`, `fs.py` not
    packages = sorted(p.parent.relative_to(REPO / "gobblin_py").as_posix() for p in (REPO / "gobblin_py").rglob("__init__.py")
                      if p.parent != REPO / "gobblin_py")
    unnamed = [p for p in packages if p.rsplit("/", 1)[-1] not in components]
    assert not unnamed, f"docs/architecture.md's package tree does not name {unnamed}: add each with what it holds"


def test_the_architecture_tree_names_only_what_exists() -> None:
    named = re.findall(r"^gobblin_py/([\w/]+?)/?\s", _tree(), re.MULTILINE)
    missing = [n for n in named if not (REPO / "gobblin_py" / n).exists() and not (REPO / "gobblin_py" / f"{n}.py").exists()]
    assert not missing, f"docs/architecture.md's package tree names {missing}, which the package does not have"


INSTALL = re.compile(r"pip install (?:-e )?'(?:gobblin-py|\.)\[([\w,]+)\]'")


def _hints(text: str) -> list[str]:
    return [m.group(0) for m in INSTALL.finditer(text)]


def test_one_install_hint_form_in_the_code_and_the_docs() -> None:
    """A user of the wheel is told `pip install 'gobblin-py[X]'`; README says once that a checkout uses `-e '.[X]'`."""
    code = {str(p.relative_to(REPO)): _hints(p.read_text()) for p in (REPO / "gobblin_py").rglob("*.py")}
    wrong = {f: [h for h in hs if not h.startswith("pip install 'gobblin-py[")] for f, hs in code.items()}
    assert not {f: hs for f, hs in wrong.items() if hs}, wrong
    pages = {_name(p): _hints(p.read_text()) for p in PAGES if p.name != "CONTRIBUTING.md" and "reference" not in p.parts}
    checkout = {page: [h for h in hints if "-e" in h] for page, hints in pages.items()}
    checkout = {page: hints for page, hints in checkout.items() if hints}
    readme = (REPO / "README.md").read_text()
    assert set(checkout) <= {"README.md"}, f"pages telling a user `pip install -e '.[X]'` instead of 'gobblin-py[X]': {checkout}"
    assert "pip install 'gobblin-py[" in readme and "from a checkout" in readme
