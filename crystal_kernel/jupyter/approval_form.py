"""The approval form (``Allow once`` / ``Allow for session`` / ``Deny`` with a reason) and
the static summary it leaves once decided. widgets.WidgetInteraction shows and awaits it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from crystal_kernel.core.interaction import ApprovalRequest, PersonDecision
from crystal_kernel.jupyter import palette
from crystal_kernel.jupyter.cards import Bundle, esc, summarize_arguments
from crystal_kernel.jupyter.safe_html import NO_MATH, clean, html_bundle

# Shared with the question form (widgets.py).
MUTED = f"color:{palette.MUTED}"
BOX = "border:1px solid var(--jp-border-color1,#d0d7de);border-radius:4px;padding:4px 8px;margin:4px 0"
_MUTED, _BOX = MUTED, BOX


def form_html(w: Any, fragment: str) -> Any:
    """An HTML widget whose markup is cleaned (TRUST-1) and not typeset as math."""
    return w.HTML(clean(f'<div class="{NO_MATH}">{fragment}</div>'))


_html = form_html


_OUTCOME_TEXT = {"allow_once": "Allowed once", "allow_session": "Allowed for this session", "deny": "Denied"}


class ApprovalForm:
    """``Allow once`` / ``Allow for session`` / ``Deny`` (with an optional reason)."""

    def __init__(self, request: ApprovalRequest, on_done: Callable[[PersonDecision], None]):
        import ipywidgets as w

        self.request = request
        self.on_done = on_done
        self.finished = False
        self.reason = w.Text(value="", placeholder="Reason for denying (optional; the model reads it)",
                             layout=w.Layout(width="60%"))
        session_tip = (f"Allow {request.tool} calls matching {request.session_pattern!r} for the rest of the session"
                       if request.session_pattern else f"Allow every {request.tool} call for the rest of the session")
        self.allow_once = w.Button(description="Allow once", button_style="success")
        self.allow_session = w.Button(description="Allow for session", tooltip=session_tip,
                                      layout=w.Layout(width="auto"))
        self.deny = w.Button(description="Deny", button_style="danger")
        self.allow_once.on_click(lambda _b: self._finish(PersonDecision(outcome="allow_once")))
        self.allow_session.on_click(lambda _b: self._finish(PersonDecision(outcome="allow_session")))
        self.deny.on_click(lambda _b: self._finish(
            PersonDecision(outcome="deny", reason=self.reason.value.strip() or None)))
        self.widget = w.VBox([_html(w, self.request_html()), w.HBox([self.allow_once, self.allow_session, self.deny]),
                              self.reason], layout=w.Layout(border="1px solid #d0d7de", padding="4px 8px"))
        self.widget.add_class("crystal-form")  # the lab extension keeps focus off the running cell
        self.widget.add_class("crystal-widget")  # and colours its buttons to read (contrast)

    def _finish(self, decision: PersonDecision) -> None:
        if self.finished:
            return
        self.finished = True
        self.on_done(decision)

    def verdict_text(self) -> str:
        verdict = self.request.verdict
        return verdict.line(suggests=True) if verdict is not None else ""

    def request_html(self) -> str:
        """The whole call, unfolded and uncut (approval_view.py): a person judges what
        actually runs, padding and line breaks included, and a write's diff."""
        from crystal_kernel.jupyter.approval_view import CHANGE_TOOLS, call_html, preview_block

        r = self.request
        where = f"risk {r.risk} · authority {r.authority}" + (" · external tool" if r.external else "")
        verdict = self.verdict_text()
        verdict_html = f'<div style="color:{palette.WARN}">{esc(verdict)}</div>' if verdict else ""
        # SANDBOX-1: the host's line for a call no sandbox confines (the python tool).
        if r.sandbox_note:
            verdict_html = (f'<div class="crystal-approval-unsandboxed" style="color:{palette.WARN}">'
                            f"{esc(r.sandbox_note)}</div>{verdict_html}")
        # The change itself (notebook_edit's per-cell diff), open so the person reads it.
        # Whole, never cut to its end (approval_view.preview_html).
        # edit/write: the preview is the diff against the file, drawn inside the call.
        preview_html = preview_block(r.preview) if r.preview and r.tool not in CHANGE_TOOLS else ""
        return (f"<div><b>Allow {esc(r.tool)}?</b> <code>{esc(summarize_arguments(r.tool, r.arguments))}</code></div>"
                f'<div style="{_MUTED}">{esc(where)}</div>{verdict_html}{preview_html}'
                f'<div class="crystal-approval-call">{call_html(r.tool, r.arguments, r.preview)}</div>')

    def summary_bundle(self, decision: PersonDecision | None, note: str = "") -> Bundle:
        r = self.request
        what = f"{r.tool} {summarize_arguments(r.tool, r.arguments)}"
        if decision is None:
            plain = f"Approval for {what}: no decision. {note}".strip()
        else:
            plain = f"{_OUTCOME_TEXT[decision.outcome]}: {what}"
            if decision.reason:
                plain += f" (reason: {decision.reason})"
        verdict = self.verdict_text()
        if verdict:
            plain += f"\n{verdict}"
        colour = "#1a7f37" if decision is not None and decision.outcome != "deny" else "#cf222e"
        # The decision in words, the call as code (a command's $ is never math).
        lead, _, rest = plain.partition(f": {what}")
        body = (f"{esc(lead)}: <code>{esc(what)}</code>{esc(rest)}" if _ else esc(plain)).replace("\n", "<br>")
        return html_bundle(plain, f'<div class="{NO_MATH}" style="{_BOX};border-left:4px solid {colour}">{body}</div>')
