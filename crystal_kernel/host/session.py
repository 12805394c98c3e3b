"""Session: one agent session in one workspace, front-agnostic; every front opens one
through :func:`crystal_kernel.host.bootstrap.open_session` and runs turns on it through
:func:`crystal_kernel.host.loop.run_turn`. Three parts (docs/architecture.md): its state,
plain data it *is* (host/state.py, converted by host/document.py); its file, journal and
lock (host/session_file.py); its runtime, the one owner of provider, reviewer, tool
source, MCP servers, catalog and jobs (host/runtime.py). Only ``crystal_kernel/host``
writes a session's attributes; fronts use the methods here.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crystal_kernel.core.access import AccessRules
from crystal_kernel.core.config import APPROVAL_MODES, Config
from crystal_kernel.core.errors import UserError
from crystal_kernel.host.approval import Reviewer
from crystal_kernel.host.document import apply_document, fork_document, meta_document, whole_document
from crystal_kernel.host.flags import ProcessFlags
from crystal_kernel.host.review import review_fingerprint
from crystal_kernel.host.runtime import SessionRuntime
from crystal_kernel.host.session_file import SessionFile
from crystal_kernel.host.state import LiveState, SessionState, Usage
from crystal_kernel.host.store import SessionStore, new_session_id
from crystal_kernel.host.tool_sources import SessionTools
from crystal_kernel.prompts.compose import compose_named, compose_system
from crystal_kernel.providers.base import Capabilities, ModelRequest, Provider
from crystal_kernel.tools.base import NotebookAttachment, Tool, ToolContext

if TYPE_CHECKING:
    from crystal_kernel.core.interaction import Interaction
    from crystal_kernel.jobs.manager import JobManager

__all__ = ["ProcessFlags", "Session", "Usage"]


class Session(SessionState):
    """One agent session in one workspace: its state, file and runtime."""

    def __init__(
        self,
        *,
        workspace: Path,
        config: Config,
        provider: Provider,
        flags: ProcessFlags | None = None,
        person_present: bool = True,
        notebook: bool = False,
        session_id: str | None = None,
        tool_source: SessionTools | None = None,
    ):
        root = Path(os.path.realpath(workspace))
        if not root.is_dir():
            raise UserError(f"The workspace '{workspace}' is not a folder.")
        super().__init__(workspace=root, mode=config.mode, approval=config.approval, access=AccessRules(root),
                         id=session_id or new_session_id(), live=LiveState(review_baseline=review_fingerprint(root)))
        self.config = config
        self.flags = flags or ProcessFlags()
        # Default sources for a session built by hand (tests, scripts); bootstrap passes its own.
        self.runtime = SessionRuntime(provider, tool_source or SessionTools())
        self.flags.disable_tool = self.runtime.tool_source.check_disabled(self.flags.disable_tool)
        self.file = SessionFile(root, self.home)
        self.person_present = person_present
        # False: a person answers approvals but cannot answer question forms (ACP without
        # elicitation); the question tool is then not registered.
        self.questions_available = True
        self.notebook = notebook
        # What a notebook front attaches (attach_notebook); the front keeps the rest.
        self.notebook_side: NotebookAttachment | None = None

    @property
    def home(self) -> Path:  # Crystal Home: the config's
        return self.config.home

    # ----- the runtime's parts ----------------------------------------------------------
    @property
    def provider(self) -> Provider:
        return self.runtime.provider

    @property
    def reviewer(self) -> Reviewer | None:
        return self.runtime.reviewer

    @reviewer.setter
    def reviewer(self, reviewer: Reviewer | None) -> None:
        self.runtime.reviewer = reviewer

    @property
    def tool_source(self) -> SessionTools:
        return self.runtime.tool_source

    @property
    def capabilities(self) -> Capabilities:
        return self.provider.capabilities

    @property
    def store(self) -> SessionStore:
        return self.file.store

    # ----- tools and requests -------------------------------------------------------------
    async def prepare_tools(self) -> list[Tool[Any]]:
        """Build the catalog for the current mode (MODE-1/2) if it is not built; MCP
        servers start on their own loop while the caller's keeps serving."""
        return await self.runtime.prepare_tools(self)

    @property
    def catalog(self) -> list[Tool[Any]]:
        """The catalog :meth:`prepare_tools` built (RuntimeError before: sync callers run
        ``prepare_tools`` with core.runner.run_to_completion)."""
        return self.runtime.catalog

    async def external_tools(self) -> tuple[list[Tool[Any]], list[str]]:
        """Every external tool of this session's sources whatever the mode, and the notes
        (``crystal tools call``); servers started stop when the session closes."""
        return await self.runtime.external_tools(self)

    def tool(self, name: str) -> Tool[Any] | None:
        return next((t for t in self.catalog if t.name == name), None)

    def tool_context(self, interaction: Interaction, *, call_id: str = "", images_ok: bool = True,
                     progress: Callable[[float, float | None, str | None], None] | None = None) -> ToolContext:
        """What one tool call may use: the parts of this session, never the session itself
        (a tool, a plugin's included, cannot switch modes, approve, or read the transcript)."""
        side = self.notebook_side
        return ToolContext(
            access=self.access, config=self.config, interaction=interaction, call_id=call_id,
            images_ok=images_ok, progress=progress, session_id=self.id, approval=self.approval,
            todos=self.todos, write_todos=lambda todos: self.replace_todos(todos), open_jobs=lambda: self.jobs,
            notebook_shell=side.shell if side else None, live_notebook_edit=side.live_edit if side else None,
            model=self.provider,
            compose_prompt=lambda name, extra: compose_named(name, self, extra),
        )

    def system_text(self) -> str:
        """The active system message; composed once, replaced by refresh_system()."""
        if self.live.system is None:
            self.live.system = compose_system(self)
        return self.live.system

    def refresh_system(self) -> None:
        """MODE-4/PH-12: replace the active system message and rebuild the catalog."""
        self.live.system = None
        self.runtime.invalidate()

    def build_request(self, purpose: str = "turn") -> ModelRequest:
        return ModelRequest(
            model=self.provider.model, system=self.system_text(), messages=list(self.transcript),
            tools=self.runtime.specs(), purpose=purpose, max_output_tokens=self.config.max_output_tokens,
            # Side requests (compaction) use the provider's default: they need no thinking.
            reasoning_effort=self.config.reasoning_effort if purpose == "turn" else None,
        )

    # ----- switches (between turns) ---------------------------------------------------
    def _refuse_while_busy(self, what: str) -> None:
        if self.busy:
            raise UserError(f"Cannot {what} while a turn is running.")

    def set_mode(self, mode: str) -> None:
        """MODE-4: replaces the system message and catalog; the transcript stays."""
        if mode not in ("plan", "work"):
            raise UserError(f"Unknown mode '{mode}'; use plan or work.")
        self._refuse_while_busy("switch mode")
        self.mode = mode
        self.refresh_system()

    def set_approval(self, approval: str) -> None:
        if approval not in APPROVAL_MODES:
            raise UserError(f"Unknown approval mode '{approval}'; use one of: {', '.join(APPROVAL_MODES)}.")
        self._refuse_while_busy("change the approval mode")
        self.approval = approval
        self.refresh_system()

    def set_provider(self, provider: Provider) -> None:
        self._refuse_while_busy("change the model")
        self.runtime.provider = provider
        self.refresh_system()

    def set_reasoning_effort(self, effort: str | None) -> None:
        """The reasoning effort for this session's next turns (checked by the caller; not saved)."""
        self._refuse_while_busy("change the reasoning effort")
        self.config.reasoning_effort = effort

    def set_questions_available(self, available: bool) -> None:
        """False: a person answers approvals, not question forms (ACP without elicitation)."""
        self.questions_available = available
        self.refresh_system()

    def set_flags(self, flags: ProcessFlags) -> None:
        """New process flags for the next turns (the magics' options, checked by them)."""
        self.flags = flags
        self.refresh_system()

    def use_client_mcp_servers(self, servers: list[Any]) -> None:
        """An ACP client's MCP server entries: the tool source starts them with the next catalog."""
        self.tool_source.use_client_servers(servers)
        self.refresh_system()

    def attach_notebook(self, side: NotebookAttachment) -> None:
        """What only a notebook front has (core/notebook.py): shell, notebook path, live editing."""
        self.notebook_side = side
        self.refresh_system()

    @property
    def notebook_path(self) -> str | None:  # named in the system text
        return self.notebook_side.path if self.notebook_side else None

    @asynccontextmanager
    async def lend_provider(self, provider: Provider, *, without_person: bool) -> AsyncIterator[None]:
        """Run with ``provider`` and no reviewer (a worker loop's own clients: the magics'
        sync path), closed afterwards. ``without_person``: nobody answers questions
        meanwhile, so the question tool is not offered."""
        saved_person = self.person_present
        if without_person and saved_person:
            self.person_present = False
            self.refresh_system()
        try:
            async with self.runtime.lend(provider):
                yield
        finally:
            if self.person_present != saved_person:
                self.person_present = saved_person
                self.refresh_system()

    def change_directory(self, directory: str) -> None:
        """/cd: a new workspace root for this session."""
        self._refuse_while_busy("change the workspace")
        target = Path(os.path.realpath(self.access.absolute(directory)))
        if not target.is_dir():
            raise UserError(f"'{directory}' is not a folder.")
        self.workspace = self.access.workspace = target
        self.file.move_to(target)
        self.review_baseline = review_fingerprint(target)
        self.runtime.move_to(target)
        self.refresh_system()

    # ----- jobs and closing -----------------------------------------------------------
    @property
    def jobs(self) -> JobManager:
        return self.runtime.jobs(self.workspace, self.id, self.config)

    @property
    def has_jobs(self) -> bool:
        return self.runtime.has_jobs

    async def close(self) -> None:
        """Stop background jobs (BG-2), MCP servers and clients, once; then release the lock."""
        await self.runtime.aclose(private_temp=(Path(self.config.home), self.id))
        self.release_lock()

    # ----- persistence (host/document.py, host/session_file.py) -------------------------
    def _meta(self) -> dict[str, Any]:
        return meta_document(self, self.home, self.provider.name, self.provider.model)

    def to_document(self) -> dict[str, Any]:
        """The whole session as one document (what resume, fork and the server read)."""
        return whole_document(self, self._meta())

    def claim(self) -> None:
        """Hold the lock on this session's document (ROBUST-2): UserError when another
        front has it open. Saving claims too; fronts claim early when they name the id."""
        self.file.claim(self.id, self.note)

    def release_lock(self) -> None:
        """Let another front open this session (close, fork, and resuming another)."""
        self.file.release()

    def save(self) -> Path:
        """Append this save's changes to the session journal; UserError naming the file on
        failure (or when another front holds the session, see :meth:`claim`)."""
        return self.file.save(self, self._meta(), self.note)

    def load_document(self, doc: dict[str, Any]) -> None:
        """Fill this session from a saved document (a corrupt one: UserError, nothing changed)."""
        apply_document(self, doc, self.home, self.note)
        self.refresh_system()

    def resume(self, session_id: str) -> None:
        """Continue the saved session ``session_id``: lock it (refused when another front
        has it open), then load it."""
        self.file.resume(self, session_id, self.load_document, self.note)

    def fork(self) -> Session:
        """A new session with a copy of this one's conversation and todos."""
        child = Session(workspace=self.workspace, config=self.config, provider=self.provider, flags=self.flags,
                        person_present=self.person_present, notebook=self.notebook)
        child.notebook_side = self.notebook_side  # the same notebook (the front attaches its own after)
        # The person's grants carry over to the fork: signed for the child's id.
        child.load_document(fork_document(self, self._meta(), self.home, child.id))
        child.forked_from = self.id
        child.mode, child.approval = self.mode, self.approval
        child.save()
        # The front moves to the child; the parent stays saved and may be resumed by any
        # front (it claims its lock again if it saves later).
        self.release_lock()
        return child
