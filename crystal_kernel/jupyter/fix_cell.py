"""NB-3: "Fix with Crystal" on a cell's error output.

The lab extension's Fix button (labextension/src/fix.ts) asks the notebook's kernel over
the same ``crystal.sidebar`` comm the sidebar uses for kernels that run elsewhere
(sidebar_comm.py): one door to the notebook's Crystal session, whether the kernel is
Crystal's or a Python kernel with ``%load_ext crystal_kernel``. The request is
``{"id": N, "op": "fix", "args": {"source": CELL, "traceback": [LINES] | TEXT}}``.

The fix is an ordinary turn of that session (it is in the session's history and
transcript, so a later cell can refer to it). Its prompt holds the cell's code, the
traceback (colour codes removed, the last :data:`MAX_TRACEBACK_CHARS`) and the variables
the code names as they are now in the kernel (at most :data:`MAX_VARIABLES`, each value
shortened). The model is asked for the whole corrected cell as one fenced Python block;
the reply's ``source`` is that block (with the ``%%python`` marker put back when the cell
had it), ``explanation`` the rest of the answer. Nothing is drawn in any cell and nobody
answers a question or an approval during the turn (calls that need approval are
denied): the person sees the proposed change as a diff and applies it or not.

The turn runs as a task on the kernel's event loop, so the comm handler returns at once
and the kernel goes on answering; the reply is sent when the turn has ended. The front
end stops it by closing the comm (the bar's Stop button): the turn ends as after any
stop, and the session is free again.
"""

from __future__ import annotations

import ast
import asyncio
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from crystal_kernel.core.errors import UserError

if TYPE_CHECKING:
    from crystal_kernel.host.session import Session
    from crystal_kernel.jupyter.render import Output

OP = "fix"
#: Characters of the cell's code the model gets (a longer cell is refused, not cut:
#: a fix of half a cell would replace the whole cell).
MAX_SOURCE_CHARS = 20_000
#: Characters of the traceback the model gets (its end, where the error is).
MAX_TRACEBACK_CHARS = 6_000
#: Variables the code names that the model is told about, in order of first use.
MAX_VARIABLES = 12
#: Characters of the explanation sent back with the fix.
MAX_EXPLANATION_CHARS = 2_000

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_FENCE = re.compile(r"^(?P<fence>`{3,})[ \t]*(?P<lang>[\w+.-]*)[^\n]*\n(?P<code>.*?)\n?^(?P=fence)[ \t]*$",
                    re.MULTILINE | re.DOTALL)
_PYTHON_LANGS = {"", "python", "py", "python3", "ipython", "ipython3"}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Running fixes and their sessions (a task without a reference may be collected).
_tasks: dict[asyncio.Task[None], Session] = {}


def wants(request: object) -> bool:
    """Whether a comm request is a fix (handled here, not by sidebar_comm.answer)."""
    return isinstance(request, dict) and request.get("op") == OP


def start(kernel: Any, request: Any, comm: Any) -> None:
    """Start the fix turn for ``request`` (a request :func:`wants`) that came on ``comm``,
    which gets the reply; closing the comm stops the turn (the Fix bar's Stop). Never
    raises."""
    rid = request.get("id") if isinstance(request, dict) else None
    send = _sender(comm)
    try:
        source, traceback = _parse(request.get("args") if isinstance(request, dict) else None)
        session = _session(kernel)
        if session.busy:
            raise UserError("Crystal is answering another cell in this notebook; press Fix again when it has finished.")
    except UserError as exc:
        send({"id": rid, "ok": False, "status": 400, "error": str(exc)})
        return
    except Exception as exc:  # the button shows it; the kernel goes on
        send({"id": rid, "ok": False, "status": 500, "error": f"Crystal could not start: {type(exc).__name__}: {exc}"[:400]})
        return
    shell = getattr(kernel, "shell", None)
    namespace = getattr(shell, "user_ns", {}) or {}

    async def work() -> None:
        try:
            data = await run_fix(session, source, traceback, namespace)
            reply: dict[str, Any] = {"id": rid, "ok": True, "data": data}
        except UserError as exc:
            reply = {"id": rid, "ok": False, "status": 400, "error": str(exc)}
        except Exception as exc:
            reply = {"id": rid, "ok": False, "status": 500, "error": f"The fix failed: {type(exc).__name__}: {exc}"[:400]}
        finally:
            _remember(kernel)
        send(reply)

    task = asyncio.ensure_future(work())
    _tasks[task] = session
    task.add_done_callback(lambda done: _tasks.pop(done, None))
    _stop_on_close(comm, task)


#: What a cell run while a fix turn runs shows while it waits, and once it has waited.
WAITING = "Crystal is fixing another cell of this notebook (Fix with Crystal); this cell runs when that fix ends."
WAITED = "This cell waited for Crystal's fix of another cell to end."


async def after_fixes(session: Session, output: Output) -> None:
    """Wait until no fix turn runs in ``session``: a prompt cell run meanwhile waits its
    turn, as a second cell waits for the first, instead of failing because the session
    is busy. The cell says why it waits (a note in ``output``, changed once it has
    waited). An interrupt while it waits ends the wait, never the fix."""
    from crystal_kernel.jupyter.cards import note_bundle

    def running() -> list[asyncio.Task[None]]:
        # Fixes run on the kernel's loop; a turn on another loop (the magics' synchronous
        # form) cannot wait on them and meets the session's own busy check instead.
        loop = asyncio.get_running_loop()
        return [task for task, owner in _tasks.items()
                if owner is session and not task.done() and task.get_loop() is loop]

    waiting = running()
    if not waiting:
        return
    handle = output.show(note_bundle(WAITING))
    try:
        while waiting:
            await asyncio.wait(waiting)
            waiting = running()
    except asyncio.CancelledError:
        handle.update(note_bundle("Interrupted while it waited for Crystal's fix of another cell; the fix goes on."))
        raise
    handle.update(note_bundle(WAITED))


def _sender(comm: Any) -> Callable[[dict[str, Any]], None]:
    def send(reply: dict[str, Any]) -> None:
        try:
            comm.send(reply)
        except Exception:
            pass  # the page went away (or closed the comm): nobody is waiting for it

    return send


def _stop_on_close(comm: Any, task: asyncio.Task[None]) -> None:
    """Cancel ``task`` when the front end closes ``comm``: the turn ends the normal way
    (as after a Stop), so the session is free for the next fix or cell at once."""
    running: set[asyncio.Task[None]] | None = getattr(comm, "_crystal_fixes", None)
    if running is None:
        running = set()
        comm._crystal_fixes = running
        comm.on_close(lambda _msg: [t.cancel() for t in list(running)])
    running.add(task)
    task.add_done_callback(running.discard)


def _parse(args: object) -> tuple[str, str]:
    if not isinstance(args, dict):
        raise UserError("'args' must be a JSON object with the cell's 'source' and 'traceback'.")
    source = args.get("source")
    if not isinstance(source, str) or not source.strip():
        raise UserError("'source' is required: the failing cell's code, as text.")
    if len(source) > MAX_SOURCE_CHARS:
        raise UserError(f"The cell is too long to fix here ({len(source)} characters; at most {MAX_SOURCE_CHARS}).")
    raw = args.get("traceback", "")
    if isinstance(raw, list) and all(isinstance(line, str) for line in raw):
        raw = "\n".join(raw)
    if not isinstance(raw, str):
        raise UserError("'traceback' must be text or a list of lines.")
    return source, clean_traceback(raw)


def _session(kernel: Any) -> Session:
    """The notebook's session, opened if this kernel has none yet: the Crystal kernel's,
    or the ``%crystal`` magics' in a Python kernel."""
    ensure = getattr(kernel, "ensure_session", None)
    if callable(ensure):
        return cast("Session", ensure())  # the Crystal kernel's ensure_session
    from crystal_kernel.jupyter.magics import host_of

    try:
        host = host_of(kernel.shell)
    except Exception:
        raise UserError("Crystal is not loaded in this kernel: run %load_ext crystal_kernel in a cell first.") from None
    return host.ensure_session()


def _remember(kernel: Any) -> None:
    """Name the session after the notebook, as after any turn (a convenience)."""
    owner = kernel if callable(getattr(kernel, "ensure_session", None)) else None
    if owner is None:
        from crystal_kernel.jupyter.magics import host_of

        try:
            owner = host_of(kernel.shell)
        except Exception:
            return
    try:
        owner.front.remember()
    except Exception:
        pass  # never fails a fix


def clean_traceback(text: str) -> str:
    """The traceback without terminal colour codes, its last :data:`MAX_TRACEBACK_CHARS`."""
    text = _ANSI.sub("", text).strip("\n")
    if len(text) > MAX_TRACEBACK_CHARS:
        text = "… (the start is left out)\n" + text[-MAX_TRACEBACK_CHARS:]
    return text


def named_variables(code: str, namespace: dict[str, Any]) -> list[str]:
    """One line per variable ``code`` names that the namespace holds (not modules, not
    functions or classes, not private names), in order of first use, bounded."""
    import types

    from crystal_kernel.jupyter.notebook_tools import short_repr

    try:
        names = [node.id for node in ast.walk(ast.parse(code)) if isinstance(node, ast.Name)]
    except (SyntaxError, ValueError):
        names = _IDENT.findall(code)
    seen: list[str] = []
    for name in names:
        if name in seen or name.startswith("_") or name not in namespace:
            continue
        value = namespace[name]
        if isinstance(value, (types.ModuleType, types.FunctionType, type)):
            continue
        seen.append(name)
    lines = []
    for name in seen[:MAX_VARIABLES]:
        value = namespace[name]
        line = f"{name}: {type(value).__name__} = {short_repr(value)}"
        try:  # a table: its shape and columns say more than its first rows
            shape, columns = getattr(value, "shape", None), getattr(value, "columns", None)
            if isinstance(shape, tuple) and columns is not None:
                cols = short_repr(list(columns))
                line = f"{name}: {type(value).__name__}, shape {shape}, columns {cols}"
        except Exception:
            pass
        lines.append(line)
    if len(seen) > MAX_VARIABLES:
        lines.append(f"({len(seen) - MAX_VARIABLES} more names not listed)")
    return lines


def fenced(code: str) -> str:
    """``code`` as a Python fenced block whose fence no run of backticks in it closes."""
    longest = max((len(run) for run in re.findall(r"`+", code)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}python\n{code}\n{fence}"


def fix_prompt(code: str, traceback: str, variables: list[str]) -> str:
    """What the model gets for a fix: the cell, the traceback, the variables it names."""
    parts = [
        "Fix with Crystal: the person pressed Fix on this notebook cell, which failed. Find the cause and "
        "reply with the whole corrected cell as one fenced ```python block (the cell's complete new source: "
        "it replaces the cell as it is), then one or two sentences on what you changed.",
        "<cell>", fenced(code), "</cell>",
        "<traceback>", traceback or "(no traceback)", "</traceback>",
    ]
    if variables:
        parts += ["<variables>", "The variables the cell names, as they are now in the kernel:", *variables,
                  "</variables>"]
    return "\n".join(parts)


def proposed_source(answer: str) -> tuple[str, str] | None:
    """The last Python fenced block of ``answer`` and the answer without it, or None."""
    blocks = [m for m in _FENCE.finditer(answer) if m.group("lang").lower() in _PYTHON_LANGS]
    if not blocks:
        return None
    block = blocks[-1]
    rest = (answer[: block.start()] + answer[block.end():]).strip()
    return block.group("code").rstrip("\n"), rest


async def run_fix(session: Session, source: str, traceback: str, namespace: dict[str, Any]) -> dict[str, Any]:
    """Run the fix turn in ``session``; the reply's data: ``source`` (the corrected cell),
    ``explanation``, ``session``."""
    from crystal_kernel.core.ops import UserTurn
    from crystal_kernel.host.commands import submit
    from crystal_kernel.jupyter.notebook_turn import final_text
    from crystal_kernel.jupyter.person_cells import MARKER, body, split

    marked = split(source) is not None  # a Crystal notebook's %%python cell
    code = body(source) if marked else source
    prompt = fix_prompt(code.strip("\n"), traceback, named_variables(code, namespace))
    start = len(session.history)
    turn = await submit(session, UserTurn(prompt=prompt))  # nobody to ask: questions unavailable, asks denied
    async for _event in turn:
        pass  # nothing is drawn: the answer comes back as the reply
    if turn.stop_reason in ("error", "cancelled"):
        raise UserError(turn.error or "The fix turn was stopped before it answered.")
    answer = final_text(session, start)
    found = proposed_source(answer)
    if found is None:
        excerpt = " ".join(answer.split())[:200] or "(no answer)"
        raise UserError(f"Crystal's answer has no corrected cell (a ```python block): {excerpt}")
    fixed, explanation = found
    if marked and split(fixed) is None:
        fixed = f"{MARKER}\n{fixed}"
    if len(explanation) > MAX_EXPLANATION_CHARS:
        explanation = explanation[: MAX_EXPLANATION_CHARS - 1] + "…"
    return {"source": fixed, "explanation": explanation, "session": session.id}
