"""What a notebook front keeps beside its session: the session never holds it.

:class:`NotebookState` is what the Crystal kernel and the magics attach to their
session (the IPython shell, the notebook's path, live editing: the host's
:class:`~crystal_kernel.tools.base.NotebookAttachment`, which the tools reach through
their ToolContext) plus what only the notebook's page needs: the Trust cards already
shown (TRUST-2, jupyter/trust_view.py). One per attached session: a fork or a new
session starts with no card shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from crystal_kernel.tools.base import NotebookAttachment

if TYPE_CHECKING:
    from crystal_kernel.host.session import Session


@dataclass
class NotebookState(NotebookAttachment):
    """A notebook's side of one session."""

    # Untrusted workspace files a Trust card was shown for: (path, digest) pairs.
    trust_offered: set[tuple[str, str]] = field(default_factory=set)

    def first_offer(self, key: tuple[str, str]) -> bool:
        """True the first time a Trust card for this (path, digest) is offered here;
        False after: each card is shown once per session."""
        if key in self.trust_offered:
            return False
        self.trust_offered.add(key)
        return True


def attach_notebook(session: Session, shell: Any, notebook: str | None) -> NotebookState:
    """Give a session what only a notebook has: the IPython shell (notebook tools), the
    notebook's path, and live editing of notebooks open in JupyterLab."""
    from crystal_kernel.jupyter import notebook_plugin
    from crystal_kernel.jupyter.live_notebook import live_edit

    notebook_plugin.register()  # the notebook tools come from this front
    state = NotebookState(shell=shell, path=notebook, live_edit=live_edit)
    session.attach_notebook(state)
    return state
