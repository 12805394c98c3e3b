"""``crystal run``'s one ``render``: a turn's events on the terminal or as JSON lines.

Text mode puts the answer on stdout and tool activity, reasoning and notes on stderr,
everything not written by Crystal through ``terminal_safe`` (TRUST-6). ``--format
jsonl`` prints one event per line in its exact §11 shape (``to_json``), with the events
beyond §11 documented in docs/commands.md. Both dispatches match every member of
:data:`~crystal_kernel.core.events.Event`; a new event fails type checking at
``assert_never`` until it has its case.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable

from typing_extensions import assert_never

from crystal_kernel.cli.terminal import say
from crystal_kernel.core.events import (
    ApprovalEvent,
    Compacted,
    ErrorEvent,
    Event,
    Note,
    ReasoningDelta,
    TextDelta,
    TodosUpdated,
    ToolCallStarted,
    ToolProgress,
    ToolResultEvent,
    TurnEnd,
    TurnStarted,
    UsageEvent,
)
from crystal_kernel.core.textsafe import terminal_json, terminal_safe

# The text printer shows this much of a tool result: a test run's failure (name,
# assertion, summary) fits, a long file read is cut with a count of what was left out.
PREVIEW_LINES = 16
PREVIEW_HEAD = 12
PREVIEW_WIDTH = 200
# The line that says a tool call started shows this much of its arguments.
CALL_LINE = 200
# A tool's progress notifications: the first is shown, then at most one a second per call
# (a server may send hundreds).
PROGRESS_INTERVAL = 1.0


def result_preview(text: str) -> str:
    """A tool result for the terminal: the first line, then up to ``PREVIEW_LINES`` lines
    indented under it; a longer result keeps its first ``PREVIEW_HEAD`` lines and says
    how many more there are (the model gets all of it)."""
    lines = [line[:PREVIEW_WIDTH].rstrip() for line in text.strip("\n").splitlines()]
    if len(lines) > PREVIEW_LINES:
        lines = lines[:PREVIEW_HEAD] + [f"… {len(lines) - PREVIEW_HEAD} more lines"]
    return "\n".join([lines[0]] + [f"  {line}" if line else "" for line in lines[1:]]) if lines else ""



def call_line(name: str, arguments: dict[str, object]) -> str:
    """``→ name {arguments}``: the call as it starts, its JSON cut past ``CALL_LINE``
    characters, visibly. A question call reads as its questions' headers instead (its
    form, printed next, shows each question whole; its JSON, cut, would not read)."""
    questions = arguments.get("questions") if name == "question" else None
    if isinstance(questions, list) and questions:
        headers = [str(q.get("header") or q.get("question") or "?").strip() if isinstance(q, dict) else "?"
                   for q in questions]
        count = "1 question" if len(headers) == 1 else f"{len(headers)} questions"
        return f"→ question ({count}): {' · '.join(headers)}"
    shown = json.dumps(arguments, ensure_ascii=False)
    if len(shown) > CALL_LINE:
        shown = shown[:CALL_LINE] + f"… ({len(shown) - CALL_LINE:,} characters more)"
    return f"→ {name} {shown}"


def image_size(data: str) -> str:
    """The size of a base64 image, for a person: ``24 bytes``, ``3.1 KiB``, ``1.2 MiB``."""
    size = len(data) * 3 // 4 - data[-2:].count("=")
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KiB"
    return f"{size / (1024 * 1024):.1f} MiB"


class TurnPrinter:
    """text: the answer on stdout, tool activity on stderr; jsonl: one event per line."""

    def __init__(self, fmt: str, clock: Callable[[], float] = time.monotonic,
                 preview: Callable[[str, str], str] | None = None) -> None:
        self.fmt = fmt
        # How a tool result shows in text mode, from (tool name, text): result_preview
        # unless the front folds long output (the interactive terminal, cli/folds.py).
        self.preview = preview or (lambda name, text: result_preview(text))
        self.at_line_start = True
        # Reasoning streams to stderr in text mode (never into the answer on stdout).
        self.thinking = False
        self.clock = clock
        self._progress_shown: dict[str, float] = {}  # call id -> when its last progress line was printed

    def command(self, text: str) -> None:
        """A slash command's output (the CLI runs one instead of a turn)."""
        if self.fmt == "jsonl":
            self._write(terminal_json({"type": "note", "text": text}) + "\n")
        else:
            self._write(terminal_safe(text) + "\n")

    def render(self, event: Event) -> None:
        """Print one event of the turn."""
        if self.fmt == "jsonl":
            self._jsonl(event)
        else:
            self._text(event)

    def _jsonl(self, event: Event) -> None:
        match event:
            case (TurnStarted() | TextDelta() | ReasoningDelta() | ToolCallStarted() | ToolResultEvent()
                  | ApprovalEvent() | TodosUpdated() | Compacted() | Note() | UsageEvent() | ErrorEvent()
                  | TurnEnd()):
                self._write(terminal_json(event.to_json()) + "\n")
            case ToolProgress():
                pass  # shown on cards in the notebook and ACP; not a jsonl event
            case _:
                assert_never(event)

    def _text(self, event: Event) -> None:
        if self.thinking and not isinstance(event, ReasoningDelta):
            sys.stderr.write("\n")
            self.thinking = False
        match event:
            case ReasoningDelta():
                if not self.thinking:
                    self._eol()
                    sys.stderr.write("thinking: ")
                    self.thinking = True
                sys.stderr.write(terminal_safe(event.text))
                sys.stderr.flush()
            case TextDelta():
                self._write(terminal_safe(event.text))
            case ToolCallStarted():
                self._eol()
                # The call as it runs: its invisible characters shown too (exact). A long
                # one is cut here, visibly: an approval shows it whole (GUARD-4).
                say(terminal_safe(call_line(event.name, event.arguments), exact=True), err=True)
            case ToolResultEvent():
                self._progress_shown.pop(event.id, None)
                say(f"{'✓' if event.ok else '✗'} {event.name} {self.preview(event.name, event.text)}", err=True)
                for image in event.images:  # the terminal cannot show it: say it is there
                    say(f"  [image: {image.mime_type}, {image_size(image.data)}]", err=True)
            case ToolProgress():
                self._progress(event)
            case ApprovalEvent():
                if event.outcome == "deny":
                    say(f"denied ({event.by}): {event.name} {event.reason or ''}", err=True)
            case Compacted():
                self._eol()
                say(f"note: {event.line()}", err=True)
            case Note():
                self._eol()
                say(f"note: {event.text}", err=True)
            case ErrorEvent() | TurnEnd():
                self._eol()  # the error itself is printed once, as the command's last line
            case TurnStarted() | UsageEvent():
                pass  # nothing a person reading the answer needs
            case TodosUpdated():
                pass  # the todowrite result line above shows the new list
            case _:
                assert_never(event)

    def _progress(self, event: ToolProgress) -> None:
        """``… name 3/10: copying files`` on stderr: the first report of a call, then at
        most one each PROGRESS_INTERVAL."""
        now = self.clock()
        last = self._progress_shown.get(event.id)
        if last is not None and now - last < PROGRESS_INTERVAL:
            return
        self._progress_shown[event.id] = now
        self._eol()
        say(f"… {event.name} {event.line()[:PREVIEW_WIDTH]}", err=True)

    def _write(self, text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()
        if text:
            self.at_line_start = text.endswith("\n")

    def end_line(self) -> None:
        """End the answer's last line (the interactive prompt starts on a fresh one)."""
        self._eol()

    def _eol(self) -> None:
        if not self.at_line_start:
            self._write("\n")
