"""The kernel's Trust button (TRUST-2): an untrusted workspace ``.crystal/mcp.json`` or
exec tool set is shown once per kernel and file version, as a note saying how to trust
it and a Trust button. A click trusts the file exactly as it was shown (a file that
changed since is refused) and rebuilds the catalog, so the tools are offered from the
next model request. Only the person's click writes trust; no tool can.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from crystal_kernel.core.trust import TrustStore, WorkspaceFile, file_digest, workspace_states

if TYPE_CHECKING:
    from crystal_kernel.host.session import Session


def offer_trust(session: Session, output: Any) -> list[Any]:
    """Show a note and a Trust button for each untrusted workspace file not shown yet in
    this kernel. Returns the buttons (tests click them through the kernel's comms)."""
    import ipywidgets as w

    from crystal_kernel.jupyter.cards import note_bundle

    try:
        pending = [s for s in workspace_states(session.home, session.workspace) if not s.trusted]
    except Exception:  # a listing problem must never break a cell
        return []
    offered = session.trust_offered
    buttons = []
    for state in pending:
        key = (str(state.path), state.digest)
        if key in offered:
            continue
        offered.add(key)
        output.show(note_bundle(state.note()))
        button = w.Button(description="Trust", tooltip=str(state.path), button_style="warning",
                          icon="shield", layout=w.Layout(width="auto"))
        button.add_class("crystal-widget")  # the lab extension's button colours (contrast)
        button.on_click(lambda b, s=state: _trust(session, s, b))
        output.show(button._repr_mimebundle_())
        buttons.append(button)
    return buttons


def _trust(session: Session, state: WorkspaceFile, button: Any) -> None:
    """The click: trust the version that was shown, never a later one."""
    button.disabled = True
    if file_digest(state.kind, state.path) != state.digest:
        button.description = "Changed since shown: not trusted"
        return
    try:
        TrustStore(session.home).trust(state.kind, state.path)
    except Exception as exc:  # one line on the button; the cell already ended
        button.description = f"Not trusted: {str(exc)[:80]}"
        return
    session.refresh_system()
    button.description = "Trusted"
    button.button_style = "success"
