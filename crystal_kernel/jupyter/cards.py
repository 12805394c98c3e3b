"""Mime bundles for what a turn shows: the status line, tool cards, notes and errors.

Every bundle is plain HTML with a ``text/plain`` fallback, so a saved notebook reads
well on any viewer (nbviewer, GitHub, a terminal) without a live kernel. Styles are
inline because a saved notebook carries no stylesheet; colours are JupyterLab's
``--jp-*`` theme variables with light fallbacks, so the cards follow the dark theme and
still read in a static export. Every HTML part is made by
:func:`crystal_kernel.jupyter.safe_html.html_bundle` (TRUST-1: cleaned by nh3) inside a
container that MathJax ignores (a ``$`` in a command is not math). Nothing here imports
Jupyter.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

# esc and markdown_bundle are re-exported: the views take every bundle maker from here.
from crystal_kernel.jupyter import palette
from crystal_kernel.jupyter.safe_html import NO_MATH, html_bundle, inline_markdown_html
from crystal_kernel.jupyter.safe_html import esc as esc
from crystal_kernel.jupyter.safe_html import markdown_bundle as markdown_bundle

Bundle = dict[str, Any]

# How much of a tool result a card shows (the model's copy is bounded separately).
CARD_TEXT_LIMIT = 20_000
# A plain-text result longer than this many lines (a file the read tool read) shows its
# first lines; the rest is one click away ("Show the other N lines"), never dumped.
PREVIEW_LINES = 12
ARGS_PREVIEW = 160
ARGS_LIMIT = 8_000

# Colours from the palette: per-theme values from the lab extension, light fallbacks for
# static exports (readable in JupyterLab Light and Dark at 4.5:1).
BORDER = palette.BORDER
TEXT = palette.TEXT
PRE_BG = palette.CODE_BG
_BOX = (f"border:1px solid {BORDER};border-left:4px solid {{accent}};border-radius:4px;"
        f"padding:4px 8px;margin:4px 0;font-size:90%;color:{TEXT}")
_PRE = (f"margin:4px 0 0 0;padding:4px 6px;background-color:{PRE_BG};color:{TEXT};max-height:24em;overflow:auto;"
        "white-space:pre-wrap;word-break:break-word;font-family:var(--jp-code-font-family,monospace);font-size:90%")
_MUTED = f"color:{palette.MUTED}"
_RED = palette.ERROR
_GREEN = palette.OK
_AMBER = palette.WARN
_BLUE = palette.ACCENT

# The one argument that best says what a call does, per built-in tool.
_KEY_ARGUMENT = {
    "bash": "command", "bash_start": "command", "read": "path", "write": "path", "edit": "path",
    "list": "path", "tree": "path", "glob": "pattern", "grep": "pattern", "search": "query",
    "python": "code", "bash_status": "job_id", "bash_logs": "job_id", "bash_stop": "job_id",
    "view_image": "path", "describe_image": "path", "cell_output": "n", "skill": "name",
}


def clip(text: str, limit: int) -> str:
    """Keep the end of long text (the newest output matters most) and say what was cut."""
    if len(text) <= limit:
        return text
    return f"[... {len(text) - limit} characters not shown ...]\n" + text[-limit:]


@dataclass(frozen=True)
class Status:
    """What the first line of a turn's output says (PA-8: only the set's folder name)."""

    mode: str
    approval: str
    provider: str
    model: str
    prompt_set: str
    tokens: int

    def text(self) -> str:
        return (f"Crystal · {self.mode} · approval {self.approval} · {self.provider}:{self.model}"
                f" · prompts {self.prompt_set} · {self.tokens:,} tokens")


def status_bundle(status: Status) -> Bundle:
    return html_bundle(status.text(), f'<div class="{NO_MATH}" style="{_MUTED};font-size:85%;font-family:monospace">'
                                      f"{esc(status.text())}</div>")


def note_bundle(text: str) -> Bundle:
    return html_bundle(f"Note: {text}",
                       f'<div class="{NO_MATH}" style="{_MUTED};font-size:90%"><i>Note:</i> {esc(text)}</div>')


def error_bundle(text: str) -> Bundle:
    return html_bundle(f"Error: {text}",
                       f'<div class="{NO_MATH}" style="color:{_RED};font-weight:600">Error: {esc(text)}</div>')


def thinking_bundle(text: str, done: bool = False) -> Bundle:
    """The collapsible "Thinking" card: the model's reasoning, apart from its answer.

    Open while the reasoning streams, closed once the answer (or a tool call) starts; the
    text is escaped and cleaned like every output (TRUST-1), never rendered as the answer.
    """
    label = "Thinking" if done else "Thinking…"
    fragment = (f'<details class="crystal-thinking {NO_MATH}" data-state="{"done" if done else "running"}"'
                f'{"" if done else " open"} style="{_MUTED};{palette.THINKING_BOX};font-size:90%;margin:4px 0">'
                f"<summary>{label}</summary>"
                f'<div style="white-space:pre-wrap;font-style:italic">{esc(clip(text, CARD_TEXT_LIMIT))}</div>'
                "</details>")
    return html_bundle(f"{label}: {text}", fragment)


def _first_line(value: str) -> str:
    stripped = value.strip()
    first = stripped.splitlines()[0] if stripped else value
    return first + (" …" if first != stripped else "")


def _short_value(value: Any) -> str:
    """One argument value as a person reads it: text as it is (first line), numbers
    plainly, a list by its items or its size, an object by its size; never JSON."""
    if isinstance(value, str):
        return _first_line(value)
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, (int, float)):
        return f"{value:g}" if isinstance(value, float) else str(value)
    if isinstance(value, list):
        if value and len(value) <= 6 and all(isinstance(v, (int, float, str)) and not isinstance(v, bool)
                                             for v in value):
            return ", ".join(_short_value(v) for v in value)
        return f"{len(value)} item{'s' if len(value) != 1 else ''}"
    if isinstance(value, dict):
        return f"{len(value)} field{'s' if len(value) != 1 else ''}"
    return str(value)


def _notebook_edit_summary(arguments: dict[str, Any]) -> str:
    action = str(arguments.get("action") or "edit")
    cell = arguments.get("cell_id")
    if cell is None and isinstance(arguments.get("index"), int):
        cell = f"#{arguments['index']}"  # the tool numbers cells from 1, as a person does
    kind = f"{arguments['cell_type']} " if action == "insert" and arguments.get("cell_type") else ""
    where = f" {cell}" if cell is not None else ""
    return f"{arguments.get('path', '')}: {action} {kind}cell{where}".strip()


def _notebook_run_summary(arguments: dict[str, Any]) -> str:
    cells = arguments.get("cell_ids")
    through = f" through cell {cells[-1]}" if isinstance(cells, list) and cells else " (all cells)"
    return f"{arguments.get('path', '')}{through}"


def _plot_summary(arguments: dict[str, Any]) -> str:
    values = arguments.get("values")
    count = f"{len(values)} values" if isinstance(values, list) else "values"
    title = str(arguments.get("title") or "").strip()
    chart = f"{arguments.get('kind') or 'bar'} chart of {count}"
    return f"{_first_line(title)} ({chart})" if title else chart


# Tools whose calls read best as a sentence of their own.
_SUMMARIES = {"notebook_edit": _notebook_edit_summary, "notebook_run": _notebook_run_summary, "plot": _plot_summary}
_EMPTY_PATH = {"tree", "list"}  # no path: the workspace itself


def summarize_arguments(name: str, arguments: dict[str, Any]) -> str:
    """One line saying what a call does, for a person: the key argument of a built-in
    tool, a sentence for a few others, else ``name: value`` pairs (never escaped JSON:
    a card header and an "Allowed once:" line read like the call, not its wire form)."""
    key = _KEY_ARGUMENT.get(name)
    summary = _SUMMARIES.get(name)
    if key and key in arguments and isinstance(arguments[key], (str, int, float)):
        text = _first_line(str(arguments[key]))
    elif summary is not None:
        text = summary(arguments)
    elif not arguments:
        text = "." if name in _EMPTY_PATH else ""
    else:
        text = " · ".join(f"{k}: {_short_value(v)}" for k, v in arguments.items())
    return text if len(text) <= ARGS_PREVIEW else text[: ARGS_PREVIEW - 1] + "…"


def _arguments_json(arguments: dict[str, Any]) -> str:
    return clip(json.dumps(arguments, ensure_ascii=False, indent=2), ARGS_LIMIT)


def diff_html(text: str) -> str:
    """Colour a unified diff line by line."""
    out = []
    for line in text.splitlines():
        style = ""
        if line.startswith("+") and not line.startswith("+++"):
            style = palette.ADDED
        elif line.startswith("-") and not line.startswith("---"):
            style = palette.REMOVED
        elif line.startswith("@@"):
            style = f"color:{_BLUE}"
        out.append(f'<span style="{style}">{esc(line)}</span>' if style else esc(line))
    return "\n".join(out)


@dataclass
class CardState:
    """Everything a tool card shows; :func:`card_bundle` renders it."""

    id: str
    name: str
    arguments: dict[str, Any]
    state: str = "running"  # running, waiting, denied, done, failed, cancelled
    approval: str | None = None  # who allowed or denied, shown under the title
    result: str | None = None
    display: str = "text"
    images: int = 0
    progress: str | None = None  # the latest progress line while it runs (MCP)


_STATE_LABEL = {
    "running": ("running…", _AMBER), "waiting": ("waiting for approval", _AMBER),
    "denied": ("denied", _RED), "done": ("done", _GREEN), "failed": ("failed", _RED),
    "cancelled": ("cancelled", _RED),
}


def _questions(arguments: dict[str, Any]) -> list[dict[str, Any]]:
    questions = arguments.get("questions")
    return [q for q in questions if isinstance(q, dict)] if isinstance(questions, list) else []


def _answers(result: str | None) -> list[list[str]] | None:
    """The question tool's answers (a JSON list of label lists), or None."""
    try:
        value = json.loads(result or "")
    except (ValueError, TypeError):
        return None
    if isinstance(value, list) and all(isinstance(a, list) for a in value):
        return [[str(x) for x in a] for a in value]
    return None


def _question_parts(card: CardState) -> tuple[list[str], list[str]]:
    """The question card's body as text lines and HTML: each question, then its answer."""
    questions = _questions(card.arguments)
    answers = _answers(card.result) if card.state == "done" else None
    plain: list[str] = []
    rows: list[str] = []
    for i, q in enumerate(questions):
        header, text = str(q.get("header", "")), str(q.get("question", ""))
        answer = None if answers is None else (", ".join(answers[i]) if i < len(answers) and answers[i]
                                               else "(no answer)")
        plain.append(f"{header}: {text}" + (f" → {answer}" if answer is not None else ""))
        # The model writes its question in Markdown (`names` in backticks): rendered, cleaned.
        cell = "padding:2px 8px;text-align:left;vertical-align:top"
        rows.append(f'<tr><td style="padding:2px 8px 2px 0;text-align:left;vertical-align:top;white-space:nowrap">'
                    f'<b>{esc(header)}</b></td>'
                    f'<td style="{cell}">{inline_markdown_html(text)}</td>'
                    + (f'<td style="{cell};white-space:nowrap">→ <b>{esc(answer)}</b></td>'
                       if answer is not None else "")
                    + "</tr>")
    html = [f"<table>{''.join(rows)}</table>"] if rows else []
    return plain, html


# bash_start's result is written for the model (which tool checks the job, JSON included);
# the card says it for the person, once: the command is already in the card's title.
_STARTED = re.compile(r"Started background job (\S+) \(pid (\d+)\)")


def _person_result(card: CardState) -> str | None:
    """The result a person reads, when the model's wording is not it; else None."""
    if card.name != "bash_start" or card.state != "done":
        return None
    found = _STARTED.match(card.result or "")
    if found is None:
        return None
    job, pid = found.groups()
    return (f"Started background job {job} (pid {pid}). It runs on after this turn: "
            f"its log is under Jobs in the Crystal sidebar, or run /logs {job} --follow.")


def card_bundle(card: CardState) -> Bundle:
    """A tool card. A decision is stated once: a denied card shows who denied it and why
    (or nothing when the person's form summary says so) and no repeat of the reason as a
    result; the question tool shows its questions and answers, not JSON."""
    label, colour = _STATE_LABEL.get(card.state, (card.state, _MUTED))
    is_question = card.name == "question" and bool(_questions(card.arguments))
    if is_question and card.state == "running":
        label = "waiting for your answer"  # the person's turn, not a tool at work
    if is_question:
        headers = [str(q.get("header", "")) for q in _questions(card.arguments)]
        summary = ", ".join(h for h in headers if h) or f"{len(headers)} questions"
    else:
        summary = summarize_arguments(card.name, card.arguments)
    plain = [f"[{card.name}] {summary} — {label}" if summary else f"[{card.name}] — {label}"]
    shown_summary = f" <code>{esc(summary)}</code>" if summary else ""
    parts = [
        f'<div class="{NO_MATH}"><div class="crystal-card" data-tool="{esc(card.name)}" data-state="{esc(card.state)}" '
        f'style="{_BOX.format(accent=colour)}">',
        f'<div><b>{esc(card.name)}</b>{shown_summary} '
        f'<span style="color:{colour}">{esc(label)}</span></div>',
    ]
    if card.progress and card.state in ("running", "waiting"):
        plain.append(f"progress {card.progress}")
        parts.append(f'<div style="{_MUTED}">progress {esc(card.progress)}</div>')
    if card.approval:
        plain.append(card.approval)
        parts.append(f'<div style="{_MUTED}">{esc(card.approval)}</div>')
    if is_question:
        lines, html = _question_parts(card)
        plain += lines
        parts += html
    elif card.arguments and (len(card.arguments) > 1 or summary.endswith("…")):
        parts.append(f'<details><summary style="{_MUTED}">arguments</summary>'
                     f'<pre style="{_PRE}">{esc(_arguments_json(card.arguments))}</pre></details>')
    shown = card.result is not None and card.state != "denied"
    if is_question and card.state == "done" and _answers(card.result) is not None:
        shown = False  # the answers are in the table above
    person = _person_result(card)
    if shown and person is not None:
        plain.append(person)
        parts.append(f'<div class="crystal-card-result">{esc(person)}</div>')
    elif shown:
        body = clip(card.result or "", CARD_TEXT_LIMIT)
        plain.append(body)
        if card.state in ("failed", "cancelled"):
            parts.append(f'<pre style="{_PRE};color:{_RED}">{esc(body)}</pre>')
        elif card.display == "diff":
            parts.append(f'<pre style="{_PRE}">{diff_html(body)}</pre>')
        elif card.display == "terminal":
            parts.append(f'<pre style="{_PRE};background-color:#1f2328;color:#e6edf3" class="crystal-terminal">'
                         f'{esc(body)}</pre>')
        elif body:
            # A file or a listing reads from its start: keep the head, not the end.
            head, rest = _preview(card.result or "")
            if rest:
                more = rest.count("\n") + 1
                if len(rest) > CARD_TEXT_LIMIT:
                    cut = rest[:CARD_TEXT_LIMIT].rsplit("\n", 1)[0]
                    rest = cut + f"\n[… {more - cut.count(chr(10)) - 1} more lines not shown here]"
                plain[-1] = head + f"\n[… {more} more lines]"
                parts.append(f'<pre style="{_PRE}">{esc(head)}</pre>'
                             f'<details class="crystal-more"><summary style="{_MUTED}">'
                             f"Show the other {more} lines</summary>"
                             f'<pre style="{_PRE};margin-top:0">{esc(rest)}</pre></details>')
            else:
                parts.append(f'<pre style="{_PRE}">{esc(body)}</pre>')
    if card.images:
        word = "image" if card.images == 1 else "images"
        plain.append(f"({card.images} {word} below)")
    parts.append("</div></div>")
    return html_bundle("\n".join(plain), "".join(parts))


def _preview(text: str) -> tuple[str, str]:
    """(the first ``PREVIEW_LINES`` lines, the rest) — the rest empty when the text is
    short enough to show whole (a couple of lines more is not worth a click)."""
    lines = text.rstrip("\n").split("\n")
    if len(lines) <= PREVIEW_LINES + 3:
        return text, ""
    return "\n".join(lines[:PREVIEW_LINES]), "\n".join(lines[PREVIEW_LINES:])


def image_bundle(mime_type: str, data_base64: str, caption: str = "") -> Bundle:
    """An image result as a real image output (it survives every viewer)."""
    return {mime_type: data_base64, "text/plain": caption or f"<{mime_type} image>"}


def table_bundle(columns: list[str], rows: list[list[Any]], title: str = "") -> Bundle:
    """A small HTML table with an aligned text fallback."""
    widths = [max([len(c)] + [len(str(r[i])) for r in rows]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths))]
    lines += ["  ".join(str(v).ljust(w) for v, w in zip(r, widths)) for r in rows]
    head = "".join(f'<th style="text-align:left;padding:2px 8px">{esc(c)}</th>' for c in columns)
    body = "".join(
        "<tr>" + "".join(f'<td style="text-align:left;padding:2px 8px"><code>{esc(v)}</code></td>'
                         for v in r) + "</tr>"
        for r in rows
    )
    caption = f"<caption style='text-align:left'><b>{esc(title)}</b></caption>" if title else ""
    return html_bundle(((title + "\n") if title else "") + "\n".join(lines),
                       f'<table class="{NO_MATH}">{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>')
