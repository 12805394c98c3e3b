"""Notebook tools (SPEC §11): ``python``, ``variables`` and ``cell_output``.

They reach the IPython shell of the notebook through ``ctx.notebook_shell``,
which the Crystal kernel and the ``%crystal`` magics set. ``python`` runs code in the
notebook's own namespace: what it prints and displays shows in the cell as it would in
a normal cell, and the text plus images go back to the model (bounded).
"""

from __future__ import annotations

import ast
import asyncio
import base64
import inspect
import re
import reprlib
import signal
import sys
import threading
import traceback
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pydantic import Field

from crystal_kernel.core.errors import ToolError
from crystal_kernel.core.messages import ImagePart
from crystal_kernel.tools.base import EmptyInput, Risk, Tool, ToolContext, ToolInput, ToolResult

MAX_IMAGES = 8
MAX_IMAGE_BYTES = 20 * 1024 * 1024
# What is kept of printed text before the loop's tool-output limit applies.
CAPTURE_LIMIT = 1_000_000
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class _State:
    """Whether synchronous user code is running right now, and whether the front asked
    to interrupt. The kernel's interrupt turns into a KeyboardInterrupt only in
    synchronous code (async code is cancelled like any turn)."""

    sync_running = False
    interrupted = False
    stop_raised = False  # the Stop raised the KeyboardInterrupt in the code running now


def sync_code_running() -> bool:
    return _State.sync_running


def note_interrupt() -> bool:
    """The front's stop button: remember it (code about to start will not run) and say
    whether synchronous code is running now (then the front signals the main thread)."""
    _State.interrupted = True
    return _State.sync_running


@contextmanager
def sigint_cancels(loop: Any, cancel: Callable[[], None], on_signal: Callable[[], bool]) -> Iterator[None]:
    """While a turn runs, SIGINT (signal-mode kernelspecs, Ctrl-C in a console, the
    stop button in a python3 kernel) cancels it on ``loop``; when ``on_signal()`` says
    synchronous user code is running (the python tool), that code also gets a
    KeyboardInterrupt, as in a normal cell. Signals can only be handled on the main
    thread: elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(cancel)
        if on_signal():
            _State.stop_raised = True
            raise KeyboardInterrupt

    saved = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, saved)


def clear_interrupt() -> None:
    """A new cell starts: earlier interrupts are spent."""
    _State.interrupted = False


def shell_of(ctx: ToolContext) -> Any:
    shell = ctx.notebook_shell
    if shell is None:
        raise ToolError("This session is not attached to a notebook, so there is no Python namespace.")
    return shell


class _Capture:
    """A bounded text sink that also writes through to the real stream."""

    def __init__(self, real: Any, sink: list[str], budget: list[int]):
        self._real = real
        self._sink = sink
        self._budget = budget

    def write(self, text: str) -> int:
        if self._budget[0] > 0:
            piece = text[: self._budget[0]]
            self._sink.append(piece)
            self._budget[0] -= len(piece)
        return self._real.write(text) if self._real is not None else len(text)

    def flush(self) -> None:
        if self._real is not None:
            self._real.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class _Collected:
    def __init__(self) -> None:
        self.text: list[str] = []
        self.budget = [CAPTURE_LIMIT]
        self.images: list[ImagePart] = []
        self.dropped_images = 0
        # Text the cell does not show (a plain-text value): the tool's card shows it.
        self.unshown: list[str] = []

    def add_bundle(self, data: dict[str, Any]) -> None:
        for mime in IMAGE_TYPES:
            if mime in data:
                self._add_image(mime, data[mime])
                return
        plain = data.get("text/plain")
        if plain and "application/vnd.jupyter.widget-view+json" not in data:
            self.text.append(str(plain) + "\n")
        elif "application/vnd.jupyter.widget-view+json" in data:
            self.text.append("[an interactive widget was displayed]\n")

    def _add_image(self, mime: str, payload: Any) -> None:
        if len(self.images) >= MAX_IMAGES:
            self.dropped_images += 1
            return
        try:
            raw = payload if isinstance(payload, bytes) else base64.b64decode("".join(str(payload).split()))
        except Exception:
            return
        if len(raw) > MAX_IMAGE_BYTES:
            self.text.append(f"[a {mime} image of {len(raw)} bytes was too large to send]\n")
            return
        self.images.append(ImagePart.from_bytes(mime, raw))


def format_exception(etype: Any, value: BaseException, tb: Any) -> str:
    return "".join(traceback.format_exception(etype, value, tb)).rstrip()


async def run_code(shell: Any, code: str) -> tuple[bool, str, list[ImagePart], str]:
    """Run ``code`` in the shell's namespace the way a cell would (magics, ``!cmd`` and
    top-level await included) and return (ok, text, images, unshown): what it printed,
    displayed and raised shows in the cell as it happens; ``text`` and ``images`` are the
    model's copy, ``unshown`` the part of ``text`` the cell did not show (plain-text
    values), which is all the tool's card needs to add."""
    got = _Collected()
    pub = shell.display_pub
    real_publish = pub.publish

    def publish(data: dict[str, Any], metadata: Any = None, *args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("update"):
            got.add_bundle(data)
            if set(data) <= {"text/plain"}:
                got.unshown.append(str(data.get("text/plain", "")) + "\n")
                return None  # the tool's card shows this text: once is enough
        return real_publish(data, metadata, *args, **kwargs)

    saved_out, saved_err = sys.stdout, sys.stderr
    sys.stdout = _Capture(saved_out, got.text, got.budget)
    sys.stderr = _Capture(saved_err, got.text, got.budget)
    pub.publish = publish
    ok, stopped = True, False
    _State.stop_raised = False
    try:
        await _execute(shell, code, got)
    except (Exception, KeyboardInterrupt) as exc:
        ok = False
        stopped = isinstance(exc, KeyboardInterrupt) and _State.stop_raised
        tb = exc.__traceback__
        # Drop this module's frames: the person and the model care about their code.
        while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
            tb = tb.tb_next
        sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, tb
        got.text.append(format_exception(type(exc), exc, tb) + "\n")
        print(format_exception(type(exc), exc, tb), file=saved_err)
    finally:
        _flush_figures()
        try:
            del pub.publish
        except AttributeError:
            pub.publish = real_publish
        sys.stdout, sys.stderr = saved_out, saved_err
    if stopped:
        # The person's Stop (ROBUST-3): the call ends as a cancelled one and so does the
        # turn. Returned as a result, the turn would go on to ask the model again before
        # the cancel the front scheduled reached it (every time: the request went out
        # and was dropped, and on a loaded machine took the next turn's answer).
        raise asyncio.CancelledError
    text = "".join(got.text)
    if got.dropped_images:
        text += f"\n[{got.dropped_images} more images were not sent (at most {MAX_IMAGES})]"
    return ok, text, got.images, "".join(got.unshown)


def _flush_figures() -> None:
    """Show pending matplotlib figures now (the inline backend shows them after a cell)."""
    module = sys.modules.get("matplotlib_inline.backend_inline")
    if module is not None and "matplotlib.pyplot" in sys.modules:
        try:
            module.flush_figures()
        except Exception:
            pass


async def _execute(shell: Any, code: str, got: _Collected) -> None:
    source = shell.transform_cell(code)
    filename = shell.compile.cache(source)
    tree = ast.parse(source, filename=filename)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    flags = getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)
    ns = shell.user_ns
    body = compile(ast.Module(body=tree.body, type_ignores=[]), filename, "exec", flags=flags, dont_inherit=True)
    await _run(body, ns, shell)
    if last is not None:
        expr = compile(ast.Expression(last.value), filename, "eval", flags=flags, dont_inherit=True)
        value = await _run(expr, ns, shell)
        if value is not None:
            data, metadata = shell.display_formatter.format(value)
            shell.display_pub.publish(data, metadata)


@contextmanager
def user_code() -> Iterator[None]:
    """Synchronous user code runs inside: the stop button interrupts it with a
    KeyboardInterrupt, as in a normal cell. Also for code that only looks like reading —
    ``repr`` and display formatters of the namespace's objects are user code (ROBUST-3)."""
    # Set the flag before looking at the interrupt so that one side always sees the other.
    _State.sync_running, _State.stop_raised = True, False
    try:
        if _State.interrupted:
            _State.stop_raised = True
            raise KeyboardInterrupt
        yield
    finally:
        _State.sync_running = False


async def _run(code: Any, ns: dict[str, Any], shell: Any) -> Any:
    if code.co_flags & inspect.CO_COROUTINE:
        return await eval(code, shell.user_global_ns, ns)
    with user_code():
        return eval(code, shell.user_global_ns, ns)


def _interrupted(tool: str) -> BaseException:
    if _State.stop_raised:  # the person's Stop: the call and the turn end (run_code says why)
        return asyncio.CancelledError()
    return ToolError(f"Interrupted: {tool} was stopped while it ran the repr or display code of a value "
                     "(KeyboardInterrupt).")


@contextmanager
def cwd_importable() -> Iterator[None]:
    """The kernel's folder on ``sys.path`` while the model's code runs, as in any
    IPython kernel (before the first site-packages entry), and off it again after.

    The Crystal kernel keeps it off otherwise (TRUST-2, kernel.py ``ignore_cwd``): the
    host's own imports and plugin scan must not load a cloned repository's files. The
    code that runs here was approved, and imports from its folder are what it expects.
    In the magics the person's kernel has it already: nothing changes there."""
    if "" in sys.path:
        yield
        return
    index = next((i for i, entry in enumerate(sys.path)
                  if entry.rstrip("/").endswith(("site-packages", "dist-packages"))), 0)
    sys.path.insert(index, "")
    try:
        yield
    finally:
        if "" in sys.path:
            sys.path.remove("")


class PythonInput(ToolInput):
    code: str = Field(description="Python code (IPython syntax).")


class PythonTool(Tool[PythonInput]):
    name = "python"
    Input = PythonInput
    risk = Risk.EXECUTE
    # The code runs in this kernel's process, where no sandbox reaches (SANDBOX-1).
    runs_unsandboxed = "in the kernel"

    async def run(self, args: PythonInput, ctx: ToolContext) -> ToolResult:
        shell = shell_of(ctx)
        if not args.code.strip():
            raise ToolError("The code is empty.")
        from crystal_kernel.core.secrets import keys_withdrawn

        # TRUST-4: the code (and every process it starts) finds no model key in
        # os.environ. The Crystal kernel withdrew them for good already; in the magics
        # (the person's own kernel) they are out only while the tool runs.
        with keys_withdrawn(ctx.config), cwd_importable():
            ok, text, images, unshown = await run_code(shell, args.code)
        if not text.strip() and not images:
            text = "(no output)" if ok else text
        # The person saw the printed text, the displays and the traceback in the cell as
        # the code ran: the card adds only what the cell did not show (and, for a
        # failure, the exception's line), never a repeat of the output.
        error = "" if ok else next((ln for ln in reversed(text.splitlines()) if ln.strip()), "")
        shown = "\n".join(p for p in (unshown.rstrip("\n"), error) if p) or (
            "(no output)" if not text.strip() and not images else "(its output is shown in the cell)")
        return ToolResult(ok=ok, text=text, images=images, shown_text=shown, shown_images=[])


_REPR = reprlib.Repr()
_REPR.maxstring = 80
_REPR.maxother = 80
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 6
MAX_VARIABLES = 200


def short_repr(value: Any) -> str:
    try:
        text = _REPR.repr(value)
    except Exception as exc:
        text = f"<repr failed: {type(exc).__name__}>"
    text = " ".join(text.split())
    return text if len(text) <= 100 else text[:99] + "…"


class VariablesTool(Tool[EmptyInput]):
    name = "variables"
    Input = EmptyInput
    risk = Risk.READ

    async def run(self, args: EmptyInput, ctx: ToolContext) -> ToolResult:
        shell = shell_of(ctx)
        hidden = getattr(shell, "user_ns_hidden", {})
        names = [n for n in shell.user_ns if not n.startswith("_") and n not in hidden]
        if not names:
            return ToolResult(ok=True, text="The namespace has no user variables yet.")
        lines = []
        try:
            with user_code():  # a __repr__ is the namespace's code: the stop button stops it
                for name in sorted(names)[:MAX_VARIABLES]:
                    value = shell.user_ns[name]
                    if isinstance(value, types.ModuleType):
                        # Its name is what the model needs; its repr is a file path.
                        lines.append(f"{name}: module {value.__name__}")
                        continue
                    lines.append(f"{name}: {type(value).__name__} = {short_repr(value)}")
        except KeyboardInterrupt:
            raise _interrupted("variables") from None
        if len(names) > MAX_VARIABLES:
            lines.append(f"[{len(names) - MAX_VARIABLES} more names not listed]")
        return ToolResult(ok=True, text="\n".join(lines))


class CellOutputInput(ToolInput):
    n: int | None = Field(default=None, description="The execution count, as in Out[n].")


class CellOutputTool(Tool[CellOutputInput]):
    name = "cell_output"
    Input = CellOutputInput
    risk = Risk.READ

    async def run(self, args: CellOutputInput, ctx: ToolContext) -> ToolResult:
        shell = shell_of(ctx)
        try:
            with user_code():  # display formatters are the namespace's code (ROBUST-3)
                return self._output(shell, args)
        except KeyboardInterrupt:
            raise _interrupted("cell_output") from None

    def _output(self, shell: Any, args: CellOutputInput) -> ToolResult:
        out = shell.user_ns.get("Out") or {}
        if args.n is not None:
            if args.n not in out:
                known = ", ".join(str(k) for k in sorted(out)[-20:]) or "none"
                raise ToolError(f"Out[{args.n}] does not exist. Outputs exist for: {known}.")
            return _format_value(shell, out[args.n], f"Out[{args.n}]")
        value = getattr(sys, "last_value", None)
        last = max(out) if out else None
        failed_at = getattr(shell, _LAST_ERROR_COUNT, None)
        # The newer of the last output and the last error: after a failed cell the
        # model gets its traceback, not an older Out[n] (both fronts agree).
        if last is not None and (value is None or failed_at is None or failed_at < last):
            return _format_value(shell, out[last], f"Out[{last}]")
        if value is not None:
            stb = getattr(shell, "_last_traceback", None)
            text = _ANSI.sub("", "\n".join(stb)) if stb else format_exception(
                type(value), value, getattr(sys, "last_traceback", None))
            return ToolResult(ok=True, text="The last error:\n" + text)
        return ToolResult(ok=True, text="No cell has produced an output or an error yet.")


_LAST_ERROR_COUNT = "_crystal_last_error_count"


def track_cell_errors(shell: Any) -> None:
    """Remember the execution count of the last cell that failed (IPython's
    ``post_run_cell`` event), so ``cell_output {}`` can tell whether the last error is
    newer than the last ``Out[n]``. Once per shell: the magics' kernel, and the Crystal
    kernel at its first ``%%python`` cell (its prompt cells do not go through
    ``run_cell``; there ``Out`` only holds what ``%%python`` cells stored, NB-1)."""
    if getattr(shell, "_crystal_tracks_errors", False):
        return

    def after(result: Any) -> None:
        if result.error_in_exec is not None or result.error_before_exec is not None:
            setattr(shell, _LAST_ERROR_COUNT, result.execution_count or shell.execution_count)

    shell.events.register("post_run_cell", after)
    shell._crystal_tracks_errors = True


def _format_value(shell: Any, value: Any, label: str) -> ToolResult:
    data, _ = shell.display_formatter.format(value)
    got = _Collected()
    got.add_bundle(data)
    if got.images:
        text = f"{label}: {data.get('text/plain', '')}"
    else:
        text = f"{label}: {data.get('text/plain', short_repr(value))}"
    return ToolResult(ok=True, text=text, images=got.images)
