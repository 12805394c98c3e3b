"""Notebook parameters in the Crystal kernel: ``/parameter NAME VALUE`` cells, and
``{NAME}`` in later cells replaced by the value (docs/kernel.md, "Parameters and papermill").

This is what papermill's ``-p NAME VALUE`` becomes in a Crystal notebook: the Crystal
translator (:mod:`crystal_kernel.jupyter.papermill_engine`) writes the injected
parameters cell as ``/parameter`` lines, so a parameter is never sent to the model as a
prompt. The value is also a variable of the kernel's Python namespace, which the
``python`` tool's code sees.

Only names set as parameters are replaced: a cell that names none is sent as it was
written, braces and all. ``{{NAME}}`` stays as written.
"""

from __future__ import annotations

import json
import keyword
import re
from typing import Any

from crystal_kernel.core.errors import UserError

COMMAND = "/parameter"
MAX_NAME_CHARS = 64
# A value is cut to this many characters where a cell uses it (as ``{df}`` in %crystal).
MAX_VALUE_CHARS = 20_000
MAX_PARAMETERS = 200

# The names set so far in this kernel process (one notebook), in the order they were set.
_NAMES: dict[str, None] = {}


def is_parameter_line(line: str) -> bool:
    """Whether a command cell's line is ``/parameter`` (parsed here, not by shlex: the
    value is JSON)."""
    word = line.strip().split(None, 1)[0] if line.strip() else ""
    return word == COMMAND


def parse_line(line: str) -> tuple[str | None, str | None, Any]:
    """``(name, raw value, value)`` of a ``/parameter`` line; name None lists, raw None
    shows one. The value is JSON when it parses as JSON, else the text as written."""
    rest = line.strip()[len(COMMAND):].strip()
    if not rest:
        return None, None, None
    name, _, raw = rest.partition(" ")
    check_name(name)
    raw = raw.strip()
    if not raw:
        return name, None, None
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw  # a bare word: /parameter target notes.md
    return name, raw, value


def check_name(name: str) -> None:
    if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_") or len(name) > MAX_NAME_CHARS:
        raise UserError(f"{name[:MAX_NAME_CHARS]!r} is not a parameter name: use letters, digits and _, "
                        f"starting with a letter, at most {MAX_NAME_CHARS} characters.")


def set_parameter(namespace: dict[str, Any], name: str, value: Any) -> None:
    """Set ``name`` in the kernel's namespace and remember it as a parameter."""
    if name not in _NAMES and len(_NAMES) >= MAX_PARAMETERS:
        raise UserError(f"At most {MAX_PARAMETERS} parameters can be set in one notebook.")
    namespace[name] = value
    _NAMES[name] = None


def names() -> list[str]:
    return list(_NAMES)


def describe(namespace: dict[str, Any], name: str | None = None) -> str:
    """The parameters and their values (or one), for ``/parameter`` without a value."""
    if name is not None:
        if name not in _NAMES:
            raise UserError(f"No parameter '{name}' was set; set it with /parameter {name} VALUE.")
        return f"{name} = {_shown(namespace.get(name))}"
    if not _NAMES:
        return ("No parameters are set. /parameter NAME VALUE sets one; later cells use it as {NAME} "
                "(papermill -p NAME VALUE writes these lines).")
    return "\n".join(f"{n} = {_shown(namespace.get(n))}" for n in _NAMES)


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 200 else text[:200] + "…"


def interpolate(text: str, namespace: dict[str, Any]) -> tuple[str, list[str]]:
    """``text`` with ``{NAME}`` replaced by ``str()`` of each parameter's current value;
    other braces stay as written. Each value is cut at MAX_VALUE_CHARS, with a note."""
    if not _NAMES or "{" not in text:
        return text, []
    notes: list[str] = []
    pattern = re.compile(r"(?<!\{)\{(" + "|".join(re.escape(n) for n in _NAMES) + r")\}(?!\})")

    def replace(m: re.Match[str]) -> str:
        name = m.group(1)
        value = namespace.get(name)
        try:
            shown = value if isinstance(value, str) else str(value)
        except Exception as exc:
            raise UserError(f"{{{name}}} could not be turned into text: {type(exc).__name__}: {exc}") from None
        if len(shown) > MAX_VALUE_CHARS:
            notes.append(f"{{{name}}} was cut to its first {MAX_VALUE_CHARS:,} of {len(shown):,} characters.")
            shown = shown[:MAX_VALUE_CHARS] + f"\n[… {len(shown) - MAX_VALUE_CHARS:,} more characters]"
        return shown

    return pattern.sub(replace, text), notes


def reset() -> None:
    """Forget the parameters (tests; a kernel restart is a new process)."""
    _NAMES.clear()
