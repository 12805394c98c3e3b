"""``GET sessions``, ``GET sessions/<id>`` and ``GET status?session=<id>`` over the
readers in server/transcripts.py."""

from __future__ import annotations

from typing import Any

from tornado import web

from crystal_kernel.core.errors import UserError
from crystal_kernel.jupyter.server.base import CrystalHandler
from crystal_kernel.jupyter.server.transcripts import list_sessions, session_status, session_transcript


class SessionsHandler(CrystalHandler):
    @web.authenticated
    async def get(self) -> None:
        await self.guarded(lambda: list_sessions(self.workspace(), self.workspaces(), self.root, self.kernel_homes()))


class SessionHandler(CrystalHandler):
    @web.authenticated
    async def get(self, session_id: str) -> None:
        await self.guarded(lambda: session_transcript(self.session_workspace(session_id), session_id))


class StatusHandler(CrystalHandler):
    @web.authenticated
    async def get(self) -> None:
        def status() -> dict[str, Any]:
            session_id = self.get_argument("session", "")
            if not session_id:
                raise UserError("'session' is required: the id of a Crystal session.")
            return session_status(self.session_workspace(session_id), self.home, session_id)

        await self.guarded(status)
