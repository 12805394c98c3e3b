"""``GET jobs``, ``GET jobs/<session>/<job>/log?offset=&limit=`` and
``POST jobs/<session>/<job>/stop`` over the files in jobfiles.py, in every workspace
server/workspaces.py finds (or the one ``?workspace=`` names)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tornado import web

from crystal_kernel.host.store import SessionStore
from crystal_kernel.jupyter.server.base import CrystalHandler
from crystal_kernel.jupyter.server.jobfiles import MAX_JOBS_LISTED, MAX_LOG_CHUNK, list_jobs, read_log, stop_job
from crystal_kernel.jupyter.server.workspaces import notebooks_by_session, relative


def list_jobs_in(root: Path, workspaces: list[Path]) -> dict[str, Any]:
    """The jobs of every workspace, newest first. Job ids count per session (j1, j2, …),
    so each row also says its session: its topic, notebook and workspace."""
    rows: list[dict[str, Any]] = []
    for folder in workspaces:
        jobs = list_jobs(folder)["jobs"]
        if not jobs:
            continue
        topics = {s.id: s.topic for s in SessionStore(folder).list()}
        notebooks = notebooks_by_session(root, folder)
        for row in jobs:
            row.update({"workspace": relative(root, folder), "sessionTopic": topics.get(row["session"]),
                        "notebook": notebooks.get(row["session"])})
        rows += jobs
    rows.sort(key=lambda r: r.get("started") or "", reverse=True)
    return {"workspace": str(workspaces[0]) if workspaces else str(root), "jobs": rows[:MAX_JOBS_LISTED]}


class JobsHandler(CrystalHandler):
    @web.authenticated
    async def get(self) -> None:
        await self.guarded(lambda: list_jobs_in(self.root, self.workspaces()))


class JobLogHandler(CrystalHandler):
    @web.authenticated
    async def get(self, session: str, job: str) -> None:
        def log() -> dict:
            raw = self.get_argument("offset", None)
            offset = None if raw in (None, "") else self.int_argument("offset", 0)
            limit = self.int_argument("limit", 64 * 1024, minimum=1, maximum=MAX_LOG_CHUNK)
            return read_log(self.job_workspace(session, job), session, job, offset, limit)

        await self.guarded(log)


class JobStopHandler(CrystalHandler):
    @web.authenticated
    async def post(self, session: str, job: str) -> None:
        await self.guarded(lambda: stop_job(self.job_workspace(session, job), session, job))
