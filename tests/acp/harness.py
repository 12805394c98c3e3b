"""Drive `crystal acp` in a real subprocess with the ACP SDK's own client side.

The model is the loopback server (crystal_kernel.testing.llm_server) in the test process;
the agent reaches it over 127.0.0.1 through the real OpenAI SDK.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, spawn_agent_process
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    RequestPermissionResponse,
)

CRYSTAL = str(Path(sys.executable).parent / "crystal")


def model_env(server: Any) -> dict[str, str]:
    return {"CRYSTAL_PROVIDER": "openai", "CRYSTAL_BASE_URL": server.base_url, "CRYSTAL_MODEL": "gpt-test",
            "OPENAI_API_KEY": "k"}


class RecordingClient:
    """An ACP client that records every update and answers permission requests from a
    script of option ids ("allow_once", "allow_session", "reject", or "cancel")."""

    def __init__(self, permissions: list[str] | None = None, form_answers: list[Any] | None = None):
        self.updates: list[tuple[str, Any]] = []
        self.permission_requests: list[tuple[Any, list[Any]]] = []
        self.permissions = deque(permissions or [])
        self.elicitations: list[tuple[str, Any]] = []
        self.form_answers = deque(form_answers or [])
        self.update_event = asyncio.Event()
        # An async hook run before a permission request is answered (e.g. to cancel).
        self.on_permission: Any = None

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        self.update_event.set()

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any):
        self.permission_requests.append((tool_call, options))
        if self.on_permission is not None:
            await self.on_permission(session_id, tool_call)
        answer = self.permissions.popleft() if self.permissions else "reject"
        if answer == "cancel":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=answer))

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any):
        from acp.schema import AcceptElicitationResponse, DeclineElicitationResponse

        self.elicitations.append((message, mode))
        answer = self.form_answers.popleft() if self.form_answers else None
        if answer is None:
            return DeclineElicitationResponse(action="decline")
        return AcceptElicitationResponse(action="accept", content=answer)

    # -- reading what arrived ------------------------------------------------------------
    def kinds(self, session_id: str | None = None) -> list[str]:
        return [u.session_update for s, u in self.updates if session_id in (None, s)]

    def of(self, kind: str, session_id: str | None = None) -> list[Any]:
        return [u for s, u in self.updates if u.session_update == kind and session_id in (None, s)]

    def agent_text(self, session_id: str | None = None) -> str:
        return "".join(u.content.text for u in self.of("agent_message_chunk", session_id)
                       if getattr(u.content, "type", "") == "text")

    def tool_updates(self, call_id: str) -> list[Any]:
        return [u for _, u in self.updates
                if u.session_update in ("tool_call", "tool_call_update") and u.tool_call_id == call_id]

    async def wait_for(self, predicate, timeout: float = 20.0) -> None:
        async def loop() -> None:
            while not predicate():
                self.update_event.clear()
                await self.update_event.wait()

        await asyncio.wait_for(loop(), timeout)


def capabilities(*, elicitation: bool = False) -> ClientCapabilities:
    data: dict[str, Any] = {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}
    if elicitation:
        data["elicitation"] = {"form": {}}
    return ClientCapabilities.model_validate(data)


@asynccontextmanager
async def crystal_acp(client: RecordingClient, server: Any, *, cwd: Path, args: tuple[str, ...] = (),
                      elicitation: bool = False, stderr_path: Path | None = None,
                      env_extra: dict[str, str] | None = None) -> AsyncIterator[tuple[Any, Any, Any]]:
    """Start `crystal acp`, initialize, and yield (connection, process, initialize response).
    ``env_extra`` is set last in the agent's environment."""
    env = dict(os.environ)
    env.update(model_env(server))
    env.update(env_extra or {})
    stderr_path = stderr_path or cwd.parent / "acp-stderr.log"
    with open(stderr_path, "ab") as err:
        async with spawn_agent_process(client, CRYSTAL, "acp", *args, env=env, cwd=cwd,
                                       transport_kwargs={"stderr": err, "shutdown_timeout": 10.0},
                                       use_unstable_protocol=True) as (conn, proc):
            init = await asyncio.wait_for(
                conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=capabilities(elicitation=elicitation)),
                30,
            )
            yield conn, proc, init


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
