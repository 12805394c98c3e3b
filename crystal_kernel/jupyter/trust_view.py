"""The kernel's Trust card (TRUST-2): an untrusted workspace ``.crystal/mcp.json``, exec
tool set, review prompt or cassette is shown once per session and file version, as one
card that names the file (relative to the workspace; the full path in its tooltip),
says what is left unused until it is trusted and what trusting it lets Crystal do (the
commands it would start, the addresses it would connect to: host/trust_scope.py), with
a Trust button. A click trusts the file exactly as it was shown (a file that changed
since is refused), rebuilds the catalog so the tools are offered from the next model
request, and updates the card to say it is trusted. Only the person's click writes
trust; no tool can.

The host says the same in a one-line note when it builds the catalog; the turn's
renderer leaves out a note this card already shows (:func:`covered_notes`), so the
person reads it once.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from crystal_kernel.core.trust import TrustStore, WorkspaceFile, file_digest, workspace_states
from crystal_kernel.host.trust_scope import what_trusting_enables
from crystal_kernel.jupyter import palette
from crystal_kernel.jupyter.cards import Bundle
from crystal_kernel.jupyter.safe_html import NO_MATH, esc, html_bundle

if TYPE_CHECKING:
    from pathlib import Path

    from crystal_kernel.host.session import Session
    from crystal_kernel.jupyter.notebook_front import NotebookState

_AMBER = palette.WARN
_GREEN = palette.OK
_RED = palette.ERROR
_BOX = (f"border:1px solid {palette.BORDER};border-left:4px solid {{accent}};border-radius:4px;"
        f"padding:4px 8px;margin:4px 0;font-size:90%;color:{palette.TEXT}")
_LIST = "margin:2px 0 2px 1.2em;padding:0;font-family:var(--jp-code-font-family,monospace)"


def shown_path(path: Path, workspace: Path) -> str:
    """The file as a person finds it: relative to the workspace when inside it."""
    try:
        rel = os.path.relpath(path, os.path.realpath(workspace))
    except ValueError:
        return str(path)
    return str(path) if rel.startswith("..") else rel


def trust_card(state: WorkspaceFile, workspace: Path, *, outcome: str = "offered") -> Bundle:
    """The card for one file. ``outcome``: "offered" (not trusted yet, the button below),
    "trusted" (after the click), "changed" (the file changed after it was shown), or
    "failed: REASON"."""
    name = shown_path(state.path, workspace)
    what = f"this workspace's {state.label}"
    enables = what_trusting_enables(state)
    if outcome == "trusted":
        accent, head = _GREEN, f"Trusted: {what} {name}."
        lead, tail = "From the next request Crystal may:", ""
    elif outcome == "changed":
        accent, head = _RED, f"Not trusted: {what} {name} changed after it was shown here."
        lead, tail = "", "Run /tools to see it as it is now."
    elif outcome.startswith("failed"):
        accent, head = _RED, f"Not trusted: {what} {name}: {outcome.partition(': ')[2]}"
        lead, tail = "", ""
    elif state.problem:
        accent, head = _RED, f"{what[0].upper()}{what[1:]} {name} cannot be trusted: {state.problem}."
        lead, tail = "", f"Until it can, {state.left_unused}."
    else:
        why = "changed since you trusted it" if state.changed else "is not trusted yet"
        accent, head = _AMBER, f"{what[0].upper()}{what[1:]} {name} {why}: {state.left_unused}."
        lead = "Trusting it lets Crystal:"
        tail = (f"Read the file first: the button trusts it exactly as it is now (a later change asks "
                f"again); /trust {name} in a cell does the same.")
    items = enables if lead else []
    plain = [head, *([lead] if lead else []), *(f"  - {line}" for line in items), *([tail] if tail else [])]
    html = [f'<div class="{NO_MATH}"><div class="crystal-trust" data-state="{esc(outcome.split(":")[0])}" '
            f'title="{esc(str(state.path))}" style="{_BOX.format(accent=accent)}">',
            f"<div><b>{esc(head)}</b></div>"]
    if lead:
        html.append(f"<div>{esc(lead)}</div>")
        html.append(f'<ul style="{_LIST}">' + "".join(f"<li>{esc(line)}</li>" for line in items) + "</ul>")
    if tail:
        html.append(f"<div>{esc(tail)}</div>")
    html.append("</div></div>")
    return html_bundle("\n".join(plain), "".join(html))


def _pending(session: Session) -> list[WorkspaceFile]:
    try:
        return [s for s in workspace_states(session.home, session.workspace) if not s.trusted]
    except Exception:  # a listing problem must never break a cell
        return []


def offer_trust(session: Session, notebook: NotebookState, output: Any) -> list[Any]:
    """Show a card and a Trust button for each untrusted workspace file not shown yet in
    this session (``notebook``: the front's side of it, which remembers the cards shown).
    Returns the buttons (tests click them through the kernel's comms)."""
    import ipywidgets as w

    buttons = []
    for state in _pending(session):
        if not notebook.first_offer((str(state.path), state.digest)):
            continue
        card = output.show(trust_card(state, session.workspace))
        if state.problem:  # nothing to trust as it is: no button
            continue
        button = w.Button(description="Trust", tooltip=str(state.path), button_style="warning",
                          icon="shield", layout=w.Layout(width="auto"))
        button.add_class("crystal-widget")  # the lab extension's button colours (contrast)
        button.on_click(lambda b, s=state, c=card: _trust(session, s, b, c))
        output.show(button._repr_mimebundle_())
        buttons.append(button)
    return buttons


def covered_notes(session: Session, notebook: NotebookState) -> set[str]:
    """The host's one-line notes about files a Trust card in this session already
    shows: the turn leaves them out, so nothing is said twice."""
    return {s.note() for s in _pending(session) if (str(s.path), s.digest) in notebook.trust_offered}


def _trust(session: Session, state: WorkspaceFile, button: Any, card: Any) -> None:
    """The click: trust the version that was shown, never a later one; the card and
    the button say what happened."""
    button.disabled = True
    if file_digest(state.kind, state.path) != state.digest:
        button.description = "Changed since shown: not trusted"
        card.update(trust_card(state, session.workspace, outcome="changed"))
        return
    try:
        TrustStore(session.home).trust(state.kind, state.path)
    except Exception as exc:  # one line on the button; the cell already ended
        button.description = "Not trusted"
        card.update(trust_card(state, session.workspace, outcome=f"failed: {str(exc)[:200]}"))
        return
    session.refresh_system()
    button.description = "Trusted"
    button.button_style = "success"
    card.update(trust_card(state, session.workspace, outcome="trusted"))
