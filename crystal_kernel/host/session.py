"""Session: the conversation, its mode and approval, todos, usage, access, jobs.

A session is front-agnostic: the kernel, the magics, the CLI and ACP all hold one and
run turns on it through :func:`crystal_kernel.host.loop.run_turn`.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from crystal_kernel.core import paths
from crystal_kernel.core.access import AccessRules
from crystal_kernel.core.config import APPROVAL_MODES, Config
from crystal_kernel.core.errors import UserError
from crystal_kernel.core.message_log import MessageLog, RawMessage
from crystal_kernel.core.messages import Message, load_transcript
from crystal_kernel.core.todos import Todo
from crystal_kernel.host.approval import Reviewer, SessionAllowances
from crystal_kernel.host.grants import sign as sign_grants
from crystal_kernel.host.grants import verify as verify_grants
from crystal_kernel.host.journal import LIST_KEYS, JournalWriter
from crystal_kernel.host.session_lock import SessionLock
from crystal_kernel.host.session_lock import acquire as acquire_lock
from crystal_kernel.host.store import DOCUMENT_VERSION, SessionStore, new_session_id, now_iso
from crystal_kernel.providers.base import Capabilities, ModelRequest, Provider

if TYPE_CHECKING:
    from crystal_kernel.core.interaction import Interaction
    from crystal_kernel.host.tool_sources import SessionTools
    from crystal_kernel.jobs.manager import JobManager
    from crystal_kernel.tools.base import LiveNotebookEdit, Tool, ToolContext


@dataclass
class ProcessFlags:
    """Process flags every front accepts (FL-*, MODE-7). Never saved."""

    prompt_set: str | None = None
    prompt_attachments: Literal["on", "off"] = "on"
    prompt_attachment: list[str] = field(default_factory=list)
    disable_tool: list[str] = field(default_factory=list)


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    turns: list[dict[str, Any]] = field(default_factory=list)
    # The part of output_tokens spent reasoning (when the server reports it).
    reasoning_tokens: int = 0
    # Totals per model and per purpose (turn, review, compaction, topic): cost needs the
    # model, and /usage shows what the side requests cost (host/usage.py).
    by_model: dict[str, dict[str, int]] = field(default_factory=dict)
    by_purpose: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, input_tokens: int, output_tokens: int, *, model: str, purpose: str = "turn",
            reasoning_tokens: int = 0) -> None:
        """Count one reply's tokens in the session totals and the breakdowns."""
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        self.reasoning_tokens += reasoning_tokens
        for table, key in ((self.by_model, model), (self.by_purpose, purpose)):
            row = table.setdefault(key, {"inputTokens": 0, "outputTokens": 0})
            row["inputTokens"] += input_tokens
            row["outputTokens"] += output_tokens
            if reasoning_tokens:
                row["reasoningTokens"] = row.get("reasoningTokens", 0) + reasoning_tokens

    def as_dict(self) -> dict[str, Any]:
        return {"inputTokens": self.input_tokens, "outputTokens": self.output_tokens,
                "reasoningTokens": self.reasoning_tokens, "turns": self.turns,
                "byModel": self.by_model, "byPurpose": self.by_purpose}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Usage:
        def table(value: Any) -> dict[str, dict[str, int]]:
            if not isinstance(value, dict):
                return {}
            rows = {}
            for k, v in value.items():
                if isinstance(v, dict):
                    row = {"inputTokens": int(v.get("inputTokens", 0)), "outputTokens": int(v.get("outputTokens", 0))}
                    if v.get("reasoningTokens"):
                        row["reasoningTokens"] = int(v["reasoningTokens"])
                    rows[str(k)] = row
            return rows

        return cls(int(data.get("inputTokens", 0)), int(data.get("outputTokens", 0)), list(data.get("turns", [])),
                   by_model=table(data.get("byModel")), by_purpose=table(data.get("byPurpose")),
                   reasoning_tokens=int(data.get("reasoningTokens", 0)))


# Document keys the session writes; everything else in a loaded document is preserved.
_OWN_KEYS = {
    "version", "id", "created", "updated", "workspace", "topic", "mode", "approval", "provider",
    "model", "turns", "transcript", "history", "todos", "usage", "audit", "directories", "forkedFrom",
    "directoriesSignature", "answered",
}


class Session:
    """One agent session in one workspace."""

    # The catalog and its specs (see _tool_specs).
    _specs: tuple[list[Tool[Any]], list[Any]] | None = None

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
        self.workspace = Path(os.path.realpath(workspace))
        if not self.workspace.is_dir():
            raise UserError(f"The workspace '{workspace}' is not a folder.")
        self.config = config
        self.home = config.home
        self.provider = provider
        self.flags = flags or ProcessFlags()
        if tool_source is None:  # a session built by hand (tests, scripts): the default sources
            from crystal_kernel.host.tool_sources import SessionTools

            tool_source = SessionTools()
        # Where the tools come from (host/tool_sources.py): entered before the first
        # catalog, exited in close().
        self.tool_source: SessionTools = tool_source
        self._source_entered = False
        # Bumped by refresh_system(): a catalog built meanwhile is not kept.
        self._tools_generation = 0
        self.flags.disable_tool = tool_source.check_disabled(self.flags.disable_tool)
        self.person_present = person_present
        # False: a person answers approvals but cannot answer question forms (ACP without
        # elicitation); the question tool is then not registered. Call refresh_system().
        self.questions_available = True
        self.notebook = notebook
        self.id = session_id or new_session_id()
        self.store = SessionStore(self.workspace, home=self.home)
        self.access = AccessRules(self.workspace)
        self.mode: str = config.mode
        self.approval: str = config.approval
        self.transcript: list[Message] = []
        # Full history for the record: compaction shortens the transcript, never this.
        self.history: list[Message] = []
        self.todos: list[Todo] = []
        self.usage = Usage()
        self.audit: list[dict[str, Any]] = []
        self.allowances = SessionAllowances()
        self.topic: str | None = None
        self.turns = 0
        self.created = now_iso()
        self.forked_from: str | None = None
        self.busy = False
        # The reviewer of review and audit modes (host/approval_flow.py makes the model
        # reviewer on first use); fronts may put their own in place.
        self.reviewer: Reviewer | None = None
        # The IPython shell, when a notebook front hosts this session (notebook tools use
        # it). Typed loosely: the host never imports IPython.
        self.notebook_shell: Any = None
        # The .ipynb file the kernel or the magics run in, when Jupyter says (JPY_SESSION_NAME);
        # named in the system text so the model can read and edit "this notebook".
        self.notebook_path: str | None = None
        # Set by the kernel and the magics: applies a notebook_edit to the notebook's shared
        # document when it is open with real-time collaboration (jupyter/live_notebook.py).
        self.live_notebook_edit: LiveNotebookEdit | None = None
        self._extra_doc: dict[str, Any] = {}
        # Appends each save's changes to the session journal (host/journal.py).
        self._writer: JournalWriter | None = None
        self._notes: list[str] = []
        self._said_once: set[str] = set()
        self._system: str | None = None
        self._tools: list[Tool[Any]] | None = None
        self._jobs: JobManager | None = None
        # The lock on this session's document (host/session_lock.py), once claimed.
        self._lock: SessionLock | None = None
        # Automatic compaction (host/compaction.py): after a failure, the transcript length
        # at which to try again; and whether "nothing left to summarise" was said already.
        self.compaction_retry_at = 0
        self.compaction_warned = False
        # Untrusted workspace files a notebook front has offered a Trust button for
        # (jupyter/trust_view.py): (path, digest) pairs, each shown once per session.
        self.trust_offered: set[tuple[str, str]] = set()
        # TRUST-3: the workspace review texts as the session found them (host/review.py).
        self.review_baseline: str | None = _review_baseline(self.workspace)

    # ----- notes -------------------------------------------------------------------
    def note(self, text: str, *, once: bool = False) -> None:
        """Queue an English note for the person; the loop emits it as a Note event.

        ``once``: say it at most once per session (discovery notes would otherwise repeat
        on every catalog rebuild)."""
        if once:
            if text in self._said_once:
                return
            self._said_once.add(text)
        self._notes.append(text)

    def drain_notes(self) -> list[str]:
        notes, self._notes = self._notes, []
        return notes

    # ----- capabilities, tools, system text ------------------------------------------
    @property
    def capabilities(self) -> Capabilities:
        return self.provider.capabilities

    @property
    def catalog(self) -> list[Tool[Any]]:
        """The catalog for the current mode (MODE-1/2), as :meth:`prepare_tools` built it
        (RuntimeError before that: building may start MCP servers, which only the async
        path does; sync callers run ``prepare_tools`` with core.runner)."""
        if self._tools is None:
            raise RuntimeError("The tool catalog is not built yet: await session.prepare_tools() first.")
        return self._tools

    async def prepare_tools(self) -> list[Tool[Any]]:
        """Build the catalog if it is not built, entering the tool source first. Whatever
        must start (MCP servers) starts on its own loop: the caller's event loop keeps
        serving meanwhile (a kernel answers widgets and interrupts)."""
        while self._tools is None:
            await self._enter_source()
            generation = self._tools_generation
            tools = await self.tool_source.get_tools(self)
            if generation == self._tools_generation:  # no /mode, /cd, /model meanwhile
                self._tools = tools
        return self._tools

    async def _enter_source(self) -> None:
        if not self._source_entered:
            await self.tool_source.__aenter__()
            self._source_entered = True

    async def external_tools(self) -> tuple[list[Tool[Any]], list[str]]:
        """Every external tool this session's sources offer, whatever the mode, and the
        notes about what was skipped (``crystal tools call``). The servers started stay
        the source's, stopped by :meth:`close`."""
        await self._enter_source()
        return await self.tool_source.external_tools(self)

    def tool(self, name: str) -> Tool[Any] | None:
        for t in self.catalog:
            if t.name == name:
                return t
        return None

    def tool_context(self, interaction: Interaction, *, call_id: str = "", images_ok: bool = True,
                     progress: Callable[[float, float | None, str | None], None] | None = None) -> ToolContext:
        """What one tool call may use: the parts of this session, never the session itself
        (a tool, a plugin's included, cannot switch modes, approve, or read the transcript)."""
        from crystal_kernel.tools.base import ToolContext

        def open_jobs() -> JobManager:
            return self.jobs

        def compose_prompt(name: str, extra: dict[str, str] | None) -> str:
            from crystal_kernel.prompts.compose import compose_named

            return compose_named(name, self, extra)

        return ToolContext(
            access=self.access, config=self.config, interaction=interaction, call_id=call_id,
            images_ok=images_ok, progress=progress, session_id=self.id, approval=self.approval,
            todos=self.todos, open_jobs=open_jobs, notebook_shell=self.notebook_shell,
            live_notebook_edit=self.live_notebook_edit, model=self.provider, compose_prompt=compose_prompt,
        )

    def system_text(self) -> str:
        """The active system message; composed once, replaced by refresh_system()."""
        if self._system is None:
            self._system = self._compose_system()
        return self._system

    def _compose_system(self) -> str:
        from crystal_kernel.prompts.compose import compose_system

        return compose_system(self)

    def refresh_system(self) -> None:
        """MODE-4/PH-12: replace the active system message and rebuild the catalog."""
        self._system = None
        self._tools = None
        self._tools_generation += 1

    def build_request(self, purpose: str = "turn") -> ModelRequest:
        return ModelRequest(
            model=self.provider.model,
            system=self.system_text(),
            messages=list(self.transcript),
            tools=self._tool_specs(),
            purpose=purpose,
            max_output_tokens=self.config.max_output_tokens,
            # Side requests (compaction) use the provider's default: they need no thinking.
            reasoning_effort=self.config.reasoning_effort if purpose == "turn" else None,
        )

    def _tool_specs(self) -> list[Any]:
        """The catalog's specs, made once per catalog (a new catalog is a new list): a
        spec's schema is a fresh deep copy, and this runs before every model step."""
        tools = self.catalog
        kept = self._specs
        if kept is None or kept[0] is not tools:
            kept = self._specs = (tools, [t.spec() for t in tools])
        return list(kept[1])

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
        self.provider = provider
        self.refresh_system()

    def set_questions_available(self, available: bool) -> None:
        """False when a person answers approvals but cannot answer question forms (ACP
        without elicitation): the question tool is then left out of the catalog."""
        self.questions_available = available
        self.refresh_system()

    def set_flags(self, flags: ProcessFlags) -> None:
        """New process flags for the next turns (the magics' options); the caller has
        checked them. The system text and catalog are rebuilt."""
        self.flags = flags
        self.refresh_system()

    def use_client_mcp_servers(self, servers: list[Any]) -> None:
        """The MCP server entries an ACP client passed for this session
        (mcp/config.client_server); they start with the next catalog."""
        self.tool_source.use_client_servers(servers)
        self.refresh_system()

    def attach_notebook(self, shell: Any, path: str | None, live_edit: LiveNotebookEdit | None) -> None:
        """What only a notebook front has: the IPython shell (notebook tools), the
        notebook's path (named in the system text), and live editing of notebooks open
        with real-time collaboration."""
        self.notebook_shell, self.notebook_path, self.live_notebook_edit = shell, path, live_edit
        self.refresh_system()

    @asynccontextmanager
    async def lend_provider(self, provider: Provider, *, without_person: bool) -> AsyncIterator[None]:
        """Run with ``provider`` (and no reviewer) in place, then put the session's own
        back and close the borrowed ones: HTTP connections belong to the loop that
        opened them, so a worker loop (the magics' sync path) brings its own.
        ``without_person``: nobody answers questions meanwhile (the question tool is not
        offered)."""
        saved_provider, saved_reviewer, saved_person = self.provider, self.reviewer, self.person_present
        self.provider, self.reviewer = provider, None
        if without_person and saved_person:
            self.person_present = False
            self.refresh_system()
        try:
            yield
        finally:
            if self.provider is provider:
                self.provider = saved_provider
            reviewer, self.reviewer = self.reviewer, saved_reviewer
            for closer in (getattr(reviewer, "aclose", None), getattr(provider, "aclose", None)):
                if closer is not None:
                    try:
                        await closer()
                    except Exception:
                        pass
            if self.person_present != saved_person:
                self.person_present = saved_person
                self.refresh_system()

    def change_directory(self, directory: str) -> None:
        """/cd: a new workspace root for this session."""
        self._refuse_while_busy("change the workspace")
        target = Path(os.path.realpath(self.access.absolute(directory)))
        if not target.is_dir():
            raise UserError(f"'{directory}' is not a folder.")
        self.workspace = target
        self.access.workspace = target
        self.store = SessionStore(target, home=self.home)
        self.review_baseline = _review_baseline(target)
        self._writer = None  # the next save writes a snapshot in the new workspace
        if self._jobs is not None:
            self._jobs.move_to(target)
        self.refresh_system()

    # ----- jobs ---------------------------------------------------------------------
    @property
    def jobs(self) -> JobManager:
        if self._jobs is None:
            from crystal_kernel.jobs.manager import JobManager

            self._jobs = JobManager(
                self.workspace,
                self.id,
                timeout_seconds=self.config.background_bash_timeout_seconds,
                log_dir=paths.job_dir(self.workspace, self.id),
                config=self.config,
            )
        return self._jobs

    @property
    def has_jobs(self) -> bool:
        return self._jobs is not None

    async def close(self) -> None:
        """Stop background jobs (BG-2) and anything else the session started."""
        if self._jobs is not None:
            await self._jobs.aclose()  # off the event loop: a stubborn job takes seconds
        for tool in self._tools or []:
            closer = getattr(tool, "aclose", None)
            if closer is not None:
                try:
                    await closer()
                except Exception:
                    pass
        if self._source_entered:
            self._source_entered = False
            await self.tool_source.__aexit__(None, None, None)
        closer = getattr(self.provider, "aclose", None)
        if closer is not None:
            try:
                await closer()
            except Exception:
                pass
        # The reviewer may hold its own provider (reviewModel).
        closer = getattr(self.reviewer, "aclose", None)
        if closer is not None:
            try:
                await closer()
            except Exception:
                pass
        self.release_lock()

    # ----- persistence -----------------------------------------------------------------
    def _meta_document(self) -> dict[str, Any]:
        """The document's keys other than the message lists and the audit log; ``usage``
        without its per-turn list (a journal appends those, host/journal.py)."""
        doc = dict(self._extra_doc)
        # Only the person's grants are saved (and signed); a client's folders end with the
        # session (host/folders.py, TRUST-6).
        directories = [{"path": str(d.path), "mode": d.mode} for d in self.access.directories if d.granted]
        usage = self.usage.as_dict()
        usage.pop("turns")
        doc.update(
            {
                "version": DOCUMENT_VERSION,
                "id": self.id,
                "created": self.created,
                "updated": now_iso(),
                "workspace": str(self.workspace),
                "topic": self.topic,
                "mode": self.mode,
                "approval": self.approval,
                "provider": self.provider.name,
                "model": self.provider.model,
                "turns": self.turns,
                "todos": [t.model_dump() for t in self.todos],
                "usage": usage,
                "directories": directories,
                # TRUST-3: the person's grants, signed with Home's key (host/grants.py).
                "directoriesSignature": sign_grants(self.home, self.id, self.workspace, directories),
                "forkedFrom": self.forked_from,
                # False while the last message is the person's or a tool's (the request
                # failed or was cancelled): /sessions says the prompt was not answered.
                "answered": bool(self.history) and self.history[-1].role == "assistant",
            }
        )
        return doc

    def to_document(self, meta: dict[str, Any] | None = None) -> dict[str, Any]:
        """The whole session as one document (what resume, fork and the server read)."""
        doc = dict(meta if meta is not None else self._meta_document())
        doc["usage"] = dict(doc["usage"], turns=self.usage.turns)
        # A message in both lists is dumped once: the journal then writes it once.
        dumped: dict[int, dict[str, Any]] = {}

        def dump(messages: list[Message]) -> list[dict[str, Any]]:
            out = []
            for message in messages:
                item = dumped.get(id(message))
                if item is None:
                    item = dumped[id(message)] = message.model_dump(mode="json")
                out.append(item)
            return out

        doc["history"] = dump(self.history)
        doc["transcript"] = dump(self.transcript)
        doc["audit"] = self.audit
        return doc

    def _journal_lists(self) -> dict[str, list[Any]]:
        return {"audit": self.audit, "usage.turns": self.usage.turns}

    def claim(self) -> None:
        """Hold the lock on this session's document (ROBUST-2): UserError when another
        front has it open. Saving claims too; fronts claim early when they name the id."""
        path = self.store.journal_path(self.id)
        if self._lock is not None and self._lock.held and self._lock.document == path:
            return
        lock = acquire_lock(path, self.id)
        self.release_lock()
        self._lock = lock
        self._note_lock_problem(lock)

    def _note_lock_problem(self, lock: SessionLock) -> None:
        if lock.problem is not None:
            self.note(f"Session {self.id} could not be locked ({lock.problem}); another front that "
                      "resumes it at the same time could overwrite its turns.")

    def release_lock(self) -> None:
        """Let another front open this session (close, fork, and resuming another)."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def save(self) -> Path:
        """Append this save's changes to the session journal (a snapshot when they cannot
        be appended); UserError naming the file on failure (or when another front holds
        the session, see :meth:`claim`). A session with no prompt yet and no file is
        not written (SPEC §13 "Session files": slash commands alone write none)."""
        path = self.store.journal_path(self.id)
        if not self.history and not self.store.exists(self.id):
            return path
        self.claim()
        try:
            if self._writer is None or self._writer.path != path:
                self._writer = JournalWriter(path, inside=self.workspace, home=self.home)
            meta = self._meta_document()
            snapshot = self._writer.state is None
            self._writer.save(meta, self.history, self.transcript, self._journal_lists(),
                              lambda: self.to_document(meta))
            if snapshot:
                self.store.drop_old_document(self.id)
            return path
        except OSError as exc:
            self._writer = None  # state unknown: the next save writes a snapshot
            raise UserError(f"Could not save the session document {path}: {exc.strerror or exc}.") from None

    def load_document(self, doc: dict[str, Any]) -> None:
        """Fill this session from a saved document (resume). A corrupt document raises
        UserError and leaves the session as it was."""
        try:
            # A message the journal holds once is in both lists (the same dict): build it
            # once, so resume costs one parse per message and the lists share it.
            built: dict[int, Message] = {}

            def build(items: list[Any]) -> list[Message]:
                out: list[Any] = []  # RawMessage entries: lines a MessageLog parses when read
                for item in items:
                    # A journal read it already, or keeps it unread (a MessageLog parses it
                    # when something reads it: core/message_log.py).
                    if isinstance(item, (Message, RawMessage)):
                        out.append(item)
                        continue
                    message = built.get(id(item))
                    if message is None:
                        message = built[id(item)] = load_transcript([item])[0]
                    out.append(message)
                return out

            raw_transcript = list(doc.get("transcript") or [])
            # list.copy keeps a MessageLog's unread lines unread.
            items = doc.get("history") or raw_transcript
            raw_history = list.copy(items) if isinstance(items, list) else list(items)
            history = build(raw_history)
            if isinstance(items, MessageLog):
                history = MessageLog(history)
            # The older format wrote the lists apart: a transcript entry equal to the history
            # entry at the same distance from the end is that message.
            offset = len(raw_history) - len(raw_transcript)
            for i, item in enumerate(raw_transcript):
                if (not isinstance(item, Message) and id(item) not in built and 0 <= offset + i < len(raw_history)
                        and raw_history[offset + i] == item):
                    built[id(item)] = history[offset + i]
            transcript = build(raw_transcript)
            todos = [Todo.model_validate(t) for t in doc.get("todos") or []]
            usage = Usage.from_dict(doc.get("usage") or {})
            turns = int(doc.get("turns", 0))
            audit = list(doc.get("audit") or [])
            session_id = str(doc["id"])
            directories = list(doc.get("directories") or [])
        except Exception as exc:
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise UserError(f"Session document {doc.get('id')} is corrupt: {first}") from None
        self.transcript, self.history, self.todos = transcript, history, todos
        self.usage, self.turns, self.audit, self.id = usage, turns, audit, session_id
        self.created = doc.get("created", self.created)
        self.topic = doc.get("topic")
        if doc.get("mode") in ("plan", "work"):
            self.mode = doc["mode"]
        self.forked_from = doc.get("forkedFrom")
        if directories and not verify_grants(self.home, session_id, self.workspace, directories,
                                             doc.get("directoriesSignature")):
            # TRUST-3: a list the person did not grant here (edited, copied, or written
            # before grants were signed) widens nothing.
            shown = ", ".join(str(d.get("path") if isinstance(d, dict) else d) for d in directories[:5])
            self.note(f"The session document lists added directories ({shown}) that were not granted "
                      "in this Crystal Home for this session; they were not added. Add them again "
                      "with /access add DIR if you want them.")
            directories = []
        for d in directories:
            try:
                self.access.add(d["path"], d.get("mode", "rw"))
            except Exception:
                self.note(f"Added directory {d.get('path') if isinstance(d, dict) else d} is gone; "
                          "it was dropped from this session.")
        self._extra_doc = {k: v for k, v in doc.items() if k not in _OWN_KEYS}
        self.refresh_system()

    def resume(self, session_id: str) -> None:
        """Continue the saved session ``session_id``: lock it (refused when another front
        has it open), then load it. The id is the file's name, so resuming a copied
        session continues the copy and never overwrites the original."""
        # The lock sits beside the journal whatever format the session is in now, so the
        # conversion from an old document keeps one lock.
        path = self.store.journal_path(session_id)
        mine = self._lock is not None and self._lock.held and self._lock.document == path
        lock = None if mine else acquire_lock(path, session_id)
        try:
            foreign: list[str] = []  # TRUST-5: a session this Home did not sign
            doc, state = self.store.load_with_state(session_id, messages=True, notes=foreign)
            # What the journal holds, before any change below: the next save appends the
            # differences from it.
            disk_meta = {k: v for k, v in doc.items() if k not in LIST_KEYS}
            if isinstance(disk_meta.get("usage"), dict):
                disk_meta["usage"] = {k: v for k, v in disk_meta["usage"].items() if k != "turns"}
            if doc.get("id") != session_id:
                self.note(f"The session document {self.store.path_for(session_id).name} says it is session "
                          f"{doc.get('id')!r}; it continues as {session_id}, a separate session.")
                doc = {**doc, "id": session_id}
            self.load_document(doc)
            for text in foreign:
                self.note(text)
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        if state is not None:
            self._writer = JournalWriter(self.store.journal_path(session_id), inside=self.workspace,
                                         home=self.home)
            self._writer.loaded(state, disk_meta, self.history, self.transcript, self._journal_lists())
        else:
            self._writer = None
        if lock is not None:
            self.release_lock()
            self._lock = lock
            self._note_lock_problem(lock)

    def fork(self) -> Session:
        """A new session with a copy of this one's conversation and todos."""
        child = Session(
            workspace=self.workspace, config=self.config, provider=self.provider, flags=self.flags,
            person_present=self.person_present, notebook=self.notebook,
        )
        doc = self.to_document()
        doc["id"] = child.id
        doc["created"] = now_iso()
        doc["audit"] = []
        # The person's grants carry over to the fork: signed for the child's id.
        doc["directoriesSignature"] = sign_grants(self.home, child.id, self.workspace, doc["directories"])
        child.load_document(doc)
        child.forked_from = self.id
        child.mode, child.approval = self.mode, self.approval
        child.notebook_shell = self.notebook_shell
        child.notebook_path = self.notebook_path
        child.live_notebook_edit = self.live_notebook_edit
        child.save()
        # The front moves to the child; the parent stays saved and may be resumed by any
        # front (it claims its lock again if it saves later).
        self.release_lock()
        return child



def _review_baseline(workspace: Path) -> str | None:
    from crystal_kernel.host.review import review_fingerprint

    return review_fingerprint(workspace)
