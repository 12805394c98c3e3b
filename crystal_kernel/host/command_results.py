"""The union of a slash command's answers (SPEC §11): the kinds in core/commands.py, and
the fork, whose answer is the new session the front continues in.

Each front that runs commands matches :data:`CommandResult` and ends in ``assert_never``
(acp/commands.py ``command_markdown``, cli/interactive.py ``Repl._command``,
jupyter/cell_commands.py ``show_result``): a kind added here fails type checking in each
of them until it is handled (tests/host/test_ops_exhaustive.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from crystal_kernel.core.commands import (
    HelpResult,
    JobsResult,
    LogsResult,
    Resumed,
    SessionsResult,
    TextResult,
    UsageResult,
)

if TYPE_CHECKING:
    from crystal_kernel.host.session import Session


@dataclass(frozen=True)
class Forked:
    """``/fork``: the front continues in ``session``, a copy; the old session stays saved."""

    text: str
    session: Session
    kind: ClassVar[str] = "fork"

    @property
    def data(self) -> dict[str, Any]:
        """The fork's id, by its wire name."""
        return {"sessionId": self.session.id}


#: Every answer of a slash command. Adding a member fails ``mypy`` in every front that
#: runs commands until it handles the new kind (tests/host/test_ops_exhaustive.py).
CommandResult = TextResult | HelpResult | JobsResult | LogsResult | SessionsResult | UsageResult | Resumed | Forked

__all__ = ["CommandResult", "Forked", "HelpResult", "JobsResult", "LogsResult", "Resumed", "SessionsResult",
           "TextResult", "UsageResult"]
