"""Every requirement ID and SPEC section cited in the repository resolves in
docs/requirements.md, and code refers to rules by what they mean, not by issue numbers."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "requirements.md"
GROUPS = "EX|MODE|Q|BG|REV|PH|PS|PA|FL|TRUST|GUARD|ROBUST|FORM|VIEW|SANDBOX|NB"
ID = re.compile(rf"\b(?:{GROUPS})-\d+\b")
SECTION = re.compile(r"(?:SPEC|requirements)\s+§\s?(\d+)")
ISSUE = re.compile(r"\bissues? \d+\b", re.IGNORECASE)
SUFFIXES = {".py", ".md", ".ts", ".ipynb", ".json", ".txt", ".toml"}
SKIP_PARTS = {"node_modules", "lib", "static", ".venv", "build", "snapshots"}


def _files(*folders: str) -> list[Path]:
    found = []
    for folder in folders:
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in SUFFIXES and not SKIP_PARTS & set(path.relative_to(ROOT).parts):
                found.append(path)
    return found


def _defined() -> tuple[set[str], set[str]]:
    text = PAGE.read_text(encoding="utf-8")
    ids = set(re.findall(rf"\*\*((?:{GROUPS})-\d+)\*\*", text))
    sections = set(re.findall(r"^## §(\d+) ", text, flags=re.MULTILINE))
    return ids, sections


def test_the_page_defines_each_id_once() -> None:
    text = PAGE.read_text(encoding="utf-8")
    listed = re.findall(rf"\*\*((?:{GROUPS})-\d+)\*\*", text)
    assert len(listed) == len(set(listed)), "an ID is defined twice"
    # The counts of the specification's groups: a dropped rule is caught here.
    groups = {"EX": 16, "MODE": 8, "Q": 5, "BG": 5, "REV": 3, "PH": 12, "PS": 9, "PA": 9, "FL": 6, "TRUST": 7,
              "GUARD": 4, "ROBUST": 4, "FORM": 3, "VIEW": 2, "SANDBOX": 2, "NB": 3}
    for prefix, count in groups.items():
        assert {f"{prefix}-{n}" for n in range(1, count + 1)} <= set(listed), prefix


def test_every_cited_id_and_section_resolves() -> None:
    ids, sections = _defined()
    missing: list[str] = []
    for path in _files("crystal_kernel", "tests", "docs", "bench", "notebooks", "examples", "labextension/src"):
        text = path.read_text(encoding="utf-8", errors="replace")
        rel = path.relative_to(ROOT)
        missing += [f"{rel}: {found}" for found in sorted(set(ID.findall(text)) - ids)]
        missing += [f"{rel}: §{n}" for n in sorted(set(SECTION.findall(text)) - sections)]
    assert not missing, "cited but not in docs/requirements.md:\n" + "\n".join(missing)


def test_code_names_rules_not_issue_numbers() -> None:
    """An issue number means nothing to a reader of the repository alone."""
    found = []
    for path in _files("crystal_kernel", "tests", "bench"):
        if path.suffix != ".py":
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if ISSUE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)
