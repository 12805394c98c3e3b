"""What an approval form shows: the WHOLE call a person is asked to approve (GUARD-4,
the person judges the call and its diff).

- Nothing is cut: every argument is shown in full, each in a box that scrolls when it is
  long (it never vanishes behind a fold or an ellipsis).
- Whitespace that could hide a second command is made visible: leading and trailing
  whitespace and runs of three or more spaces are drawn as ``·`` (tabs as ``→``), every
  line break ends in ``↵``, control and invisible characters (zero-width, bidi
  overrides) are shown as ``⟨U+202E⟩``; a warning line above the command says how many
  lines it has and how much padding it carries.
- A ``write`` or ``edit`` shows the diff against the file on disk (or a new file's
  contents), before the person decides. The diff is the host's (tools/_proposed.py, the
  request's ``preview``): real line numbers and context, the same text every front shows.
- The warnings about line count and padding are for commands (what they say is what runs);
  an ``edit``'s old_string and new_string are code fragments whose padding and newlines
  are ordinary, so only what hides text (invisible characters, carriage returns, long
  runs of blanks) is warned about there.

Nothing here imports Jupyter; the widgets put this HTML inside the form.
"""

from __future__ import annotations

import json
import re
from typing import Any

from crystal_kernel.core.textsafe import invisible
from crystal_kernel.jupyter import palette
from crystal_kernel.jupyter.cards import diff_html, esc

# A model could send megabytes; a browser shows this much in a scroll box, and says
# plainly when a call is longer (so the person can deny what they cannot see).
SHOW_LIMIT = 1_000_000

_MARK = palette.MARKED
_PRE = ("margin:2px 0 4px 0;padding:4px 6px;background-color:" + palette.CODE_BG + ";"
        "color:" + palette.TEXT + ";max-height:24em;overflow:auto;white-space:pre-wrap;"
        "overflow-wrap:anywhere;font-family:var(--jp-code-font-family,monospace);font-size:90%;"
        "border:1px solid var(--jp-border-color2,#d0d7de)")
_WARN = f"color:{palette.WARN};font-weight:bold"
_MUTED = f"color:{palette.MUTED}"
_TEXT_KEYS = {"bash": "command", "bash_start": "command", "python": "code"}
#: Tools whose approval draws the host's diff against the file (the request's preview).
CHANGE_TOOLS = frozenset({"edit", "write"})
# Tools whose text arguments are file contents or code fragments, never run as they
# stand: a newline or padding in them is ordinary, not a warning.
_FRAGMENT_TOOLS = CHANGE_TOOLS | {"notebook_edit"}
_SPACE_RUN = re.compile(r" {3,}|\t+")


def _mark(text: str) -> str:
    return f'<span style="{_MARK}">{esc(text)}</span>'


def _whitespace(run: str) -> str:
    return _mark("".join("→" if c == "\t" else "·" for c in run))


def _visible_line(line: str) -> str:
    """One line with its padding and invisible characters made visible (HTML)."""
    stripped = line.strip(" \t")
    if not stripped:
        return _whitespace(line) if line else ""
    start = len(line) - len(line.lstrip(" \t"))
    end = len(line.rstrip(" \t"))
    out = [_whitespace(line[:start]) if start else ""]
    middle = line[start:end]
    pos = 0
    for m in _SPACE_RUN.finditer(middle):
        out.append(_escape_invisible(middle[pos:m.start()]))
        out.append(_whitespace(m.group()))
        pos = m.end()
    out.append(_escape_invisible(middle[pos:]))
    if end < len(line):
        out.append(_whitespace(line[end:]))
    return "".join(out)


def _escape_invisible(text: str) -> str:
    out = []
    for ch in text:
        out.append(_mark(f"⟨U+{ord(ch):04X}⟩") if invisible(ch) else esc(ch))
    return "".join(out)


def visible_html(text: str) -> str:
    """``text`` as HTML for a ``<pre>``: every line break marked ``↵``, padding and
    invisible characters marked (see the module docstring)."""
    text, more = _bounded(text)
    lines = text.replace("\r\n", "\n").split("\n")
    shown = []
    for i, line in enumerate(lines):
        parts = line.split("\r")  # a bare carriage return can hide what precedes it
        body = _mark("⟨CR⟩").join(_visible_line(p) for p in parts)
        shown.append(body + (_mark("↵") if i < len(lines) - 1 else ""))
    return "\n".join(shown) + (f'\n<span style="{_WARN}">{esc(more)}</span>' if more else "")


def _bounded(text: str) -> tuple[str, str]:
    if len(text) <= SHOW_LIMIT:
        return text, ""
    return text[:SHOW_LIMIT], (f"[The call is {len(text):,} characters long; only the first "
                               f"{SHOW_LIMIT:,} are shown. Deny it if you cannot judge it.]")


def warnings(text: str, *, command: bool = True) -> list[str]:
    """Plain-English warnings about what a text hides; the line-count and padding ones
    only for a ``command`` (for other text, such as an edit's fragment, they are not news)."""
    out = []
    lines = text.count("\n") + 1
    if command and lines > 1:
        out.append(f"This runs {lines} lines, not one.")
    if command and text != text.strip():
        out.append("It starts or ends with whitespace.")
    longest = max((len(m.group()) for m in _SPACE_RUN.finditer(text)), default=0)
    if longest >= 20:
        out.append(f"It contains a run of {longest} blanks: read it to the end.")
    if "\r" in text:
        out.append("It contains a carriage return, which can hide text before it in a terminal.")
    if any(invisible(c) for c in text if c not in "\r"):
        out.append("It contains invisible characters (shown as ⟨U+…⟩).")
    if len(text) > 2000:
        out.append(f"It is {len(text):,} characters long: scroll through it.")
    return out


def _pre(inner: str) -> str:
    return f'<pre class="crystal-approval-text" style="{_PRE}">{inner}</pre>'


def _label(name: str) -> str:
    return f'<div style="{_MUTED}">{esc(name)}</div>'


def _text_block(name: str, text: str, *, command: bool) -> str:
    warn = "".join(f'<div style="{_WARN}">⚠ {esc(w)}</div>' for w in warnings(text, command=command))
    return _label(name) + warn + _pre(visible_html(text))


def _change_block(tool: str, arguments: dict[str, Any], preview: str | None) -> tuple[str, set[str]]:
    """The diff (or new contents) a write/edit would make, and the argument names it
    already shows in full. ``preview`` is the host's diff against the file (None when the
    call would fail, e.g. old_string is not in the file: the tool's error follows)."""
    path = str(arguments.get("path", ""))
    if tool == "write" and isinstance(arguments.get("content"), str):
        new = arguments["content"]
        if preview is None or preview.startswith("--- /dev/null"):
            title = f"New contents of {path} ({new.count(chr(10)) + (0 if new.endswith(chr(10)) else 1)} lines)"
            return _label(title) + _pre(visible_html(new)), {"content"}
        if not preview.startswith("--- "):
            return _label(preview.strip()), {"content"}
        return _label(f"Changes to {path}") + _pre(diff_html(_bounded(preview)[0])), {"content"}
    if tool == "edit" and preview:
        every = " (every occurrence)" if arguments.get("replace_all") else ""
        # The exact texts stay below, marked, so padding in them is visible too.
        return _label(f"Changes to {path}{every}") + _pre(diff_html(_bounded(preview)[0])), set()
    return "", set()


def preview_block(preview: str) -> str:
    """A host-made preview of the change (e.g. notebook_edit's per-cell diff), whole."""
    return _label("The change") + _pre(esc(_bounded(preview)[0]))


def call_html(tool: str, arguments: dict[str, Any], preview: str | None = None) -> str:
    """Every argument of the call, in full, with the change a write/edit makes first
    (``preview``: the host's diff, :func:`crystal_kernel.tools._proposed.proposed_diff`)."""
    parts: list[str] = []
    change, shown = _change_block(tool, arguments, preview)
    if change:
        parts.append(change)
    for name, value in arguments.items():
        if name in shown:
            continue
        if isinstance(value, str):
            if "\n" in value or len(value) > 80 or value != value.strip() or name == _TEXT_KEYS.get(tool) \
                    or _SPACE_RUN.search(value) or any(invisible(c) for c in value):
                parts.append(_text_block(name, value, command=tool not in _FRAGMENT_TOOLS))
            else:
                parts.append(f'<div><span style="{_MUTED}">{esc(name)}:</span> '
                             f'<code>{_escape_invisible(value)}</code></div>')
        else:
            parts.append(_label(name) + _pre(visible_html(json.dumps(value, ensure_ascii=False, indent=2))))
    return "".join(parts) or f'<div style="{_MUTED}">(no arguments)</div>'


def call_text(tool: str, arguments: dict[str, Any]) -> str:
    """A plain-text rendering of the whole call (a form's text/plain fallback)."""
    body = json.dumps(arguments, ensure_ascii=False, indent=2)
    return f"Allow {tool}?\n{_bounded(body)[0]}"
