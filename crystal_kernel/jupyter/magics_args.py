"""What a ``%crystal`` / ``%%crystal`` line says: session options, then a prompt or a
slash command; and ``{name}`` interpolation of notebook variables into the prompt.

Options come first (``%crystal --mode plan explain {df}``); the first word that is not
an option starts the prompt. ``--`` ends the options, so a prompt may itself start with
``--``. On the ``%%crystal`` line everything must be an option (the prompt is the body).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from crystal_kernel.core.errors import UserError

# option -> (attribute, takes a value, repeatable, allowed values)
_OPTIONS: dict[str, tuple[str, bool, bool, tuple[str, ...]]] = {
    "--mode": ("mode", True, False, ("plan", "work")),
    "--approval": ("approval", True, False, ()),
    "--model": ("model", True, False, ()),
    "--reasoning": ("reasoning", True, False, ("none", "low", "medium", "high", "default")),
    "--prompt-set": ("prompt_set", True, False, ()),
    "--prompt-attachments": ("prompt_attachments", True, False, ("on", "off")),
    "--prompt-attachment": ("prompt_attachment", True, True, ()),
    "--disable-tool": ("disable_tool", True, True, ()),
    "--new": ("new", False, False, ()),
}
OPTION_NAMES = ", ".join(_OPTIONS)

# One leading token: --name, --name=value, or a quoted/bare value.
_FLAG = re.compile(r"--([A-Za-z][\w-]*)(?:=(\"[^\"]*\"|'[^']*'|\S*))?")
_VALUE = re.compile(r"\"([^\"]*)\"|'([^']*)'|(\S+)")

MAX_VALUE_CHARS = 20_000  # what one {name} may add to a prompt
# A value up to this long on one line goes inline in backticks; longer ones get a block.
INLINE_VALUE_CHARS = 80
_BRACES = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass
class MagicOptions:
    """Session options given on a magic. ``None`` / empty means "not given"; the
    repeatable ones replace the session's list when given."""

    mode: str | None = None
    approval: str | None = None
    model: str | None = None
    reasoning: str | None = None
    prompt_set: str | None = None
    prompt_attachments: str | None = None
    prompt_attachment: list[str] | None = None
    disable_tool: list[str] | None = None
    new: bool = False
    given: list[str] = field(default_factory=list)

    def any(self) -> bool:
        return bool(self.given)

    def changes_flags(self) -> bool:
        return any(v is not None for v in (self.prompt_set, self.prompt_attachments,
                                           self.prompt_attachment, self.disable_tool))


def _unquote(token: str) -> str:
    if len(token) >= 2 and token[0] == token[-1] and token[0] in "\"'":
        return token[1:-1]
    return token


def split_options(line: str) -> tuple[MagicOptions, str]:
    """Leading options of a magic line and the rest (a prompt, a /command or '')."""
    opts = MagicOptions()
    rest = line.lstrip()
    while rest.startswith("--"):
        if rest == "--" or rest.startswith("-- ") or rest.startswith("--\n"):
            rest = rest[2:].lstrip()
            break
        m = _FLAG.match(rest)
        if m is None:
            break
        name = "--" + m.group(1)
        if name not in _OPTIONS:
            raise UserError(f"Unknown option {name}; the options are {OPTION_NAMES} (use -- before a prompt "
                            "that starts with --).")
        attr, takes_value, repeatable, allowed = _OPTIONS[name]
        rest = rest[m.end():]
        value: str | None = None
        if m.group(2) is not None:
            if not takes_value:
                raise UserError(f"{name} takes no value.")
            value = _unquote(m.group(2))
        elif takes_value:
            stripped = rest.lstrip()
            v = _VALUE.match(stripped)
            if v is None or stripped.startswith("--"):
                raise UserError(f"{name} needs a value.")
            value = next(g for g in v.groups() if g is not None)
            rest = stripped[v.end():]
        if takes_value:
            assert value is not None
            if not value:
                raise UserError(f"{name} needs a value.")
            if allowed and value not in allowed:
                raise UserError(f"{name} must be one of: {', '.join(allowed)} (not {value!r}).")
            if repeatable:
                items = getattr(opts, attr) or []
                if value not in items:
                    items.append(value)
                setattr(opts, attr, items)
            else:
                setattr(opts, attr, value)
        else:
            setattr(opts, attr, True)
        opts.given.append(name)
        rest = rest.lstrip()
    if opts.prompt_attachments == "off" and opts.prompt_attachment:
        raise UserError("--prompt-attachment cannot be combined with --prompt-attachments off.")
    return opts, rest


def cell_options(line: str) -> MagicOptions:
    """The ``%%crystal`` line: options only."""
    opts, rest = split_options(line)
    if rest.strip():
        raise UserError(f"The %%crystal line takes options only ({OPTION_NAMES}); put the prompt in the "
                        f"cell body, not {rest.strip()[:40]!r}.")
    return opts


def _inline(value: str) -> str | None:
    """A short one-line value in backticks (more of them than any run inside it, so
    the value cannot end the span), or None when it needs a block."""
    if "\n" in value or len(value) > INLINE_VALUE_CHARS:
        return None
    ticks = "`" * (max((len(run) for run in re.findall(r"`+", value)), default=0) + 1)
    pad = " " if value.startswith("`") or value.endswith("`") or not value.strip() else ""
    return f"{ticks}{pad}{value}{pad}{ticks}"


def _block(name: str, value: str, kind: str) -> str:
    """A value as a fenced block labelled with the variable's name and type; the fence
    is longer than any run of backticks inside the value."""
    fence = "`" * max(3, max((len(run) for run in re.findall(r"`+", value)), default=0) + 1)
    return f"`{name}` ({kind}):\n{fence}\n{value.rstrip(chr(10))}\n{fence}"


def interpolate(text: str, namespace: dict[str, Any]) -> tuple[str, list[str]]:
    """Replace ``{name}`` with ``str()`` of the notebook variable, delimited so the
    model sees where a value starts and ends: a short one-line value inline in
    backticks; anything longer (a DataFrame, a list that wraps) is named in the sentence
    (```df` (below)``) and follows the prompt as a fenced block labelled with its name
    and type, once per variable. ``{{``/``}}`` are literal braces; braces around
    anything that is not a name stay as they are.

    An unknown name is a UserError (nothing runs). Each value is cut at
    ``MAX_VALUE_CHARS`` characters, with a note.
    """
    notes: list[str] = []
    blocks: dict[str, str] = {}

    def replace(m: re.Match[str]) -> str:
        token = m.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        name = m.group(1)
        if name not in namespace:
            raise UserError(f"{{{name}}} in the prompt names no variable of the notebook; define it first, "
                            "or write {{ and }} for literal braces.")
        raw = namespace[name]
        try:
            value = str(raw)
        except Exception as exc:
            raise UserError(f"{{{name}}} could not be turned into text: {type(exc).__name__}: {exc}") from None
        if len(value) > MAX_VALUE_CHARS:
            notes.append(f"{{{name}}} was cut to its first {MAX_VALUE_CHARS:,} of {len(value):,} characters.")
            value = value[:MAX_VALUE_CHARS] + f"\n[… {len(value) - MAX_VALUE_CHARS:,} more characters]"
        inline = _inline(value)
        if inline is not None:
            return inline
        if name not in blocks:
            blocks[name] = _block(name, value, type(raw).__name__)
        return f"`{name}` (below)"

    bound = _BRACES.sub(replace, text)
    if blocks:
        bound = bound.rstrip() + "\n\n" + "\n\n".join(blocks.values())
    return bound, notes


@dataclass(frozen=True)
class CellPlan:
    """What a ``%crystal`` line or ``%%crystal`` cell asks: a prompt (its text), slash
    commands (their lines), or the status line."""

    what: Literal["prompt", "commands", "status"]
    prompt: str = ""
    commands: tuple[str, ...] = ()


def plan(line: str, body: str | None) -> tuple[MagicOptions, CellPlan]:
    """The options and what the magic asks."""
    if body is None:
        opts, rest = split_options(line)
    else:
        opts, rest = cell_options(line), body
    text = rest.strip()
    if not text:
        return opts, CellPlan("status")
    if text.startswith("/"):
        lines = [piece.strip() for piece in text.splitlines() if piece.strip()]
        for piece in lines:
            if not piece.startswith("/"):
                raise UserError(f"Each line of a command cell must start with '/': {piece[:60]!r}. "
                                "Put the prompt in a cell of its own.")
        return opts, CellPlan("commands", commands=tuple(lines))
    return opts, CellPlan("prompt", prompt=text)


def merged_flags(flags: Any, opts: MagicOptions) -> Any:
    """The session's process flags with a magic's flag options applied: each flag a
    later magic gives replaces that flag's earlier value (the conversation stays);
    ``--prompt-attachments off`` also drops forced names and ``--prompt-attachment``
    turns attachments back on."""
    merged = replace(flags, prompt_attachment=list(flags.prompt_attachment), disable_tool=list(flags.disable_tool))
    if opts.prompt_set is not None:
        merged.prompt_set = opts.prompt_set
    if opts.prompt_attachments is not None:
        merged.prompt_attachments = opts.prompt_attachments
        if opts.prompt_attachments == "off":
            # A later magic's flags replace the earlier ones: "off" also clears names an
            # earlier magic forced (FL-2/FL-3 refuse only the combination on one line).
            merged.prompt_attachment = []
    if opts.prompt_attachment is not None:
        merged.prompt_attachment = list(opts.prompt_attachment)
        merged.prompt_attachments = "on" if opts.prompt_attachments is None else merged.prompt_attachments
    if opts.disable_tool is not None:
        merged.disable_tool = list(opts.disable_tool)
    if merged.prompt_attachments == "off" and merged.prompt_attachment:
        raise UserError("--prompt-attachment cannot be combined with --prompt-attachments off.")
    return merged
