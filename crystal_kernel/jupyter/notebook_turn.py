"""One agent turn drawn in the current notebook cell: the one driver the Crystal kernel
and the ``%crystal`` magics share.

It renders the turn's events (status line, notes, tool cards, forms), attaches ``@path``
mentions, answers questions and approvals through live forms when someone is there (or
the cassette's recorded person under replay), and ends with a :class:`TurnOutcome`. The
fronts differ only in how they report it: the kernel as its execute reply
(:class:`CellOutcome`), the magics by raising (``magics_sync.raise_for``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from crystal_kernel.core.messages import Part
    from crystal_kernel.host.loop import Turn
    from crystal_kernel.host.session import Session
    from crystal_kernel.jupyter.notebook_front import NotebookState
    from crystal_kernel.jupyter.widgets import WidgetInteraction

KERNEL_HELP = """
In this kernel:
Tab                            completes /commands, their arguments and @paths
@path                          attaches that file's content to the turn
%%python (as the first line)   the cell is your own Python, run in this kernel's namespace
                               (the agent's python tool sees it); never sent as a prompt
Stop (interrupt)               ends the turn; background jobs keep running
/parameter [NAME [VALUE]]      set (or show) a parameter; later cells use it as {NAME}
                               (papermill -p NAME VALUE writes these lines)"""


@dataclass
class TurnOutcome:
    """How a turn ended: the renderer's stop reason, the last answer's text, errors."""

    stop_reason: str | None
    text: str
    errors: list[str] = field(default_factory=list)


@dataclass
class CellOutcome:
    """What the kernel's execute reply says about a cell."""

    status: str = "ok"
    ename: str = ""
    evalue: str = ""

    @classmethod
    def error(cls, ename: str, evalue: str) -> CellOutcome:
        return cls("error", ename, evalue)

    @classmethod
    def of_turn(cls, outcome: TurnOutcome) -> CellOutcome:
        if outcome.stop_reason == "cancelled":
            return cls.error("KeyboardInterrupt", "The turn was interrupted.")
        if outcome.stop_reason == "error":
            return cls.error("CrystalError", outcome.errors[0] if outcome.errors else "The turn failed.")
        return cls()


def final_text(session: Session, start: int) -> str:
    """The text of the turn's last answer (history is never shortened by compaction)."""
    for message in reversed(session.history[start:]):
        if message.role == "assistant":
            return message.text()
    return ""


async def run_notebook_turn(session: Session, text: str, *, notes: list[str], interactive: bool,
                            ask_timeout: float | None, log: Any, trust_cards: NotebookState | None,
                            track: Callable[[Turn | None], None], stopped: Callable[[], bool] = lambda: False,
                            person_cells: str | None = None) -> TurnOutcome:
    """Run one turn of ``session`` on ``text`` and draw it in the current cell.

    ``track(turn)`` is called with the running turn (and with None when it ended) so the
    front can cancel it from its interrupt handler; ``stopped()`` says a stop arrived
    before the turn could be cancelled. ``person_cells``: the note on the person's own
    ``%%python`` cells since the last turn (NB-1, person_cells.py), sent to the model after
    the cell's text. ``trust_cards``: the front's side of the session, to show Trust
    cards in (TRUST-2; None: none shown). Cancelling the calling task ends the turn the
    normal way: the partial answer is kept and shown as interrupted.
    """
    from crystal_kernel.core.ops import UserTurn
    from crystal_kernel.host.commands import submit
    from crystal_kernel.host.mentions import attach_mentions
    from crystal_kernel.jupyter.fix_cell import after_fixes
    from crystal_kernel.jupyter.render import IPythonOutput, Renderer, status_of
    from crystal_kernel.jupyter.replayed_forms import turn_interaction
    from crystal_kernel.jupyter.widgets import live_forms

    output = IPythonOutput()
    # Every caller reports a failed turn as the cell's error (the kernel's error output,
    # the magics' CrystalError): shown once, there.
    renderer = Renderer(output, cell_reports_errors=True)
    # A Fix with Crystal turn runs in this session: the cell waits its turn (and its
    # status line then counts the fix's tokens).
    await after_fixes(session, output)
    renderer.start(status_of(session))
    prompt, mention_notes = attach_mentions(session, text)
    if person_cells:
        prompt = with_person_cells(prompt, person_cells)
    for note in [*notes, *mention_notes]:
        renderer.show_note(note)
    if trust_cards is not None:
        from crystal_kernel.jupyter.trust_view import covered_notes
        from crystal_kernel.jupyter.trust_view import offer_trust as offer

        offer(session, trust_cards, output)  # TRUST-2: untrusted workspace config, with a Trust button
        renderer.covered_notes = covered_notes(session, trust_cards)  # the card says it: once
    live: WidgetInteraction | None = None
    if interactive:
        live = live_forms(session, output, ask_timeout=ask_timeout, before_ask=renderer.close, log=log)
    # Nobody there under replay: the cassette's recorded person answers; recording: the
    # person's answers are kept in the cassette (host/recorded_person.py).
    interaction = turn_interaction(session, live, output, renderer.close)
    turn = await submit(session, UserTurn(prompt=prompt), person=interaction)
    start = len(session.history)
    track(turn)
    try:
        # A stop that lands before the turn's task exists is seen by the consumer.
        consumer = asyncio.ensure_future(_consume(turn, renderer, stopped))
        try:
            await asyncio.shield(consumer)
        except asyncio.CancelledError:
            # The cell was cancelled (ipykernel's own SIGINT handler): end the turn the
            # normal way so the partial answer is kept and shown as interrupted.
            if turn._task is None:
                consumer.cancel()
            turn.cancel()
            try:
                await consumer
            except asyncio.CancelledError:
                pass
        if renderer.stop_reason is None:  # stopped before the model was asked
            renderer.stop_reason = "cancelled"
            renderer.show_note("Interrupted before the model was asked.")
    finally:
        track(None)
        renderer.close()
    return TurnOutcome(renderer.stop_reason, final_text(session, start), renderer.errors)


def with_person_cells(prompt: str | list[Part], note: str) -> list[Part]:
    """The prompt with the note on the person's ``%%python`` cells after it (NB-1): a part
    of its own, like an attached file, so the cell's text stays the first part."""
    from crystal_kernel.core.messages import TextPart

    parts: list[Part] = [TextPart(text=prompt)] if isinstance(prompt, str) else list(prompt)
    return [*parts, TextPart(text=note)]


async def _consume(turn: Any, renderer: Any, stopped: Callable[[], bool]) -> None:
    if stopped():
        return
    async for event in turn:
        renderer.render(event)
