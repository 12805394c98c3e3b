"""The ACP agent: ACP sessions are Crystal sessions, prompts are turns.

- ``session/new`` opens a session in the client's cwd (or ``--workspace``);
  ``session/load`` resumes a saved one and replays its conversation as updates;
  ``session/resume`` resumes without the replay; ``session/list`` lists saved sessions;
  ``session/close`` stops the session's jobs and tool processes.
- ``session/prompt`` runs one turn: text deltas become agent message chunks, tool calls
  become tool-call updates (kind, locations, diffs), the todo list becomes a plan, and
  approvals become ``session/request_permission``. A prompt that is a slash command runs
  it (``/resume`` and ``/fork`` excepted: the client owns the session list), also behind
  a client's system note or chat mention (acp/commands.py); its answer is Markdown.
- Session modes are Plan and Work; the approval mode is a session config option (a
  ``mode`` option mirrors the session mode for clients that prefer config options).
- ``session/cancel`` cancels the turn: the partial answer is kept and tool processes die.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp import (
    PROTOCOL_VERSION,
    RequestError,
    update_agent_message_text,
)
from acp.helpers import update_agent_thought_text, update_available_commands, update_current_mode
from acp.schema import (
    AcpMcpServer,
    AgentCapabilities,
    AuthenticateResponse,
    CloseSessionResponse,
    ConfigOptionUpdate,
    ForkSessionResponse,
    HttpMcpServer,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    McpServerStdio,
    NewSessionResponse,
    PromptResponse,
    ResumeSessionResponse,
    SessionInfo,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
    SseMcpServer,
    Usage,
)
from acp.schema import StopReason as AcpStopReason

from crystal_kernel import __version__
from crystal_kernel.acp.checks import client_cwd, client_folders, one_line, shown
from crystal_kernel.acp.commands import command_line, command_markdown
from crystal_kernel.acp.interaction import AcpInteraction
from crystal_kernel.acp.mapping import (
    client_servers,
    plan_update,
    prompt_parts,
    replay_updates,
)
from crystal_kernel.acp.options import available_commands, config_options, mode_state
from crystal_kernel.acp.updates import TurnUpdates
from crystal_kernel.core.errors import UnknownSession, UserError
from crystal_kernel.core.events import StopReason
from crystal_kernel.core.messages import TextPart
from crystal_kernel.core.ops import UserTurn
from crystal_kernel.core.paths import home_dir
from crystal_kernel.host.bootstrap import SessionOptions, open_session
from crystal_kernel.host.session import ProcessFlags, Session
from crystal_kernel.host.store import SessionStore

if TYPE_CHECKING:
    from crystal_kernel.host.loop import Turn

# The turn's stopReason as ACP says it (an error is answered as a JSON-RPC error instead).
STOP_REASONS: dict[StopReason, AcpStopReason] = {
    "end_turn": "end_turn", "max_steps": "max_turn_requests", "cancelled": "cancelled",
    "max_tokens": "max_tokens", "refusal": "refusal", "error": "end_turn"}
LIST_PAGE = 100
RESOURCE_NOT_FOUND = -32002  # ACP's error code for an unknown session id (session/load, session/resume)
# The MCP servers a client may pass with a session (mapping.client_servers reads them).
McpServers = list[HttpMcpServer | SseMcpServer | AcpMcpServer | McpServerStdio] | None


def _user_error(exc: Exception) -> RequestError:
    """A person's bad input: JSON-RPC invalid params carrying the one-line English error;
    a session id that names no saved session is ACP's -32002, resource not found."""
    if isinstance(exc, UnknownSession):
        return RequestError(RESOURCE_NOT_FOUND, one_line(str(exc)))
    return RequestError(-32602, one_line(str(exc)))


@dataclass
class AgentOptions:
    """What ``crystal acp`` was started with; every session gets the same."""

    workspace: Path | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    flags: ProcessFlags = field(default_factory=ProcessFlags)


@dataclass
class AcpSession:
    session: Session
    interaction: AcpInteraction | None = None
    turn: Turn | None = None
    # call id -> set once the call's tool_call update was sent (see AcpInteraction).
    announced: dict[str, asyncio.Event] = field(default_factory=dict)

    def announced_event(self, call_id: str) -> asyncio.Event:
        return self.announced.setdefault(call_id, asyncio.Event())


class CrystalAgent:
    """Implements the ``acp.Agent`` protocol on the Crystal host."""

    def __init__(self, options: AgentOptions | None = None):
        self.options = options or AgentOptions()
        self.conn: Any = None
        self.sessions: dict[str, AcpSession] = {}
        self.client_capabilities: Any = None
        self._background: set[asyncio.Future[Any]] = set()

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    # ----- connection ------------------------------------------------------------------
    async def initialize(self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None,
                         **kwargs: Any) -> InitializeResponse:
        self.client_capabilities = client_capabilities
        capabilities = AgentCapabilities.model_validate({
            "loadSession": True,
            "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
            "sessionCapabilities": {"list": {}, "close": {}, "resume": {}, "additionalDirectories": {}},
            # MCP servers passed in session/new: stdio (every agent must) and streamable HTTP.
            "mcpCapabilities": {"http": True, "sse": False},
        })
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=capabilities,
            agent_info=Implementation(name="crystal", title="Crystal", version=__version__),
            auth_methods=[],
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> AuthenticateResponse:
        # Keys come from the environment (apiKeyEnv); there is nothing to log in to.
        return AuthenticateResponse()

    @property
    def elicitation_forms(self) -> bool:
        """Whether the client can show a form (``elicitation.form``)."""
        caps = self.client_capabilities
        elicitation = getattr(caps, "elicitation", None) if caps is not None else None
        return getattr(elicitation, "form", None) is not None

    # ----- sessions ---------------------------------------------------------------------
    def _workspace(self, cwd: str | None) -> Path:
        """``--workspace``, else the client's ``cwd`` once checked (acp/checks.py)."""
        if self.options.workspace is not None:
            return self.options.workspace
        if not cwd:
            raise UserError("session/new needs a cwd (an absolute folder).")
        return client_cwd(cwd, home_dir())

    def _open(self, cwd: str | None, *, resume: str | None = None, additional_directories: Any = None,
              mcp_servers: Any = None) -> AcpSession:
        notes: list[str] = []
        servers = client_servers(mcp_servers, notes.append) if mcp_servers else []
        folders = client_folders(additional_directories, notes.append)
        try:
            session = open_session(SessionOptions(
                self._workspace(cwd), overrides=self.options.overrides, flags=self.options.flags,
                resume=resume, person_present=True,
                # No form to show: the question tool is not offered at all (docs/acp.md).
                questions_available=self.elicitation_forms,
                client_folders=folders,
                client_mcp_servers=tuple(servers), notes=tuple(notes),
            ))
        except UserError as exc:
            raise _user_error(exc) from None
        entry = AcpSession(session=session)
        entry.interaction = AcpInteraction(self.conn, session, session.id, elicitation=self.elicitation_forms,
                                           announced=entry.announced_event)
        return entry

    def _entry(self, session_id: str) -> AcpSession:
        entry = self.sessions.get(session_id)
        if entry is None:
            raise RequestError(-32602, f"No open session {shown(session_id)}; create or load it first.")
        return entry

    async def _send(self, session_id: str, update: Any) -> None:
        try:
            await self.conn.session_update(session_id=session_id, update=update)
        except ConnectionError:
            # The client closed the connection (end of input, or it stopped reading):
            # nobody is left to show the update to, and the agent is shutting down.
            pass

    async def _announce_state(self, session_id: str, session: Session) -> None:
        await self._send(session_id, update_current_mode(session.mode))
        await self._send(session_id, ConfigOptionUpdate(session_update="config_option_update",
                                                        config_options=config_options(session)))

    async def _send_commands(self, session_id: str) -> None:
        await self._send(session_id, update_available_commands(available_commands()))

    async def new_session(self, cwd: str, additional_directories: list[str] | None = None,
                          mcp_servers: McpServers = None, **kwargs: Any) -> NewSessionResponse:
        entry = self._open(cwd, additional_directories=additional_directories, mcp_servers=mcp_servers)
        session = entry.session
        self.sessions[session.id] = entry
        # A task first runs after this handler's response is queued: the client learns
        # the session id before the commands arrive.
        task = asyncio.ensure_future(self._send_commands(session.id))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return NewSessionResponse(session_id=session.id, modes=mode_state(session),
                                  config_options=config_options(session))

    async def _reopen(self, cwd: str, session_id: str, **kwargs: Any) -> AcpSession:
        old = self.sessions.get(session_id)
        if old is not None:
            if old.turn is not None:
                raise RequestError(-32602, f"Session {shown(session_id)} is running a prompt; cancel it first.")
            try:  # a load that is refused leaves the open session as it was
                store = SessionStore(self._workspace(cwd))
                if not store.exists(session_id):
                    raise UnknownSession(f"No session {shown(session_id)} in {store.folder}.")
            except UserError as exc:
                raise _user_error(exc) from None
            await old.session.close()
            del self.sessions[session_id]
        entry = self._open(cwd, resume=session_id, **kwargs)
        self.sessions[session_id] = entry
        return entry

    async def load_session(self, cwd: str, session_id: str, mcp_servers: McpServers = None,
                           additional_directories: list[str] | None = None, **kwargs: Any) -> LoadSessionResponse:
        entry = await self._reopen(cwd, session_id, mcp_servers=mcp_servers,
                                   additional_directories=additional_directories)
        session = entry.session
        # The replay looks tools up by name: build the catalog without blocking the loop
        # (a slow MCP server starting must not stop this agent answering meanwhile).
        await session.prepare_tools()
        # The protocol: the whole conversation is streamed back before the response.
        for update in replay_updates(session, session.history):
            await self._send(session_id, update)
        if session.todos:
            await self._send(session_id, plan_update(session.todos))
        await self._send_commands(session_id)
        return LoadSessionResponse(modes=mode_state(session), config_options=config_options(session))

    async def resume_session(self, session_id: str, cwd: str, additional_directories: list[str] | None = None,
                             mcp_servers: McpServers = None, **kwargs: Any) -> ResumeSessionResponse:
        entry = await self._reopen(cwd, session_id, mcp_servers=mcp_servers,
                                   additional_directories=additional_directories)
        return ResumeSessionResponse(modes=mode_state(entry.session),
                                     config_options=config_options(entry.session))

    async def list_sessions(self, cwd: str | None = None, cursor: str | None = None,
                            **kwargs: Any) -> ListSessionsResponse:
        if self.options.workspace is None and not cwd:
            return ListSessionsResponse(sessions=[])
        try:
            workspace = self._workspace(cwd)
        except UserError as exc:
            raise _user_error(exc) from None
        root = await asyncio.to_thread(Path(workspace).resolve)
        # Reading every session document is disk work: off the event loop.
        rows = await asyncio.to_thread(lambda: SessionStore(root).list())
        start = int(cursor) if cursor and cursor.isdigit() else 0
        page = rows[start:start + LIST_PAGE]
        more = str(start + LIST_PAGE) if start + LIST_PAGE < len(rows) else None
        return ListSessionsResponse(
            sessions=[SessionInfo(session_id=r.id, cwd=str(root),
                                  title=(r.title or None) if r.answered else f"{r.title or 'Session'} (not answered)",
                                  updated_at=r.updated or None) for r in page],
            next_cursor=more,
        )

    async def fork_session(self, session_id: str, cwd: str, additional_directories: list[str] | None = None,
                           mcp_servers: McpServers = None, **kwargs: Any) -> ForkSessionResponse:
        """Not offered (no ``fork`` capability): the answer to any unknown method."""
        raise RequestError.method_not_found("session/fork")

    async def close_session(self, session_id: str, **kwargs: Any) -> CloseSessionResponse:
        entry = self.sessions.pop(session_id, None)
        if entry is not None:
            if entry.turn is not None:
                entry.turn.cancel()
            await entry.session.close()
        return CloseSessionResponse()

    # ----- modes and options -----------------------------------------------------------
    @staticmethod
    def _keep(session: Session) -> None:
        """Save a change a person made without a prompt (a mode, an approval, a command),
        so a later session/load reports it; a running turn saves when it ends, and a
        session that holds no prompt yet has no document to save into (SPEC §13)."""
        if not session.busy:
            session.save()

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> SetSessionModeResponse:
        entry = self._entry(session_id)
        try:
            entry.session.set_mode(mode_id)
        except UserError as exc:
            raise _user_error(exc) from None
        self._keep(entry.session)
        await self._send(session_id, ConfigOptionUpdate(session_update="config_option_update",
                                                        config_options=config_options(entry.session)))
        return SetSessionModeResponse()

    async def set_config_option(self, config_id: str, session_id: str, value: Any,
                                **kwargs: Any) -> SetSessionConfigOptionResponse:
        entry = self._entry(session_id)
        session = entry.session
        try:
            if config_id == "mode":
                session.set_mode(str(value))
                await self._send(session_id, update_current_mode(session.mode))
            elif config_id == "approval":
                session.set_approval(str(value))
            else:
                raise UserError(f"Unknown config option '{config_id}'; use mode or approval.")
        except UserError as exc:
            raise _user_error(exc) from None
        self._keep(session)
        return SetSessionConfigOptionResponse(config_options=config_options(session))

    # ----- prompts ----------------------------------------------------------------------
    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        entry = self._entry(session_id)
        session = entry.session
        left_out: list[str] = []
        parts = prompt_parts(prompt, images_ok=session.capabilities.images, notes=left_out)
        if not parts:
            raise RequestError(-32602, "The prompt is empty.")
        for note in left_out:  # said before the turn's own updates, as a turn's notes are
            await self._send(session_id, update_agent_thought_text(f"Note: {note}\n"))
        line = command_line(parts[0].text) if len(parts) == 1 and isinstance(parts[0], TextPart) else None
        if line is not None:
            # Commands run during a turn too: listing always works (PA-8, FL-1, FL-2) and
            # each command refuses its own changes while the session is busy.
            return await self._command(entry, session_id, line)
        if entry.turn is not None or session.busy:
            raise RequestError(-32602, "A prompt is already running in this session.")
        from crystal_kernel.host.commands import submit

        turn = await submit(session, UserTurn(prompt=parts), person=entry.interaction)
        entry.turn = turn
        try:
            usage, errors = await self._pump(entry, session_id, turn)
        finally:
            entry.turn = None
            entry.announced.clear()
        if turn.stop_reason == "error":
            raise RequestError(-32603, turn.error or "The turn failed.")
        for message in errors:
            await self._send(session_id, update_agent_message_text(f"\n\nError: {message}\n"))
        stop = STOP_REASONS[turn.stop_reason or "end_turn"]
        return PromptResponse(stop_reason=stop, usage=Usage(input_tokens=usage[0], output_tokens=usage[1],
                                                           total_tokens=usage[0] + usage[1]))

    async def _pump(self, entry: AcpSession, session_id: str, turn: Turn) -> tuple[tuple[int, int], list[str]]:
        """Send the turn's events as session updates until it ends (acp/updates.py)."""

        async def send(update: Any) -> None:
            await self._send(session_id, update)

        updates = TurnUpdates(entry.session, send, entry.announced, lambda: turn.error)
        async for event in turn:
            await updates.render(event)
        await updates.finish()
        return (updates.tokens_in, updates.tokens_out), updates.errors

    async def _command(self, entry: AcpSession, session_id: str, line: str) -> PromptResponse:
        from crystal_kernel.host.commands import run_command

        session = entry.session
        before = (session.mode, session.approval)
        try:
            # ACP's own command list: /resume and /fork belong to the client, which says
            # so when typed; /help lists what this front offers (host/commands.py ROWS).
            result = await run_command(session, line, front="acp")
            text = command_markdown(result)
            self._keep(session)
        except UserError as exc:
            text = str(exc)
        await self._send(session_id, update_agent_message_text(text))
        if (session.mode, session.approval) != before:
            await self._announce_state(session_id, session)
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        entry = self.sessions.get(session_id)
        if entry is not None and entry.turn is not None:
            entry.turn.cancel()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    # ----- shutdown ---------------------------------------------------------------------
    def cancel_turns(self) -> None:
        """Cancel every running turn (end of input): its prompt answers ``cancelled``."""
        for entry in self.sessions.values():
            if entry.turn is not None:
                entry.turn.cancel()

    async def background_sent(self, timeout: float) -> None:
        """Wait (at most ``timeout`` seconds) for updates sent in the background, such as a
        new session's command list, to go out."""
        if self._background:
            await asyncio.wait(list(self._background), timeout=timeout)

    async def close_all(self) -> None:
        """Cancel turns and close every session: jobs and tool processes die (BG-2)."""
        for task in list(self._background):
            task.cancel()
        self.cancel_turns()
        entries, self.sessions = list(self.sessions.values()), {}
        for entry in entries:
            try:
                await asyncio.wait_for(entry.session.close(), 10)
            except Exception:
                pass
