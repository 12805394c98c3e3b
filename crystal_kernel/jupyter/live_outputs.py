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
"""

from __future__ import annotations

import uuid
from typing import Any

Bundle = dict[str, Any]
COMM_TARGET = "crystal.live"

# display id -> (current bundle, metadata) of the live outputs of this kernel.
_LIVE: dict[str, tuple[Bundle, dict[str, Any]]] = {}


def current_cell_id() -> str | None:
    """The notebook cell the running request came from (JupyterLab's ``cellId``)."""
    try:
        from IPython import get_ipython

        shell = get_ipython()
        kernel = getattr(shell, "kernel", None)
        parent = kernel.get_parent("shell") if kernel is not None else None
    except Exception:
        return None
    if not parent:
        return None
    meta = parent.get("metadata") or {}
    return meta.get("cellId") or (parent.get("content") or {}).get("cell_id")


def metadata(display_id: str, cell: str | None, stale: Bundle | None) -> dict[str, Any]:
    info: dict[str, Any] = {"display": display_id}
    if cell:
        info["cell"] = cell
    if stale is not None:
        info["live"] = True
        info["stale"] = stale
    return {"crystal": info}


class LiveDisplay:
    """One display: shown once, updated in place; live while it has a ``stale`` bundle."""

    def __init__(self, bundle: Bundle, stale: Bundle | None = None):
        from IPython.display import display

        self.id = uuid.uuid4().hex
        self.cell = current_cell_id()
        self._display = display
        meta = metadata(self.id, self.cell, stale)
        display(bundle, raw=True, display_id=self.id, metadata=meta)
        self._track(bundle, meta, stale)

    def _track(self, bundle: Bundle, meta: dict[str, Any], stale: Bundle | None) -> None:
        if stale is not None:
            _LIVE[self.id] = (bundle, meta)
        else:
            _LIVE.pop(self.id, None)

    def update(self, bundle: Bundle, stale: Bundle | None = None) -> None:
        from IPython.display import update_display

        meta = metadata(self.id, self.cell, stale)
        update_display(bundle, raw=True, display_id=self.id, metadata=meta)
        self._track(bundle, meta, stale)


def live_ids() -> list[str]:
    return list(_LIVE)


def republish() -> None:
    """Show every live output again (same display id: a page that has it replaces it,
    one that lost it gets it back through the lab extension)."""
    from IPython.display import display

    for did, (bundle, meta) in list(_LIVE.items()):
        display(bundle, raw=True, display_id=did, metadata=meta)


def _on_open(comm: Any, msg: Any) -> None:
    republish()
    comm.send({"live": live_ids()})


def register_comm_target(kernel: Any) -> bool:
    """Answer the lab extension's ``crystal.live`` comm on this kernel (once)."""
    manager = getattr(kernel, "comm_manager", None)
    if manager is None:
        return False
    if COMM_TARGET not in getattr(manager, "targets", {}):
        manager.register_target(COMM_TARGET, _on_open)
    return True
