"""``GET jobs``, ``GET jobs/<session>/<job>/log?offset=&limit=`` and
``POST jobs/<session>/<job>/stop`` over the files in jobfiles.py, in every workspace
server/workspaces.py finds (or the one ``?workspace=`` names)."""

from __future__ import annotations

from typing import Any

from tornado import web

from crystal_kernel.jupyter.server.base import CrystalHandler
from crystal_kernel.jupyter.server.jobfiles import MAX_LOG_CHUNK, list_jobs_in, read_log, stop_job


class JobsHandler(CrystalHandler):
    @web.authenticated
    async def get(self) -> None:
        await self.guarded(lambda: list_jobs_in(self.root, self.workspaces()))


class JobLogHandler(CrystalHandler):
    @web.authenticated
    async def get(self, session: str, job: str) -> None:
        def log() -> dict[str, Any]:
            raw = self.get_argument("offset", None)
            offset = None if raw in (None, "") else self.int_argument("offset", 0)
            limit = self.int_argument("limit", 64 * 1024, minimum=1, maximum=MAX_LOG_CHUNK)
            return read_log(self.job_workspace(session, job), session, job, offset, limit)

        await self.guarded(log)


class JobStopHandler(CrystalHandler):
    @web.authenticated
    async def post(self, session: str, job: str) -> None:
        await self.guarded(lambda: stop_job(self.job_workspace(session, job), session, job))
