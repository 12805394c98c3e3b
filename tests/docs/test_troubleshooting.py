"""docs/troubleshooting.md lists every message a newcomer meets while connecting a model
or writing config.json, each with what to do (SPEC §11: one English line that says
what to change).

The messages are read from the code itself: every string given to ``ProviderError`` or
``UserError`` (and every note about config.json) in the modules below. A message is
listed when one line of the page holds all of its fixed text (the pieces between its
``{placeholders}``), so a new message, or a reworded one, fails here until the page says
what to do about it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "troubleshooting.md"
# module -> the functions whose messages a newcomer meets (None: all of them).
SOURCES: dict[str, tuple[str, ...] | None] = {
    "crystal_kernel/providers/errors.py": None,
    "crystal_kernel/providers/common.py": None,
    "crystal_kernel/providers/sdk.py": None,
    "crystal_kernel/providers/registry.py": None,
    "crystal_kernel/providers/replay.py": ("load_cassette",),
    "crystal_kernel/core/config.py": None,
}
MESSAGE_CALLS = {"ProviderError", "UserError"}


def _pieces(node: ast.expr) -> list[str]:
    """The fixed text of a string or f-string, piece by piece (placeholders dropped)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        texts = [node.value]
    elif isinstance(node, ast.JoinedStr):
        texts = [v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    else:
        return []
    return [t.strip() for t in texts if len(t.strip()) >= 3]


def messages() -> list[tuple[str, list[str]]]:
    found = []
    for source, functions in SOURCES.items():
        tree = ast.parse((ROOT / source).read_text(encoding="utf-8"))
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if functions is not None and function.name not in functions:
                continue
            for node in ast.walk(function):
                if not isinstance(node, ast.Call) or not node.args:
                    continue
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                is_note = name == "append" and function.name.endswith("notes")
                if name in MESSAGE_CALLS or is_note:
                    pieces = _pieces(node.args[0])
                    if pieces:
                        found.append((f"{source}:{node.lineno} ({function.name})", pieces))
    return found


MESSAGES = messages()


def test_the_messages_are_found_in_the_code() -> None:
    """The reader works: the messages a newcomer meets first are among those it finds."""
    flat = [" ".join(pieces) for _, pieces in MESSAGES]
    for expected in ("No model is connected: the provider is replay", "Cannot reach the model server at",
                     "failed (HTTP", "refused the API key (401)", "is not a valid URL",
                     "did you mean '", "model server: POST"):
        assert any(expected in text for text in flat), expected
    assert len(MESSAGES) >= 30


@pytest.mark.parametrize("where, pieces", MESSAGES, ids=[where for where, _ in MESSAGES])
def test_every_message_is_listed_with_what_to_do(where: str, pieces: list[str]) -> None:
    rows = [line for line in PAGE.read_text(encoding="utf-8").splitlines() if line.startswith("| `")]
    listed = [row for row in rows if all(piece in row for piece in pieces)]
    assert listed, f"{where}: no row of docs/troubleshooting.md holds {pieces}"
    # A row is "| `message` | what to do |": the advice is there, not an empty cell.
    assert all(row.rstrip(" |").split("` |")[-1].strip() for row in listed), listed
