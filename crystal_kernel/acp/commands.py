"""Slash commands at the ACP boundary: which prompts are commands, and their answers as
Markdown (docs/acp.md, "Slash commands").

Clients wrap what the person typed. Jupyter AI's ACP client puts a "System note: …"
paragraph before the first message of a session, puts its conversation history before
the message after a restart (``<conversation_history>…</conversation_history>`` then
``Current user message:``), and keeps a chat mention (``@Crystal /help``). None of that
is part of the command: :func:`command_line` looks past it, so the command runs and the
model receives nothing. Anything else is a prompt, passed on unchanged.

ACP clients render the agent's text as Markdown, where the plain-text columns of a
command's answer collapse into one paragraph: :func:`command_markdown` lays the help
out as a list and keeps other multi-line answers verbatim in a fenced block.
"""

from __future__ import annotations

import re

from typing_extensions import assert_never

from crystal_kernel.host import command_results as answers

SYSTEM_NOTE = "System note:"
HISTORY_END = "</conversation_history>"
CURRENT_MESSAGE = "Current user message:"
# One or more leading chat mentions (``@Crystal``), each followed by white space.
MENTIONS = re.compile(r"(?:@[^\s/@]+\s+)+")
# Wrappers looked past, at most (a client adds one or two).
MAX_WRAPPERS = 8


def command_line(text: str) -> str | None:
    """The slash command line ``text`` carries, or None when it is a prompt."""
    rest = text.strip()
    for _ in range(MAX_WRAPPERS):
        if rest.startswith(SYSTEM_NOTE):
            _, blank, rest = rest.partition("\n\n")
            if not blank:
                return None
        elif rest.startswith("<conversation_history>"):
            # The last end marker is the client's: earlier chat messages may contain it.
            _, end, rest = rest.rpartition(HISTORY_END)
            if not end:
                return None
            rest = rest.lstrip()
            if rest.startswith(CURRENT_MESSAGE):
                rest = rest[len(CURRENT_MESSAGE):]
        else:
            break
        rest = rest.strip()
    mentions = MENTIONS.match(rest)
    if mentions is not None:
        rest = rest[mentions.end():]
    return rest if rest.startswith("/") else None


def command_markdown(result: answers.CommandResult) -> str:
    """A command's answer for a client that renders Markdown: the help as a list, every
    other answer as its text (ACP clients have no job table or live log; /resume and
    /fork are the client's own, so their answers do not come here but are shown if so)."""
    match result:
        case answers.HelpResult(rows=rows) if rows:
            return help_markdown(rows)
        case (answers.HelpResult() | answers.TextResult() | answers.JobsResult() | answers.LogsResult()
              | answers.SessionsResult() | answers.UsageResult() | answers.Resumed() | answers.Forked()):
            return verbatim(result.text)
        case _:
            assert_never(result)


def help_markdown(rows: tuple[tuple[tuple[str, ...], str], ...]) -> str:
    """The help's rows as a Markdown list: usages in code, an alias in parentheses."""
    lines = ["**Commands**", ""]
    for usages, what in rows:
        shown = ""
        for usage in usages:
            if usage.startswith("(") and usage.endswith(")"):  # an alias: (`/prompts`)
                shown += f" (`{usage[1:-1]}`)"
            else:
                shown += (", " if shown else "") + f"`{usage}`"
        lines.append(f"- {shown}: {what}")
    return "\n".join(lines)


def verbatim(text: str) -> str:
    """``text`` as Markdown that shows it as written: one line as it is (a sentence),
    several lines in a fenced block (columns, indentation and line breaks kept)."""
    if "\n" not in text.strip():
        return text
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text.strip(chr(10))}\n{fence}"
