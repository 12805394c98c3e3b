"""Outputs that survive a page reload and a kernel restart (FORM-2).

Every output Crystal shows carries ``metadata.crystal = {"display": ID, "cell": CELL_ID}``
(the cell id JupyterLab sends with the execute request). A page reloaded while a turn
runs no longer follows that turn's messages (its cells lost their futures); the lab
extension (labextension/src/forms.ts) then puts each Crystal ``display_data`` /
``update_display_data`` into the cell the metadata names, so the card stops "waiting"
and the final answer appears.

A *live* output (a form waiting for a person, the ``/jobs`` Stop buttons) also carries
``metadata.crystal.live = true`` and ``metadata.crystal.stale``: the static bundle that
tells the truth once its kernel is gone. The extension opens a ``crystal.live`` comm when
it connects to a kernel (page load, kernel restart); the kernel answers with the display
ids that are still live and shows the waiting forms again (so a form lost by reloading
before saving comes back). Every live output the kernel does not list is replaced by its
``stale`` bundle, so a notebook saved with live widgets and reopened after a restart shows
no "Error displaying widget: model not found".

A cell whose turn is still running may not exist in the reloaded page at all: a
notebook never saved since the cell was typed is reloaded from a file without it. So
while a turn runs (:func:`running_cell`) the kernel keeps the cell's source and every
output it showed, in order; the ``crystal.live`` reply lists those cells (``running``),
the extension adds each one it lacks (at the end, with the same cell id and source),
and the kernel then shows all of the running cells' outputs again, which the extension
puts into them. When the turn ends this record is dropped: only a running cell is
brought back.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from crystal_kernel.jupyter import notebook_identity

Bundle = dict[str, Any]
COMM_TARGET = "crystal.live"

# display id -> (current bundle, metadata) of the live outputs of this kernel.
_LIVE: dict[str, tuple[Bundle, dict[str, Any]]] = {}
# cell id -> {"source": str, "displays": {display id: (bundle, metadata)}} of the cells
# whose turn runs now (insertion order is the order they were shown in).
_RUNNING: dict[str, dict[str, Any]] = {}
# Bounds on what a running cell keeps (its images are the big part).
MAX_KEPT_DISPLAYS = 500
# What the fronts connected to this kernel said they render (the lab extension says so
# when it opens the crystal.live comm): "streamDeltas" = answers streamed as appended
# text (render.py, STREAM_MIME), which only the lab extension renders.
_FRONT: dict[str, bool] = {"streamDeltas": False}


def new_display_id() -> str:
    """A display id: 64 random bits as 16 hex digits. Unique enough for one kernel's
    displays (and the one cell the lab extension looks in, forms.ts); each live update
    of a streamed answer carries it twice (metadata and transient), so a uuid4's 32
    digits cost ~1% of a long answer's iopub bytes (docs/benchmarks.md)."""
    return secrets.token_hex(8)


def stream_deltas() -> bool:
    """Whether a front that renders streamed answer deltas has connected to this kernel."""
    return _FRONT["streamDeltas"]


def _parent() -> dict[str, Any] | None:
    """The request the running code came from (its header, metadata and content)."""
    try:
        from IPython import get_ipython

        shell = get_ipython()
        kernel = getattr(shell, "kernel", None)
        return kernel.get_parent("shell") if kernel is not None else None
    except Exception:
        return None


def current_cell_id() -> str | None:
    """The notebook cell the running request came from (JupyterLab's ``cellId``)."""
    parent = _parent()
    if not parent:
        return None
    meta = parent.get("metadata") or {}
    return meta.get("cellId") or (parent.get("content") or {}).get("cell_id")


def metadata(display_id: str, cell: str | None, stale: Bundle | None) -> dict[str, Any]:
    info: dict[str, Any] = {"display": display_id}
    if cell:
        info["cell"] = cell
    session = notebook_identity.current()
    if session:  # the page keeps it in the notebook's metadata (notebook_identity.py)
        info["session"] = session
    if stale is not None:
        info["live"] = True
        info["stale"] = stale
    return {"crystal": info}


class LiveDisplay:
    """One display: shown once, updated in place; live while it has a ``stale`` bundle.

    A *streamed* display (an answer or its Thinking card while the text streams) ends
    with ``update(final=True)``, which carries the whole text. Where it is shown depends
    on who runs the cell:

    - a notebook cell (the request names its cell: JupyterLab, Notebook 7, VS Code, which
      apply every update): the first piece is its ``display_data`` and the final update
      replaces it in place, so the saved notebook holds one output with the whole text;
    - no cell (nbclient under nbconvert and papermill, ``jupyter execute``, scripts on
      jupyter_client, jupyter-mcp-server's execute tools): nobody watches it stream, so
      nothing is sent until the final update, which is its one ``display_data``. A client
      that ignores ``update_display_data`` then keeps the whole text, never a piece, and
      no output is ever left empty (no ``display_data`` without MIME types, which
      nbconvert warns about).
    """

    def __init__(self, bundle: Bundle, stale: Bundle | None = None, *, streamed: bool = False):
        self.id = new_display_id()
        self.cell = current_cell_id()
        # Shown whole at the end (class docstring): a streamed display outside a cell.
        self._deferred = streamed and not self.cell
        if not self._deferred:
            self._show(bundle, stale)

    def _show(self, bundle: Bundle, stale: Bundle | None) -> None:
        from IPython.display import display

        meta = metadata(self.id, self.cell, stale)
        display(bundle, raw=True, display_id=self.id, metadata=meta)
        self._track(bundle, meta, stale)

    def _track(self, bundle: Bundle, meta: dict[str, Any], stale: Bundle | None) -> None:
        if stale is not None:
            _LIVE[self.id] = (bundle, meta)
        else:
            _LIVE.pop(self.id, None)
        running = _RUNNING.get(self.cell or "")
        if running is not None:
            kept = running["displays"]
            if self.id in kept or len(kept) < MAX_KEPT_DISPLAYS:
                kept[self.id] = (bundle, meta)

    def update(self, bundle: Bundle, stale: Bundle | None = None, kept: Bundle | None = None, *,
               final: bool = False) -> None:
        """``kept``: what showing this output again (a reloaded page) sends, when
        ``bundle`` is only a part of it (a streamed answer's appended text). ``final``:
        the whole streamed text, which the output keeps."""
        from IPython.display import update_display

        if self._deferred:
            if final:
                self._deferred = False
                self._show(bundle, stale)
            return
        meta = metadata(self.id, self.cell, stale)
        update_display(bundle, raw=True, display_id=self.id, metadata=meta)
        self._track(kept if kept is not None and not final else bundle, meta, stale)


def live_ids() -> list[str]:
    return list(_LIVE)


def running_cells() -> list[dict[str, Any]]:
    """The cells whose turn runs now: ``{"cell": id, "source": text, "request": the
    execute request's msg_id, "count": its execution count}`` (a reloaded page ends the
    cell's ``[*]`` when the kernel goes idle for that request: its reply went to the
    page that sent it)."""
    return [{"cell": cell, "source": entry["source"], "request": entry.get("request"), "count": entry.get("count")}
            for cell, entry in _RUNNING.items()]


@contextmanager
def running_cell() -> Iterator[None]:
    """While a turn runs, keep its cell's source and outputs so that a reloaded page that
    lacks the cell gets it back (module docstring). Nothing is kept outside a notebook
    cell (no cell id)."""
    parent = _parent() or {}
    cell = current_cell_id()
    if not cell or cell in _RUNNING:
        yield
        return
    content = parent.get("content") or {}
    _RUNNING[cell] = {"source": str(content.get("code", "")), "displays": {},
                      "request": (parent.get("header") or {}).get("msg_id"), "count": _count(content)}
    try:
        yield
    finally:
        _RUNNING.pop(cell, None)


def _count(content: dict[str, Any]) -> int | None:
    """The running cell's execution count (the kernel counted it when the cell started)."""
    try:
        from IPython import get_ipython

        shell = get_ipython()
        count = int(shell.execution_count)
    except Exception:
        return None
    return count - 1 if content.get("store_history", True) else count


def republish() -> None:
    """Show again every output of a running cell and every live output (same display id:
    a page that has it replaces it, one that lost it gets it back through the lab
    extension)."""
    from IPython.display import display

    shown: set[str] = set()
    for entry in list(_RUNNING.values()):
        for did, (bundle, meta) in list(entry["displays"].items()):
            display(bundle, raw=True, display_id=did, metadata=meta)
            shown.add(did)
    for did, (bundle, meta) in list(_LIVE.items()):
        if did not in shown:
            display(bundle, raw=True, display_id=did, metadata=meta)


def _on_open(comm: Any, msg: Any) -> None:
    data = ((msg or {}).get("content") or {}).get("data") or {}
    if isinstance(data, dict) and data.get("streamDeltas") is True:
        _FRONT["streamDeltas"] = True
    if isinstance(data, dict) and "notebook" in data:
        notebook_identity.learn_from_front(data["notebook"])
        if data.get("identityOnly") is True:  # a rename: the page wants nothing back
            return
    # The list first: the extension adds the running cells it lacks, then the outputs
    # shown again find them (iopub keeps this order).
    comm.send({"live": live_ids(), "running": running_cells()})
    republish()


def register_comm_target(kernel: Any) -> bool:
    """Answer the lab extension's ``crystal.live`` comm on this kernel (once)."""
    manager = getattr(kernel, "comm_manager", None)
    if manager is None:
        return False
    if COMM_TARGET not in getattr(manager, "targets", {}):
        manager.register_target(COMM_TARGET, _on_open)
    return True
