"""The input transformer that makes ``%%crystal`` and a standalone ``%crystal`` line
async cells.

IPython turns ``%%crystal ARGS`` into ``get_ipython().run_cell_magic('crystal', ARGS,
BODY)`` and a ``%crystal ARGS`` line into ``get_ipython().run_line_magic('crystal',
ARGS)``. This transformer runs after IPython's own (``input_transformers_post``) and
rewrites such a call, when it is a whole statement at the top level of the cell, to
``await <module>.run_magic_async(get_ipython(), KIND, ARGS, BODY)`` (the shell
running the cell, as the cell's own namespace names it). The cell then runs as an async
cell (autoawait with the asyncio runner), so on ipykernel >= 7.4 comm messages — widget
clicks — are handled while the turn awaits them (DESIGN.md). Everything else (``x =
%crystal …``, an indented ``%crystal`` inside a function) keeps IPython's synchronous
call and so the magic's synchronous form.

Matching IPython's generated text rather than the raw ``%`` syntax means a ``%crystal``
inside a string literal is never touched: IPython's token-based transforms leave it alone.
One exception: a line ending in ``?`` is a help request to IPython (``%crystal Which
file?`` would become ``%pinfo file``), so :func:`keep_questions` runs first, on the raw
lines, and writes such a ``%crystal`` line as the call itself.
"""

from __future__ import annotations

import re
from typing import Any

MODULE = "crystal_kernel.jupyter.magics"
CALL = f"__import__({MODULE!r}, fromlist=['run_magic_async']).run_magic_async"
# The arguments are repr() strings, which never hold a raw newline: one line per call.
_GENERATED = re.compile(r"get_ipython\(\)\.run_(line|cell)_magic\('crystal', (.*)\)(\s*)$", re.S)


def transform(lines: list[str]) -> list[str]:
    """Rewrite top-level ``%crystal`` / ``%%crystal`` calls to awaited coroutines."""
    out: list[str] = []
    for line in lines:
        m = _GENERATED.match(line)
        if m is None:
            out.append(line)
            continue
        kind, args, tail = m.groups()
        out.append(f"await {CALL}(get_ipython(), {kind!r}, {args}){tail}")
    return out


_QUESTION = re.compile(r"([ \t]*)((?:[A-Za-z_][\w.]*[ \t]*=[ \t]*)?)%crystal(?:[ \t](.*))?$")


def keep_questions(lines: list[str]) -> list[str]:
    """A ``%crystal`` line ending in ``?`` is a prompt, not a help request."""
    out: list[str] = []
    for line in lines:
        body = line.rstrip("\r\n")
        m = _QUESTION.match(body.rstrip()) if body.rstrip().endswith("?") else None
        if m is None:
            out.append(line)
            continue
        indent, assign, args = m.group(1), m.group(2), m.group(3) or ""
        newline = line[len(body):]
        if not indent and not assign:
            out.append(f"await {CALL}(get_ipython(), 'line', {args!r}){newline}")
        else:
            out.append(f"{indent}{assign}get_ipython().run_line_magic('crystal', {args!r}){newline}")
    return out


# Marks our functions so install/uninstall find it again after a reload of this module.
transform.__dict__["crystal_transformer"] = True
keep_questions.__dict__["crystal_transformer"] = True


def install(shell: Any) -> None:
    uninstall(shell)
    shell.input_transformers_cleanup.append(keep_questions)
    shell.input_transformers_post.append(transform)


def uninstall(shell: Any) -> None:
    for hooks in (shell.input_transformers_cleanup, shell.input_transformers_post):
        hooks[:] = [t for t in hooks if not getattr(t, "crystal_transformer", False)]
