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
JSON printed to a terminal, and the value stays exact.
"""

from __future__ import annotations

import json
import re
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


# C0 controls but tab and newline, DEL, C1 controls, and the bidi embedding, override
# and isolate controls (text that reads otherwise than it is).
_TERMINAL_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# In JSON text these can stand only inside strings (json.dumps escapes C0 itself).
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return "^" + chr(code + 0x40)  # caret notation: ESC is ^[, BEL ^G, CR ^M
    if code == 0x7F:
        return "^?"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def terminal_safe(text: str) -> str:
    """``text`` with nothing a terminal would obey (TRUST-6): C0 control characters but
    newline and tab in caret notation (``^[``, ``^G``, ``^M``), DEL as ``^?``, C1
    controls as ``\\x9b`` and bidi overrides as ``\\u202e``, so an escape sequence shows
    as the text it is. A Windows line end (CR LF) is a plain newline. The same object
    when there is nothing to change."""
    if _TERMINAL_UNSAFE.search(text) is None:
        return text
    return _TERMINAL_UNSAFE.sub(_visible, text.replace("\r\n", "\n"))


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def terminal_json(value: Any, *, indent: int | None = None) -> str:
    """``json.dumps(value, ensure_ascii=False)`` with DEL, C1 and bidi controls written
    as ``\\u`` escapes too (json.dumps escapes only C0): the same JSON value, safe to
    print to a terminal."""
    return _JSON_UNSAFE.sub(_json_escape, json.dumps(value, ensure_ascii=False, indent=indent))
