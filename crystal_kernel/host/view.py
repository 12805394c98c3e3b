"""The narrow view of a session that the host's helpers take instead of the session.

Review (host/review.py), side requests (host/sidecall.py) and the tool source
(host/tool_sources.py) read a few of a session's parts; typed against this protocol
they never import :mod:`crystal_kernel.host.session`, which imports them: no import
cycle, so none hidden in a function. :class:`~crystal_kernel.host.session.Session`
satisfies it (mypy checks that where a session is passed).
"""

from __future__ import annotations

from typing import Protocol

from crystal_kernel.core.messages import Message
from crystal_kernel.host.flags import ProcessFlags
from crystal_kernel.host.state import Usage
from crystal_kernel.prompts.context import PromptSource


class SessionView(PromptSource, Protocol):
    """What review, side requests and tool sources may read of a session (what composing
    their prompts reads, and more), and the one thing they may do to it: queue a note for
    the person."""

    @property
    def flags(self) -> ProcessFlags: ...

    @property
    def person_present(self) -> bool: ...

    @property
    def questions_available(self) -> bool: ...

    @property
    def notebook(self) -> bool: ...

    @property
    def transcript(self) -> list[Message]: ...

    @property
    def usage(self) -> Usage: ...

    @property
    def review_baseline(self) -> str | None: ...


class PersonSeat(SessionView, Protocol):
    """A session whose person flag the recorded-person helpers may switch: under replay
    with nobody there, the cassette takes the person's seat (host/recorded_person.py)."""

    person_present: bool

    def refresh_system(self) -> None: ...
