"""notebook_run: execute a notebook headless and write its outputs back (SPEC §12).

Which cells run: a fresh kernel has none of the state earlier cells build, so running
"cell 7" alone would mostly fail with NameErrors. With ``cell_ids`` the notebook runs
from its first cell through the last requested cell; without, all of it. Execution
stops at the first failing cell. Every executed cell's outputs are written back.

The run happens in a child process (:mod:`crystal_kernel.jupyter.nbrun`, nbclient in a
fresh kernel of the notebook's kernelspec), started through the same supervisor as
bash: bounded by ``timeout_seconds`` and killed with its kernel on a hard timeout, on
cancellation and when the host dies. The child writes a result file; the host merges
the outputs into the notebook as it is on disk then (by cell id), keeping the file's
layout, and writes it atomically. This module imports no Jupyter library.

Write-back is bounded (:data:`CELL_OUTPUT_BYTES` per cell, :data:`NOTEBOOK_OUTPUT_BYTES`
per run): the child cuts outputs as they arrive, a cut cell ends with a stderr output
saying what was cut, and the tool result names the cut cells, so the notebook stays one
``read`` can open whatever a cell prints.
"""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import json
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic import Field

from crystal_kernel.core.errors import ToolError
from crystal_kernel.core.fsutil import atomic_write_text
from crystal_kernel.tools._files import display_path
from crystal_kernel.tools._notebook import Notebook, is_notebook, load_notebook, render_cell
from crystal_kernel.tools._sandbox import tool_sandbox
from crystal_kernel.tools.base import Classification, Risk, Tool, ToolContext, ToolInput, ToolResult, truncate_output
from crystal_kernel.tools.bash import _environment, run_supervised

# The child gets this long after timeout_seconds to stop its kernel and write its result.
HARD_STOP_GRACE = 15.0
CHILD_OUTPUT_CHARS = 4000
# Bytes of output written back per executed cell and per run (outputs past them are cut).
CELL_OUTPUT_BYTES = 1 << 20
NOTEBOOK_OUTPUT_BYTES = 8 << 20
# Sessions whose scratch folder (IPython's and matplotlib's) this process keeps at once.
KEPT_SESSION_FOLDERS = 16


class NotebookRunInput(ToolInput):
    path: str = Field(description="The .ipynb file.")
    cell_ids: list[str] | None = Field(
        default=None, description="Run through the last of these (default: all).")
    timeout_seconds: float | None = Field(
        default=None, gt=0, description="Default: the bashTimeoutSeconds setting (usually 120).")


class NotebookRunTool(Tool[NotebookRunInput]):
    name = "notebook_run"
    Input = NotebookRunInput
    risk = Risk.EXECUTE
    path_arguments = ("path",)
    sandboxed = True

    def classify(self, args: NotebookRunInput, ctx: ToolContext) -> Classification:
        base = super().classify(args, ctx)
        return dataclasses.replace(base, risk=Risk.EXECUTE)  # keeps host_owned (TRUST-3)

    async def run(self, args: NotebookRunInput, ctx: ToolContext) -> ToolResult:
        path = ctx.access.resolve(args.path, write=True)
        shown = display_path(path, ctx.workspace)
        if not is_notebook(path):
            raise ToolError(f"'{args.path}' is not a .ipynb notebook.")
        if not path.is_file():
            raise ToolError(f"'{args.path}' does not exist." if not path.exists() else
                            f"'{args.path}' is not a regular file.")
        notebook = await asyncio.to_thread(load_notebook, path, shown)
        if notebook.kernel_name() == "crystal":
            raise ToolError(f"'{shown}' is a Crystal notebook: its cells are prompts to the agent, not code. "
                            "notebook_run runs code notebooks.")
        upto = _last_cell(notebook, args.cell_ids)
        timeout = args.timeout_seconds or ctx.config.bash_timeout_seconds
        folder = Path(tempfile.mkdtemp(prefix="crystal-nbrun-"))
        try:
            result_file = folder / "result.json"
            sandbox = tool_sandbox(ctx)
            env = _environment(ctx.config)
            # SANDBOX-1: the connection file goes to the run's temp folder, and without TCP
            # the kernel talks over unix sockets there.
            env["JUPYTER_RUNTIME_DIR"] = str(folder)
            kept = kernel_folders(ctx.session_id, env)
            env.update(kept)
            if sandbox is not None:
                # SANDBOX-2: the run's folder and the kernel's are the host's temp folders,
                # which bubblewrap's private /tmp does not show: granted by name.
                sandbox = sandbox.with_allowed(str(folder), *{str(Path(p).parent) for p in kept.values()})
            ipc = ["--ipc"] if sandbox is not None and not sandbox.network else []
            command = "exec " + shlex.join([sys.executable, "-m", "crystal_kernel.jupyter.nbrun", str(path),
                                            str(result_file), "--upto", str(upto), "--timeout", f"{timeout:g}",
                                            "--cell-limit", str(CELL_OUTPUT_BYTES),
                                            "--notebook-limit", str(NOTEBOOK_OUTPUT_BYTES), *ipc])
            started = time.monotonic()
            done = await run_supervised(command, cwd=path.parent, env=env,
                                        timeout=timeout + HARD_STOP_GRACE, limit=CHILD_OUTPUT_CHARS,
                                        workspace=ctx.workspace, sandbox=sandbox)
            seconds = time.monotonic() - started
            if done.timed_out:
                raise ToolError(f"The run of '{shown}' did not finish within {timeout:g} seconds and was "
                                "stopped with its kernel; no outputs were written. Give a larger timeout_seconds.")
            try:
                result = json.loads(result_file.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                raise ToolError(f"The notebook runner failed (exit code {done.code}):\n{done.text}") from None
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        if result.get("error"):
            raise ToolError(f"Cannot run '{shown}': {result['error']}")
        merged, missing = await asyncio.to_thread(_merge, path, shown, result["cells"])
        return _summary(merged, shown, result, upto, seconds, missing, timeout, ctx)


# session id -> its scratch folder (oldest first), removed when this process exits.
_session_folders: dict[str, Path] = {}


def kernel_folders(session_id: str, env: dict[str, str]) -> dict[str, str]:
    """SANDBOX-2: where the run's kernel keeps IPython's profile and
    matplotlib's config and caches: a temp folder of the session's own, kept across its
    runs (matplotlib's font cache is built once). The person's home is read-only in the
    sandbox, and IPython must make ``~/.ipython/profile_default`` at its first start: in a
    home that never saw IPython the kernel died before it answered. A folder the person
    names in the environment (``IPYTHONDIR``, ``MPLCONFIGDIR``) is theirs and kept."""
    wanted = [name for name in ("IPYTHONDIR", "MPLCONFIGDIR") if not env.get(name)]
    if not wanted:
        return {}
    folder = _session_folders.get(session_id)
    if folder is None or not folder.is_dir():
        while len(_session_folders) >= KEPT_SESSION_FOLDERS:
            shutil.rmtree(_session_folders.pop(next(iter(_session_folders))), ignore_errors=True)
        folder = Path(tempfile.mkdtemp(prefix="crystal-notebook-"))  # 0700, a fresh name
        _session_folders[session_id] = folder
    names = {"IPYTHONDIR": "ipython", "MPLCONFIGDIR": "matplotlib"}
    return {name: str(folder / names[name]) for name in wanted}


def _remove_session_folders() -> None:
    for folder in _session_folders.values():
        shutil.rmtree(folder, ignore_errors=True)
    _session_folders.clear()


atexit.register(_remove_session_folders)


def _last_cell(notebook: Notebook, cell_ids: list[str] | None) -> int:
    """The number (from 1) of the last cell to run."""
    if not cell_ids:
        return len(notebook.cells)
    return max(notebook.find(cell_id, None) for cell_id in cell_ids) + 1


def _merge(path: Path, shown: str, cells: list[dict[str, Any]]) -> tuple[Notebook, list[int]]:
    """Write the executed cells' outputs into the notebook as it is on disk now. A cell
    is matched by id (or, without ids, by position); cells changed or removed during the
    run are reported rather than overwritten."""
    notebook = load_notebook(path, shown)
    by_id = {c.get("id"): i for i, c in enumerate(notebook.cells) if "id" in c}
    missing: list[int] = []
    for entry in cells:
        index = by_id.get(entry.get("id")) if entry.get("id") else entry["index"]
        if index is None or index >= len(notebook.cells) or notebook.cells[index].get("cell_type") != "code":
            missing.append(entry["index"] + 1)
            continue
        cell = notebook.cells[index]
        cell["execution_count"] = entry.get("execution_count")
        cell["outputs"] = entry.get("outputs") or []
    text = notebook.dumps()
    if text != notebook.text:
        atomic_write_text(path, text)
    return notebook, missing


def _summary(notebook: Notebook, shown: str, result: dict[str, Any], upto: int, seconds: float,
             missing: list[int], timeout: float, ctx: ToolContext) -> ToolResult:
    ran = result["cells"]
    stopped = result.get("stopped")
    by_id = {c.get("id"): i for i, c in enumerate(notebook.cells) if "id" in c}
    positions = []
    for entry in ran:
        index = by_id.get(entry.get("id")) if entry.get("id") else entry["index"]
        if index is not None and index < len(notebook.cells):
            positions.append(index)
    kernel = result.get("kernel") or "default"
    head = (f"Ran {shown} in a fresh {kernel} kernel: cells 1-{upto}, {len(ran)} code cells executed "
            f"in {seconds:.1f} s; outputs written to the notebook.")
    failed = None
    if stopped:
        number = stopped["index"] + 1
        why = {"error": "it raised an error", "timeout": f"the time ran out ({timeout:g} s)", "kernel": f"the kernel died ({stopped.get('text', '')})"}
        head += f"\nStopped at cell {number}: {why.get(stopped['reason'], stopped['reason'])}."
        if number < upto:
            head += f" Cells {number + 1}-{upto} did not run (their old outputs are unchanged)."
        failed = next((i for i in positions if i == stopped["index"]), None)
    if missing:
        head += f"\nCells {', '.join(map(str, missing))} changed during the run; their new outputs were not written."
    cuts = [c for c in result.get("cut") or [] if isinstance(c, dict)]
    if cuts:
        listed = ", ".join(str(int(c.get("index", 0)) + 1) for c in cuts[:50])
        head += (f"\nOutput was cut to keep the notebook bounded (at most {CELL_OUTPUT_BYTES} bytes per cell, "
                 f"{NOTEBOOK_OUTPUT_BYTES} per run): the rest of cells {listed} was left out; each says so "
                 "in its output.")
    blocks = [head]
    if failed is not None:
        blocks.append("Failed cell:\n" + render_cell(failed + 1, notebook.cells[failed], [], False))
    rest = [i for i in positions if i != failed and notebook.cells[i].get("outputs")]
    if rest:
        blocks.append("Outputs:\n" + "\n\n".join(render_cell(i + 1, notebook.cells[i], [], False) for i in rest))
    ok = not stopped and not missing
    text = "\n\n".join(blocks)
    return ToolResult(ok=ok, text=truncate_output(text, ctx.config.tool_output_limit))

