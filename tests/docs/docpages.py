"""Reading the documentation pages: fenced blocks, file labels, inline code spans, and the
command words that make a code span or block a command shown to a user.

Block languages (every fence must name one, so no command hides in an untagged block):

- ``sh``: commands, run in order by test_docs_commands.py;
- ``console``: a terminal transcript: ``$ `` lines are run and what follows them up to the
  next ``$ `` line must be their output (``…`` stands for the rest of a line, or, alone on
  a line, for any number of lines; the home folder prints as ``~``);
- ``text``: a synopsis (its first word is ``crystal``: checked against the argument
  parser) or output, never a command;
- ``json``, ``toml``, ``python``: data and code; ``ipython``: notebook cells.

A block whose preceding line is only a code span and a colon (`` `dir/file.py`: ``) is
that file: the run writes it there (``~`` is the home folder) before the next command.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LANGUAGES = {"sh", "console", "text", "json", "toml", "python", "ipython"}

# A fence of three or more backticks; it closes at a line of at least as many (CommonMark),
# so a ````text block can show a ``` fence inside it.
FENCE = re.compile(r"^(`{3,})(\S*)")
LABEL = re.compile(r"^`([^`\s]+)`:$")
SPAN = re.compile(r"`([^`\n]+(?:\n[^`\n]+)?)`")
# The first word of a shell command in the docs (after any VAR=value assignments).
COMMAND = re.compile(r"^(?:[A-Z_]+=\S+\s+)*((?:/\S+/)?crystal|make|jupyter(?:-\w+)?|pip|python3?|\.venv/bin/\S+|"
                     r"apt-get|sudo|jlpm|npm|cd|mkdir|cp|echo|export|\.)(?=\s|$)")


@dataclass
class Block:
    lang: str
    line: int  # the first line of the body, 1-based
    text: str
    label: str | None  # the file this block is, when labelled


def _closes(line: str, fence: str) -> bool:
    """Whether ``line`` closes a block opened by ``fence``."""
    stripped = line.rstrip()
    return stripped.startswith(fence) and set(stripped) == {"`"}


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a Markdown page, in order."""
    found: list[Block] = []
    lang: str | None = None
    start, body, previous, label, fence = 0, [], "", None, ""
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        m = FENCE.match(line)
        if m and lang is None:
            fence, lang, start, body = m.group(1), m.group(2), n + 1, []
            lm = LABEL.match(previous.strip())
            label = lm.group(1) if lm else None
        elif lang is not None and _closes(line, fence):
            found.append(Block(lang, start, "\n".join(body), label))
            lang = None
        elif lang is not None:
            body.append(line)
        if line.strip():
            previous = line
    return found


def prose(path: Path) -> str:
    """The page without its fenced blocks (their lines kept blank, so spans cannot join)."""
    out, fence = [], ""
    for line in path.read_text(encoding="utf-8").splitlines():
        m = FENCE.match(line)
        if not fence and m:
            fence = m.group(1)
            out.append("")
        elif fence and _closes(line, fence):
            fence = ""
            out.append("")
        else:
            out.append("" if fence else line)
    return "\n".join(out)


def inline_commands(path: Path) -> list[str]:
    """Code spans in the prose that are shell commands (one line, spaces collapsed)."""
    spans = (" ".join(m.group(1).split()) for m in SPAN.finditer(prose(path)))
    return [s for s in spans if COMMAND.match(s) and " " in s]


def logical_lines(text: str) -> list[str]:
    """Lines of a shell block with backslash continuations joined."""
    out: list[str] = []
    pending = ""
    for line in text.splitlines():
        if line.endswith("\\"):
            pending += line[:-1]
            continue
        out.append(pending + line)
        pending = ""
    if pending:
        out.append(pending)
    return out


def without_comment(line: str) -> str:
    """A command line without a trailing `` # comment`` (none of ours quote a #)."""
    return re.sub(r"\s+#.*$", "", line).strip() if not line.lstrip().startswith("#") else ""


def output_matches(expected: str, actual: str) -> bool:
    """Whether a transcript's shown output matches what the command printed."""
    want = [line.rstrip() for line in expected.splitlines()]
    got = [line.rstrip() for line in actual.splitlines()]

    def line_ok(pattern: str, line: str) -> bool:
        regex = ".*".join(re.escape(part) for part in pattern.split("…"))
        return re.fullmatch(regex, line) is not None

    def match(i: int, j: int) -> bool:
        if i == len(want):
            return j == len(got)
        if want[i] == "…":
            return any(match(i + 1, k) for k in range(j, len(got) + 1))
        return j < len(got) and line_ok(want[i], got[j]) and match(i + 1, j + 1)

    return match(0, 0)


def transcript(text: str) -> list[tuple[str, str]]:
    """(command, shown output) pairs of a console block."""
    pairs: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            pairs.append((line[2:], []))
        elif pairs:
            pairs[-1][1].append(line)
        elif line.strip():
            raise ValueError(f"console block text before the first '$ ' line: {line!r}")
    return [(cmd, "\n".join(out)) for cmd, out in pairs]
