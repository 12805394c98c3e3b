"""What only a notebook front has, as the host and the tools see it (no Jupyter import):
a notebook front attaches a :class:`NotebookAttachment` to its session
(``Session.attach_notebook``); the tools get its shell and live editing through their
ToolContext. A leaf module the kernel imports at start (no pydantic: the kernel answers
before it imports the host)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Applies a notebook_edit (its arguments) to the shared document of a notebook open with
# real-time collaboration; None or {"live": False} when it is not open (jupyter/live_notebook.py).
LiveNotebookEdit = Callable[[Path, "dict[str, Any]"], Awaitable["dict[str, Any] | None"]]


@dataclass
class NotebookAttachment:
    """What a notebook front attaches (the Jupyter front's own state,
    jupyter/notebook_front.py, extends it): the IPython shell (typed loosely: below the
    jupyter front nothing imports IPython), the notebook's path (named in the system
    text) and live editing of notebooks open in JupyterLab."""

    shell: Any = None
    path: str | None = None
    live_edit: LiveNotebookEdit | None = None
