"""Text and JSON the host can always save, print and send (ROBUST-1).

Two things from the model or the file system can make a value unwritable:

- lone surrogates: a file name that is not valid UTF-8 reaches Python as
  ``surrogateescape`` characters (``b"\\xff"`` is ``"\\udcff"``), and a model can send
  ``"\\ud800"`` in JSON. UTF-8 cannot encode them, so a session document, a JSON line or
  a provider request holding one fails. :func:`clean_text` writes them as visible
  escapes instead (``\\xff`` for an escaped byte, ``\\ud800`` otherwise).
- nesting: a 300-deep tool argument overflows pydantic's serializer and, deeper, the
  JSON parser. :func:`nesting_depth` measures without recursion so the loop can refuse
  the call with a failed tool result.

And one thing makes a value unsafe to print (TRUST-6): control characters. Model text,
tool output, file names, MCP names and job logs can hold escape sequences a terminal
obeys (``ESC]52;c;...BEL`` writes the clipboard, ``ESC[2J`` clears the screen, ``\r``
and backspace overprint what was shown). :func:`terminal_safe` makes them visible; the
terminal front prints all such text through it. :func:`terminal_json` does the same for
JSON printed to a terminal, and the value stays exact. A lone surrogate counts too: a
file name that is not UTF-8 holds one (``b"\x9b"`` is ``"\udc9b"``), and a stream in
the ``surrogateescape`` mode (Python's under the C and C.UTF-8 locales) would write it
back as the raw byte, the 8-bit CSI. ``terminal_safe(text, exact=True)`` is for what a
person approves or reads as a call (a command, a path, arguments): every invisible
character is made visible too (zero-width, bidi marks, line separators, non-breaking
and other odd spaces), so what is shown is what runs.
"""

from __future__ import annotations

import json
import logging
import re
import unicodedata
from typing import Any

# Deepest tool argument the host accepts (a JSON schema argument nests maybe 10 levels).
MAX_ARGUMENT_DEPTH = 64


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by a visible escape; the same object
    when there is none (the common case costs one encode)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    out: list[str] = []
    for ch in text:
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:
            out.append(f"\\x{code - 0xDC00:02x}")
        elif 0xD800 <= code <= 0xDFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


def clean_value(value: Any) -> Any:
    """A JSON-like value with :func:`clean_text` applied to every string and key
    (iterative: safe on deep values)."""
    if isinstance(value, str):
        return clean_text(value)
    if not isinstance(value, (dict, list)):
        return value
    root: Any = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, Any]] = [(value, root)]
    while stack:
        source, target = stack.pop()
        items = source.items() if isinstance(source, dict) else enumerate(source)
        for key, item in items:
            if isinstance(item, (dict, list)):
                child: Any = {} if isinstance(item, dict) else []
                stack.append((item, child))
            else:
                child = clean_text(item) if isinstance(item, str) else item
            if isinstance(target, dict):
                target[clean_text(key) if isinstance(key, str) else key] = child
            else:
                target.append(child)
    return root


def nesting_depth(value: Any, stop_at: int = 10_000) -> int:
    """How deeply lists and dicts nest in ``value`` (a scalar is 0), counted without
    recursion; stops counting past ``stop_at``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            depth += 1
            deepest = max(deepest, depth)
            if deepest > stop_at:
                return deepest
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth) for child in children if isinstance(child, (dict, list)))
    return deepest


# C0 controls but tab and newline, DEL, C1 controls, the bidi embedding, override and
# isolate controls (text that reads otherwise than it is), and lone surrogates (raw bytes
# of a name that is not UTF-8, written back as bytes by a surrogateescape stream).
_TERMINAL_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
# In JSON text these can stand only inside strings (json.dumps escapes C0 itself).
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def invisible(ch: str) -> bool:
    """Whether a person cannot see ``ch`` as what it is, or it reorders what they see:
    controls (Cc), format characters (Cf: zero-width, bidi marks and overrides, the BOM,
    tag characters), line and paragraph separators, and every space but the plain one.
    Newline and tab are visible layout."""
    if ch in "\n\t ":
        return False
    cat = unicodedata.category(ch)
    return cat in ("Cc", "Cf", "Zl", "Zp", "Cs") or (cat == "Zs" and ch != " ")


def _visible(match: re.Match[str]) -> str:
    return _visible_char(match.group())


def _visible_char(ch: str) -> str:
    code = ord(ch)
    if code < 0x20:
        return "^" + chr(code + 0x40)  # caret notation: ESC is ^[, BEL ^G, CR ^M
    if code == 0x7F:
        return "^?"
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"  # a byte that is not UTF-8, as clean_text writes it
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def terminal_safe(text: str, *, exact: bool = False) -> str:
    """``text`` with nothing a terminal would obey (TRUST-6): C0 control characters but
    newline and tab in caret notation (``^[``, ``^G``, ``^M``), DEL as ``^?``, C1
    controls as ``\\x9b``, bidi overrides as ``\\u202e`` and a lone surrogate as the
    byte it stands for (``\\x9b``) or ``\\ud800``, so an escape sequence shows as the
    text it is. A Windows line end (CR LF) is a plain newline. With ``exact``, every
    :func:`invisible` character is shown that way too (``\\u200b``, ``\\u00a0``): for
    a call a person approves. The same object when there is nothing to change."""
    if exact:
        if not any(invisible(ch) for ch in text):
            return text
        return "".join(_visible_char(ch) if invisible(ch) else ch for ch in text.replace("\r\n", "\n"))
    if _TERMINAL_UNSAFE.search(text) is None:
        return text
    return _TERMINAL_UNSAFE.sub(_visible, text.replace("\r\n", "\n"))


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def terminal_json(value: Any, *, indent: int | None = None) -> str:
    """``json.dumps(value, ensure_ascii=False)`` with DEL, C1, bidi controls and lone
    surrogates written as ``\\u`` escapes too (json.dumps escapes only C0): the same JSON
    value, safe to print to a terminal."""
    return _JSON_UNSAFE.sub(_json_escape, json.dumps(value, ensure_ascii=False, indent=indent))


class TerminalSafeFormatter(logging.Formatter):
    """A log formatter whose lines hold nothing a terminal obeys (TRUST-6): a library's
    record can quote what an MCP server or a client sent (the MCP SDK logs a notification
    it cannot read, whole, through the root logger)."""

    def format(self, record: logging.LogRecord) -> str:
        return terminal_safe(super().format(record))


def _not_handled_below(record: logging.LogRecord) -> bool:
    """Whether no logger under the root took ``record`` (a library that gave its logger a
    handler, even a NullHandler to keep it quiet, stays as quiet as it chose)."""
    logger: logging.Logger | None = logging.getLogger(record.name)
    while logger is not None and logger is not logging.root:
        if logger.handlers:
            return False
        if not logger.propagate:
            break
        logger = logger.parent
    return True


def log_to_terminal(fmt: str = logging.BASIC_FORMAT, *, force: bool = False) -> None:
    """Give the root logger its one stderr handler, through :class:`TerminalSafeFormatter`
    (``logging.warning`` would otherwise install a raw one on first use); it prints what
    no library's own handler took, as logging's last resort would."""
    handler = logging.StreamHandler()
    handler.setFormatter(TerminalSafeFormatter(fmt))
    handler.addFilter(_not_handled_below)
    logging.basicConfig(level=logging.WARNING, handlers=[handler], force=force)
