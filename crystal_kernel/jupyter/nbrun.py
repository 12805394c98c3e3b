"""The child process of the notebook_run tool: execute a notebook's code cells headless
with nbclient in a fresh kernel of the notebook's kernelspec.

    python -m crystal_kernel.jupyter.nbrun NOTEBOOK RESULT_JSON --upto N --timeout SECONDS
        [--cell-limit BYTES] [--notebook-limit BYTES]

Runs the code cells among the first N cells, in order, in the notebook's folder, and
stops at the first cell that fails or when the time is up. It never writes the
notebook: it writes RESULT_JSON (each executed cell's index, id, execution_count and
outputs, and why it stopped) and the host merges that into the file, keeping the file's
layout (crystal_kernel.tools.notebook_run). The host starts it under the jobs supervisor,
so the kernel it starts dies with it on a hard timeout or when the session ends.

Outputs are bounded while they arrive, not after (:class:`OutputBudget`): a cell keeps
at most ``--cell-limit`` bytes of output and the whole run ``--notebook-limit``; the
rest of a stream is cut where the budget ends and other outputs that do not fit are
left out. Each cut cell ends with one stderr output saying what was cut, and the result
lists the cuts, so a cell printing 500 MB neither grows this process nor the notebook.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported when a notebook runs, not when this module loads
    from nbclient import NotebookClient
    from nbformat import NotebookNode

# Set for the kernel of a run: the magics skip %%crystal turns there (magics.py).
NOTEBOOK_RUN_ENV = "CRYSTAL_NOTEBOOK_RUN"
# Seconds kept back from the budget for shutting the kernel down and writing the result.
SHUTDOWN_RESERVE = 3.0
# Default bounds on the outputs kept (the tool passes its own).
CELL_LIMIT = 1 << 20
NOTEBOOK_LIMIT = 8 << 20


def _output_size(content: dict[str, Any]) -> int:
    """About how many bytes an output adds to the notebook file."""
    if "text" in content and isinstance(content["text"], str):
        return len(content["text"])
    size = 0
    for key in ("data", "traceback", "evalue", "ename"):
        value = content.get(key)
        if isinstance(value, dict):
            size += sum(len(v) if isinstance(v, str) else len(json.dumps(v)) for v in value.values())
        elif isinstance(value, list):
            size += sum(len(str(v)) for v in value)
        elif isinstance(value, str):
            size += len(value)
    return size


class OutputBudget:
    """What the run may still keep, per cell and for the notebook, and what was cut."""

    def __init__(self, cell_limit: int, notebook_limit: int) -> None:
        self.cell_limit, self.notebook_limit = cell_limit, notebook_limit
        self.kept: dict[int, int] = {}
        self.total = 0
        self.cut: dict[int, int] = {}

    def admit(self, cell_index: int, content: dict[str, Any]) -> dict[str, Any] | None:
        """The content to keep (a stream's text cut to what fits), or None to leave it out."""
        size = _output_size(content)
        room = min(self.cell_limit - self.kept.get(cell_index, 0), self.notebook_limit - self.total)
        if size <= room:
            self._keep(cell_index, size)
            return content
        self.cut[cell_index] = self.cut.get(cell_index, 0) + size - max(room, 0)
        if room > 0 and isinstance(content.get("text"), str):
            self._keep(cell_index, room)
            return dict(content, text=content["text"][:room])
        return None

    def _keep(self, cell_index: int, size: int) -> None:
        self.kept[cell_index] = self.kept.get(cell_index, 0) + size
        self.total += size

    def cleared(self, cell_index: int) -> None:
        """The cell's outputs were cleared: what they held is free again."""
        self.total -= self.kept.pop(cell_index, 0)

    def note(self, cell_index: int) -> dict[str, Any] | None:
        """The stderr output that ends a cut cell (None when nothing was cut)."""
        cut = self.cut.get(cell_index)
        if not cut:
            return None
        # The count is what reached this process: an IPython kernel stops sending sooner.
        if self.kept.get(cell_index, 0) >= self.cell_limit:
            which = f"a cell keeps at most {self.cell_limit} bytes of output"
        else:
            which = f"a run keeps at most {self.notebook_limit} bytes of output"
        text = f"[Crystal cut the rest of this cell's output: {which}.]\n"
        return {"output_type": "stream", "name": "stderr", "text": text}


# Run in an IPython kernel at startup (``exec_lines``): each cell's stdout and stderr stop
# being sent past the limit (wrapped at every cell start: IPython puts a stream's write
# back after each cell), so a cell printing 500 MB does not fill the transport's queue
# in this process before the budget can cut it. One byte more than the cell limit is let
# through, so the runner sees that the cell was cut and says so.
_KERNEL_BOUND = """
def _crystal_bound(limit):
    import sys
    state = {"n": 0}
    def wrap(stream):
        write = stream.write
        if getattr(write, "_crystal", False):
            return
        def bounded(text):
            room = limit - state["n"]
            if len(text) <= room:
                state["n"] += len(text)
                return write(text)
            if room > 0:
                state["n"] = limit
                write(text[:room])
            return len(text)
        bounded._crystal = True
        stream.write = bounded
    def before(*args):
        state["n"] = 0
        wrap(sys.stdout)
        wrap(sys.stderr)
    get_ipython().events.register("pre_run_cell", before)
_crystal_bound(%d)
del _crystal_bound
"""


def kernel_bound_arguments(nb: Any, cell_limit: int) -> list[str]:
    """Kernel command-line arguments that bound each cell's streams at the source, for
    an IPython kernel (other kernels are bounded by the runner alone)."""
    spec = nb.metadata.get("kernelspec", {}) or {}
    language = str(spec.get("language") or nb.metadata.get("language_info", {}).get("name") or "")
    if language.lower() != "python" and not str(spec.get("name", "")).startswith("python"):
        return []
    code = base64.b64encode((_KERNEL_BOUND % (cell_limit + 1)).encode()).decode()
    return [f"--InteractiveShellApp.exec_lines=import base64; exec(base64.b64decode('{code}').decode())"]


def bounded_client(budget: OutputBudget) -> type[NotebookClient]:
    """A NotebookClient class whose outputs go through ``budget`` as they arrive."""
    from nbclient import NotebookClient  # loaded when a notebook runs, like run()'s imports

    class BoundedClient(NotebookClient):
        def output(self, outs: list[NotebookNode], msg: dict[str, Any], display_id: str | None,
                   cell_index: int) -> NotebookNode | None:
            if self.clear_before_next_output:
                budget.cleared(cell_index)
            content = msg.get("content") or {}
            if msg.get("msg_type") in ("stream", "display_data", "execute_result", "error"):
                admitted = budget.admit(cell_index, content)
                if admitted is None:
                    return None
                if admitted is not content:
                    msg = dict(msg, content=admitted)
            return super().output(outs, msg, display_id, cell_index)

        def clear_output(self, outs: list[NotebookNode], msg: dict[str, Any], cell_index: int) -> None:
            super().clear_output(outs, msg, cell_index)
            if not (msg.get("content") or {}).get("wait"):
                budget.cleared(cell_index)

        def _update_display_id(self, display_id: str, msg: dict[str, Any]) -> None:
            # An update replaces an output already kept; a huge one is left out.
            if _output_size(msg.get("content") or {}) <= budget.cell_limit:
                super()._update_display_id(display_id, msg)

    return BoundedClient


def run(notebook: Path, upto: int, timeout: float, ipc: bool = False, cell_limit: int = CELL_LIMIT,
        notebook_limit: int = NOTEBOOK_LIMIT) -> dict[str, Any]:
    import nbformat
    from jupyter_client.kernelspec import NoSuchKernel
    from nbclient.exceptions import CellControlSignal, CellExecutionError, CellTimeoutError, DeadKernelError
    from traitlets.config import Config as TraitletsConfig

    os.environ[NOTEBOOK_RUN_ENV] = "1"  # the kernel inherits it
    deadline = time.monotonic() + max(1.0, timeout - SHUTDOWN_RESERVE)
    nb = nbformat.read(notebook, as_version=4)
    result: dict[str, Any] = {"cells": [], "stopped": None, "error": None,
                              "kernel": nb.metadata.get("kernelspec", {}).get("name", "")}
    settings = TraitletsConfig()
    if ipc:
        # SANDBOX-1: a sandbox without TCP; unix sockets next to the connection file.
        settings.KernelManager.transport = "ipc"
    # The kernel is disposable: stop it at once (a cell that timed out may still be busy).
    budget = OutputBudget(cell_limit, notebook_limit)
    client = bounded_client(budget)(nb, config=settings,
                                                    extra_arguments=kernel_bound_arguments(nb, cell_limit), timeout=timeout, allow_errors=False, record_timing=False,
                            shutdown_kernel="immediate", startup_timeout=int(max(5, min(60, timeout))),
                            resources={"metadata": {"path": str(notebook.parent)}})
    executed: list[int] = []
    try:
        with client.setup_kernel():
            for index, cell in enumerate(nb.cells[:upto]):
                if cell.cell_type != "code":
                    continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    result["stopped"] = {"index": index, "reason": "timeout"}
                    break
                client.timeout = max(1, int(remaining))
                executed.append(index)
                try:
                    client.execute_cell(cell, index)
                except CellTimeoutError:
                    result["stopped"] = {"index": index, "reason": "timeout"}
                    break
                except CellExecutionError:
                    result["stopped"] = {"index": index, "reason": "error"}
                    break
                except (DeadKernelError, CellControlSignal) as exc:
                    result["stopped"] = {"index": index, "reason": "kernel", "text": str(exc)[:500]}
                    break
    except NoSuchKernel as exc:
        from jupyter_client.kernelspec import KernelSpecManager

        names = ", ".join(sorted(KernelSpecManager().find_kernel_specs()))
        result["error"] = f"No kernel named '{exc.name}' is installed here (installed: {names})."
    except RuntimeError as exc:  # kernel startup timed out or died while starting
        result["error"] = f"The kernel did not start: {exc}"[:500]
    # As nbformat writes them to disk: multi-line strings as lists, no transient data.
    from nbformat.v4.rwbase import split_lines, strip_transient

    for index in executed:
        note = budget.note(index)
        if note is not None:
            nb.cells[index].setdefault("outputs", []).append(nbformat.from_dict(note))
    split_lines(nb)
    strip_transient(nb)
    for index in executed:
        cell = nb.cells[index]
        result["cells"].append({"index": index, "id": cell.get("id"), "execution_count": cell.get("execution_count"),
                                "outputs": cell.get("outputs", [])})
    result["cut"] = [{"index": i, "bytes": n} for i, n in sorted(budget.cut.items())]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m crystal_kernel.jupyter.nbrun")
    parser.add_argument("notebook", type=Path)
    parser.add_argument("result", type=Path)
    parser.add_argument("--upto", type=int, required=True)
    parser.add_argument("--timeout", type=float, required=True)
    parser.add_argument("--ipc", action="store_true", help="talk to the kernel over unix sockets, not TCP")
    parser.add_argument("--cell-limit", type=int, default=CELL_LIMIT, help="bytes of output kept per cell")
    parser.add_argument("--notebook-limit", type=int, default=NOTEBOOK_LIMIT,
                        help="bytes of output kept for the whole run")
    args = parser.parse_args(argv)
    try:
        result = run(args.notebook, args.upto, args.timeout, ipc=args.ipc, cell_limit=args.cell_limit,
                     notebook_limit=args.notebook_limit)
    except Exception as exc:  # reported to the model as one line, not a traceback
        result = {"cells": [], "stopped": None, "error": f"{type(exc).__name__}: {exc}"[:1000]}
    tmp = args.result.with_name(args.result.name + ".tmp")
    tmp.write_text(json.dumps(result, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, args.result)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # The kernel is stopped and the result written. A normal interpreter exit then waits
    # about 15 s here (jupyter_client's and zmq's teardown); nothing is left to clean up
    # (the supervisor reaps whatever might remain), so leave at once.
    os._exit(code)
