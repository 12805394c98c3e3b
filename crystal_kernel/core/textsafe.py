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
"""

from __future__ import annotations

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
