"""What a slash command answers, for every front (SPEC §11)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class CommandResult:
    """Markdown-ish text for every front, plus optional structured data for rich fronts."""

    text: str
    data: dict[str, Any] = field(default_factory=dict)
    # A front-specific hint: "jobs" (render a job table), "logs" (a live log view), "sessions",
    # "help" (data["rows"]: the commands, for a front that lays them out itself).
    kind: str = "text"
