"""The child process of the notebook_run tool: execute a notebook's code cells headless
with nbclient in a fresh kernel of the notebook's kernelspec.

    python -m crystal_kernel.jupyter.nbrun NOTEBOOK RESULT_JSON --upto N --timeout SECONDS

Runs the code cells among the first N cells, in order, in the notebook's folder, and
stops at the first cell that fails or when the time is up. It never writes the
notebook: it writes RESULT_JSON (each executed cell's index, id, execution_count and
outputs, and why it stopped) and the host merges that into the file, keeping the file's
layout (crystal_kernel.tools.notebook_run). The host starts it under the jobs supervisor,
so the kernel it starts dies with it on a hard timeout or when the session ends.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

# Set for the kernel of a run: the magics skip %%crystal turns there (magics.py).
NOTEBOOK_RUN_ENV = "CRYSTAL_NOTEBOOK_RUN"
# Seconds kept back from the budget for shutting the kernel down and writing the result.
SHUTDOWN_RESERVE = 3.0


def run(notebook: Path, upto: int, timeout: float, ipc: bool = False) -> dict[str, Any]:
    import nbformat
    from jupyter_client.kernelspec import NoSuchKernel
    from nbclient import NotebookClient
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
    client = NotebookClient(nb, config=settings, timeout=timeout, allow_errors=False, record_timing=False,
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

    split_lines(nb)
    strip_transient(nb)
    for index in executed:
        cell = nb.cells[index]
        result["cells"].append({"index": index, "id": cell.get("id"), "execution_count": cell.get("execution_count"),
                                "outputs": cell.get("outputs", [])})
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m crystal_kernel.jupyter.nbrun")
    parser.add_argument("notebook", type=Path)
    parser.add_argument("result", type=Path)
    parser.add_argument("--upto", type=int, required=True)
    parser.add_argument("--timeout", type=float, required=True)
    parser.add_argument("--ipc", action="store_true", help="talk to the kernel over unix sockets, not TCP")
    args = parser.parse_args(argv)
    try:
        result = run(args.notebook, args.upto, args.timeout, ipc=args.ipc)
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
