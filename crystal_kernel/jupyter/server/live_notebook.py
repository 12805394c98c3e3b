"""``POST crystal/api/notebook-edit``: a notebook_edit applied to the notebook's shared
document when it is open in JupyterLab with real-time collaboration
(``jupyter-collaboration``: the server's ``jupyter_server_ydoc`` extension).

The change goes into the live Y document, so every open view shows it at once and the
person's changes that are not saved yet (they live in the same document) are kept; the
collaboration extension saves the document to disk itself. Cells are updated
granularly (``YNotebook.set`` keeps every unchanged cell as it is).

Body: ``{"path": "<absolute or root-relative .ipynb>", "action": …, "cell_id"?, "index"?,
"source"?, "cell_type"?}`` (SPEC §12 notebook_edit). Reply: ``{"live": true, "summary",
"diff"}``, or ``{"live": false, "reason"}`` when there is no shared document to edit (no
collaboration extension, or nobody has the notebook open): the caller then writes the
file. A bad edit is a 400 with the tool's own message.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from tornado import web

from crystal_kernel.core.errors import ToolError, UserError
from crystal_kernel.jupyter.server.base import CrystalHandler, inside
from crystal_kernel.tools._notebook import Notebook, is_notebook
from crystal_kernel.tools._notebook_edit import apply_edit


def ydoc_extension(serverapp: Any) -> Any:
    """The running ``jupyter_server_ydoc`` extension app, or None."""
    manager = getattr(serverapp, "extension_manager", None)
    apps = getattr(manager, "extension_apps", {}) or {}
    for app in apps.get("jupyter_server_ydoc", ()):
        if not getattr(app, "disable_rtc", False):
            return app
    return None


class LiveNotebookEditHandler(CrystalHandler):
    @web.authenticated
    async def post(self) -> None:
        await self.guarded(self._edit)

    async def _edit(self) -> dict[str, Any]:
        body = self.json_body()
        path = body.get("path")
        if not isinstance(path, str) or not path:
            raise UserError("'path' must name a notebook.")
        resolved = inside(self.root, self.root / path)
        if not is_notebook(resolved):
            raise UserError(f"'{path}' is not a .ipynb notebook.")
        rel = resolved.relative_to(self.root).as_posix()
        ydoc = ydoc_extension(self.serverapp)
        if ydoc is None:
            return {"live": False, "reason": "real-time collaboration (jupyter-collaboration) is not running"}
        doc = await ydoc.get_document(path=rel, content_type="notebook", file_format="json", copy=False)
        if doc is None:
            return {"live": False, "reason": "the notebook is not open"}
        before = doc.get()
        notebook = Notebook(copy.deepcopy(before))
        shown = Path(rel).name if "/" not in rel else rel
        try:
            change = apply_edit(notebook, shown, str(body.get("action")), cell_id=body.get("cell_id"),
                                index=body.get("index"), source=body.get("source"), cell_type=body.get("cell_type"))
        except ToolError as exc:
            raise UserError(str(exc)) from None
        # Nothing awaited between reading and writing: no other change can come between.
        doc.set(notebook.data)
        return {"live": True, "summary": change.summary, "diff": change.diff}
