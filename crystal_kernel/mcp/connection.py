"""One MCP server connection, living on the MCP loop (:mod:`runtime`).

A connection is one long task (``_serve``) that opens the transport (a stdio child
under the jobs supervisor, or streamable HTTP), runs ``initialize`` and ``tools/list``
under the startup bound, then waits until it is stopped or the server goes away.
Calls run as their own tasks against the open ``ClientSession``.

Lifetime rules (docs/mcp.md):

- started at the session's first catalog build, all servers at once, each bounded by
  its ``startupTimeoutSeconds``; a server that fails is left out with a note;
- if the server dies (its stdout ends, the HTTP connection fails), the next call starts
  it again; a start that fails is tried again at a later call with a bounded backoff
  (MCP-R, :mod:`backoff`), and calls meanwhile say what happened last and when the next
  try is;
- a call's timeout and a cancelled turn reach the server as ``notifications/cancelled``
  (the SDK sends it); the caller stops waiting either way, so a hung server cannot hang
  the turn;
- stopping closes stdin, then the supervisor and the SDK end the whole process tree; a
  SIGKILLed host leaves nothing behind (the supervisor's parent-death signal).

Every method here must run on the MCP loop.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crystal_kernel.core.deadline import within
from crystal_kernel.core.errors import ToolError
from crystal_kernel.jobs.guarded import supervisor_command
from crystal_kernel.mcp import sdk
from crystal_kernel.mcp.backoff import Backoff
from crystal_kernel.mcp.config import ServerConfig
from crystal_kernel.mcp.requests import CONNECTION_CLOSED, call_tool

if TYPE_CHECKING:
    from mcp import types as mcp_types
    from mcp.client.session import ClientSession
    from mcp.shared.exceptions import McpError

    from crystal_kernel.core.config import Config

# Bounds (seconds). Stopping: the SDK waits 2 s for a stdio server to leave after its
# stdin closes, then 2 s after SIGTERM; the supervisor adds its own grace.
STOP_SECONDS = 8.0
SUPERVISOR_GRACE = 2.0
LIST_PAGES = 20
STDERR_TAIL = 4096
INVALID_REQUEST = -32600
# A timeout is HTTP's 408 (requests.py and the SDK's own read timeout; the TypeScript
# SDK's -32001 also counts); a 404 for our session id comes back as +32600 "Session terminated".
REQUEST_TIMEOUTS = (408, -32001)
SESSION_TERMINATED = 32600
# An error answer's body is read (for the words "session") only up to this size.
REJECTION_BODY_BYTES = 16384
REFUSED = "nothing answered at its address (connection refused)"

# Runs under the supervisor as ``python -c``: replaces itself with the server from an
# argument list (no shell), or says in one line why it could not.
_EXEC = ("import os, sys\nA = {argv!r}\ntry:\n    os.execvp(A[0], A)\nexcept OSError as e:\n"
         "    sys.stderr.write('cannot start %s: %s\\n' % (A[0], e.strerror or e))\n    sys.exit(127)\n")


class StartError(Exception):
    """The server could not be started, initialized or listed; one English reason."""


class ServerConnection:
    """One configured server for one session."""

    def __init__(self, config: ServerConfig, workspace: Path, session_id: str, host_config: Config | None = None):
        self.config = config
        self.workspace = Path(workspace)
        self.session_id = session_id
        # The session's Config (passKeysToTools, TRUST-4); None for listings.
        self.host_config = host_config
        self.state = "not started"
        self.detail = ""
        # MCP-R: failures since the server last answered, and when it is tried again.
        self.backoff = Backoff()
        self._death_noted = False  # this run's stop is counted once (call and serve task both see it)
        self.closed = False
        self.tools: list[mcp_types.Tool] | None = None  # the last tools/list answer
        self.server_name = ""
        self._session: ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._wake: asyncio.Event | None = None
        # Set when the open session ends (calls in flight fail at once, requests.py).
        self._gone: asyncio.Event | None = None
        self._stopping = False
        self._lost = False
        self._lock: asyncio.Lock | None = None
        self._stderr = bytearray()
        # Set by the HTTP client when the server refused a request naming our MCP
        # session as one it does not know (see _note_session_refused).
        self._session_refused = False

    # ----- what listings show ----------------------------------------------------------
    def describe_state(self) -> str:
        """One line for /tools: running, stopped (restart pending), failed: why, ..."""
        later = f"; next try after {self.backoff.next_try()}" if self.backoff.waiting() else ""
        if self.state == "stopped" or self.state == "running" and self._lost:
            return f"stopped ({later[2:]})" if later else "stopped (restarts on next use)"
        if self.state == "failed":
            return f"failed: {self.detail}{later}"
        return self.state

    def stderr_tail(self) -> str:
        lines = self._stderr.decode("utf-8", errors="replace").strip().splitlines()
        return "\n".join(lines[-8:])[-800:]

    def _with_tail(self, text: str) -> str:
        tail = self.stderr_tail()
        return f"{text} Its last output on stderr:\n{tail}" if tail else text

    # ----- start and stop --------------------------------------------------------------
    async def start(self) -> None:
        """Open, initialize and list tools within the startup bound; raises StartError."""
        loop = asyncio.get_running_loop()
        self._ready = ready = loop.create_future()
        self._stopping = False
        self._lost = False
        self._wake = asyncio.Event()
        self._gone = asyncio.Event()
        self._stderr.clear()
        self._session_refused = False
        self._death_noted = False
        self.state, self.detail = "starting", ""
        self._task = loop.create_task(self._serve(ready), name=f"mcp:{self.config.name}")
        try:
            # The serve task bounds itself; this outer bound covers a wedged transport.
            await within(asyncio.shield(ready), self.config.startup_timeout + STOP_SECONDS)
        except TimeoutError:
            await self._halt()
            self.state, self.detail = "failed", f"it did not start within {self.config.startup_timeout:g} seconds"
            self._note_start_failure()
            raise StartError(self.detail) from None
        except StartError as exc:
            await self._halt()
            self.state, self.detail = "failed", str(exc)
            self._note_start_failure()
            raise

    def _note_start_failure(self) -> None:
        """Count a failed start (MCP-R) in the words a call shows: for an HTTP server
        "could not reach URL: why", else "could not start: why"."""
        reason, _, tail = self.detail.partition(" Its last output on stderr:")
        reason = reason.strip().rstrip(".")
        if self.config.transport == "http":
            what = f"could not reach {self.config.url}: " + ("connection refused" if reason == REFUSED else reason)
        else:
            what = f"could not start: {reason}"
        self.backoff.failed(what, stopped=False, tail=tail.strip())

    def _note_stopped(self) -> None:
        """Count the end of a server that was running, once per run (MCP-R)."""
        if not self._death_noted:
            self._death_noted = True
            what = "stopped" if self.config.transport == "stdio" else "lost its connection"
            self.backoff.failed(what, stopped=True, tail=self.stderr_tail())

    async def stop(self, *, final: bool) -> None:
        """Stop the server (bounded). ``final``: the session is closing, no more starts."""
        if final:
            self.closed = True
        self._stopping = True
        if self._wake is not None:
            self._wake.set()
        await self._halt()
        if self.state != "failed" or final:
            self.state = "closed" if final else "not started"

    async def _halt(self) -> None:
        task = self._task
        if task is None or task.done():
            return
        self._stopping = True
        if self._wake is not None:
            self._wake.set()
        done, _ = await asyncio.wait({task}, timeout=STOP_SECONDS)
        if not done:
            task.cancel()
            await asyncio.wait({task}, timeout=2.0)

    async def _serve(self, ready: asyncio.Future[None]) -> None:
        import anyio
        from mcp import types as mcp_types
        from mcp.client.session import ClientSession

        opened = False
        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await self._open_transport(stack)
                send, receive = anyio.create_memory_object_stream[Any](0)
                group = await stack.enter_async_context(anyio.create_task_group())
                stack.callback(group.cancel_scope.cancel)
                group.start_soon(self._pump, read, send)
                info = mcp_types.Implementation(name="crystal-kernel", version=_version())
                session = await stack.enter_async_context(ClientSession(receive, write, client_info=info))
                with anyio.move_on_after(self.config.startup_timeout) as scope:
                    result = await session.initialize()
                    tools = await _list_all(session)
                if scope.cancelled_caught:
                    raise StartError(f"it did not answer initialize and tools/list within "
                                     f"{self.config.startup_timeout:g} seconds")
                info = sdk.field(result, "serverInfo")
                self.server_name = info.name if info else ""
                self.tools, self._session = tools, session
                self.state = "running"
                if not ready.done():
                    ready.set_result(None)
                opened = True
                assert self._wake is not None
                await self._wake.wait()
        except asyncio.CancelledError:
            if not ready.done():
                ready.set_exception(StartError("it was stopped while starting"))
        except Exception as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, StartError) else StartError(self._with_tail(_reason(exc))))
        finally:
            self._session = None
            if self._gone is not None:
                self._gone.set()
            if ready.done() and not self._stopping:
                self._lost = True
                self.state = "stopped"
                self.detail = self._with_tail("The server stopped.")
                if opened:
                    self._note_stopped()

    async def _pump(self, read: Any, send: Any) -> None:
        """Forward server messages to the session; the end of the stream means the
        server is gone (noted before the session sees it, so calls can tell)."""
        try:
            async for item in read:
                await send.send(item)
        except Exception:
            pass
        finally:
            if not self._stopping:
                self._lost = True
                if self._wake is not None:
                    self._wake.set()
            send.close()

    async def _open_transport(self, stack: contextlib.AsyncExitStack) -> tuple[Any, Any]:
        if self.config.transport == "http":
            http = sdk.http_module()  # httpx for mcp 1.x, httpx2 for 2.x
            client = http.AsyncClient(headers=dict(self.config.headers),
                                      timeout=http.Timeout(10.0, read=300.0),
                                      event_hooks={"response": [self._note_session_refused]})
            await stack.enter_async_context(client)
            return await sdk.open_http(stack, self.config.url or "", client)
        return await self._open_stdio(stack)

    async def _note_session_refused(self, response: Any) -> None:
        """HTTP response hook: remember that the server refused a request that carried
        our ``Mcp-Session-Id`` because it does not know that session. The MCP spec says
        404; servers built on the TypeScript SDK (server-everything) and older Python
        SDKs answer 400 "Bad Request: No valid session ID provided", which the client
        SDK reports only as a generic -32603, without the words."""
        request = response.request
        if response.status_code not in (400, 404) or request.method != "POST" or "mcp-session-id" not in request.headers:
            return  # only a refused message (a call), not the event stream's GET
        if response.status_code == 404:
            self._session_refused = True
            return
        size = response.headers.get("content-length", "")
        if not size.isdigit() or int(size) > REJECTION_BODY_BYTES:
            return  # unbounded or large: not the short refusal servers send
        body = await response.aread()
        self._session_refused = b"session" in body.lower()

    async def _open_stdio(self, stack: contextlib.AsyncExitStack) -> tuple[Any, Any]:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        env = self._child_env()
        command = self.config.command or ""
        if os.sep not in command and shutil.which(command, path=env.get("PATH")) is None:
            raise StartError(f"its command '{command}' was not found on PATH")
        argv = [command, *self.config.args]
        # Under the jobs supervisor: PR_SET_PDEATHSIG + subreaper, so the server tree
        # dies with the host however the host dies.
        params = StdioServerParameters(
            command=sys.executable,
            args=[*supervisor_command()[1:], str(os.getpid()), str(SUPERVISOR_GRACE), sys.executable,
                  _EXEC.format(argv=argv)],
            env=env, cwd=str(self.workspace),
        )
        read_fd, write_fd = os.pipe()
        errlog = os.fdopen(write_fd, "wb", buffering=0)
        try:
            # The SDK annotates errlog as TextIO but hands it to the child as its stderr,
            # where a binary pipe is what it needs (no text layer, no buffering).
            read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))  # type: ignore[arg-type]
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            errlog.close()  # the child holds its own copy
        self._watch_stderr(read_fd)
        return read, write

    def _child_env(self) -> dict[str, str]:
        """EX-2's rule for child processes: the host environment without CRYSTAL_HOME,
        plus the workspace and session, plus the entry's own ``env``."""
        from crystal_kernel.core.secrets import child_environment

        # TRUST-4: no model keys unless passKeysToTools; the entry's own env is set last
        # (a trusted file may hand a server a key on purpose).
        env = child_environment(self.host_config, extra={
            "CRYSTAL_WORKSPACE": str(self.workspace), "CRYSTAL_SESSION": str(self.session_id)})
        env.update(dict(self.config.env))
        return env

    def _watch_stderr(self, fd: int) -> None:
        """Keep the last few KiB the server writes to stderr, for error messages."""
        loop = asyncio.get_running_loop()
        os.set_blocking(fd, False)

        def readable() -> None:
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                loop.remove_reader(fd)
                os.close(fd)
                return
            self._stderr += data
            del self._stderr[:-STDERR_TAIL]

        loop.add_reader(fd, readable)

    # ----- calls -----------------------------------------------------------------------
    async def ensure_running(self) -> ClientSession:
        """The open session; starts the server if needed, and one that failed or stopped
        again once its backoff allows (MCP-R); ToolError saying what happened last."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self.closed:
                raise ToolError(f"The MCP server '{self.config.name}' was closed with its session.")
            if self.state == "running" and not self._lost and self._session is not None:
                return self._session
            ready = self._ready
            if self.state == "starting" and ready is not None and not ready.done():
                # A start whose caller was cancelled is still under way: let it finish.
                await asyncio.wait({ready}, timeout=self.config.startup_timeout + STOP_SECONDS)
                if self.state == "running" and not self._lost and self._session is not None:
                    return self._session
            if self.state in ("failed", "running", "stopped", "starting"):
                if self.backoff.waiting():  # no request: say what happened last and when
                    raise ToolError(f"The MCP server '{self.config.name}' is not tried again yet: it "
                                    f"{self.backoff.last()}")
                await self._halt()
            try:
                await self.start()
            except StartError:
                raise ToolError(f"The MCP server '{self.config.name}' {self.backoff.last()}") from None
            assert self._session is not None  # start() opens the session or raises StartError
            return self._session

    async def call(self, tool: str, arguments: dict[str, Any], timeout: float | None,
                   progress: Callable[[float, float | None, str | None], None] | None = None,
                   ) -> mcp_types.CallToolResult:
        """``tools/call``; failures become ToolError with one English sentence.
        ``progress(progress, total, message)`` gets the server's progress notifications."""
        sdk_error = sdk.error_class()  # McpError (1.x) or MCPError (2.x)
        report = progress

        # The SDK's ProgressFnT: these parameter names.
        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            if report is not None:
                report(progress, total, message)

        session = await self.ensure_running()
        name = self.config.name
        try:
            try:
                result = await call_tool(session, tool, arguments, timeout, on_progress, self._gone_event())
            except sdk_error as exc:
                if not self._forgot_session(exc):
                    raise
                # The HTTP server restarted or dropped our session (404 "Session not
                # found", 400 no valid session): it did not run the call. Initialize a
                # new session and send the call once more.
                session = await self._reinitialize()
                result = await call_tool(session, tool, arguments, timeout, on_progress, self._gone_event())
            self.backoff.answered()
            return result
        except sdk_error as exc:
            code, message = exc.error.code, exc.error.message
            if code in REQUEST_TIMEOUTS:
                raise ToolError(f"The MCP tool {tool} on server '{name}' timed out after {timeout:g} seconds; "
                                "the server was asked to cancel the call.") from None
            if self._lost or code in (CONNECTION_CLOSED, SESSION_TERMINATED):
                self._mark_lost()
                what = "stopped" if self.config.transport == "stdio" else "lost its connection"
                raise ToolError(self._with_tail(
                    f"The MCP server '{name}' {what} during the call to {tool}. {self._again()}")) from None
            self.backoff.answered()  # it answered, with a refusal
            raise ToolError(f"The MCP server '{name}' refused the call to {tool}: {message}") from None
        except (asyncio.CancelledError, ToolError):
            raise
        except Exception as exc:
            if self._lost:
                self._mark_lost()
                raise ToolError(self._with_tail(
                    f"The MCP server '{name}' stopped during the call to {tool}. {self._again()}")) from None
            raise ToolError(f"The MCP server '{name}' sent an answer to {tool} that Crystal cannot read: "
                            f"{_reason(exc)}") from None

    def _forgot_session(self, exc: McpError) -> bool:
        """Whether a streamable-HTTP server answered that it does not know our session:
        the SDK's "Session terminated" (its spelling of HTTP 404; mcp 1.x gives it a code
        without the minus sign), a JSON-RPC error that names the session
        (server-everything's -32000 "Bad Request: No valid session ID provided"), or a
        generic error (or, with mcp 1.x, whose client closes the transport on a 400, the
        connection closed) after the response hook saw the server refuse our session."""
        if self.config.transport != "http":
            return False
        if self._session_refused:  # the server said so itself: it did not run the call
            return True
        text = str(exc.error.message or "").lower()
        if text == "session terminated":
            return True
        return exc.error.code in (INVALID_REQUEST, CONNECTION_CLOSED) and "session" in text

    async def _reinitialize(self) -> ClientSession:
        """A fresh MCP session with the same server (not counted as a restart: the server
        is up, it only forgot us). ToolError when it cannot be opened."""
        assert self._lock is not None
        async with self._lock:
            await self._halt()
            self._lost, self.state = False, "not started"
        try:
            return await self.ensure_running()
        except ToolError as exc:
            raise ToolError(f"The MCP server '{self.config.name}' forgot this session and a new one could "
                            f"not be opened: {exc}") from None

    def _gone_event(self) -> asyncio.Event:
        assert self._gone is not None  # start() made it; calls come after ensure_running()
        return self._gone

    def _mark_lost(self) -> None:
        self._lost = True
        self._note_stopped()
        if self._wake is not None:
            self._wake.set()

    def _again(self) -> str:
        """When a server that just stopped is tried again (MCP-R)."""
        if self.backoff.waiting():
            return f"It is tried again at a call after {self.backoff.next_try()}."
        return "It is started again at the next call."


async def _list_all(session: ClientSession) -> list[mcp_types.Tool]:
    """Every page of tools/list (bounded)."""
    from mcp import types as mcp_types

    tools: list[mcp_types.Tool] = []
    cursor = None
    for _ in range(LIST_PAGES):
        params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
        result = await session.list_tools(params=params)
        tools.extend(result.tools)
        cursor = sdk.field(result, "nextCursor")
        if not cursor:
            break
    return tools


def _reason(exc: BaseException) -> str:
    """The first real error inside (possibly nested) exception groups, as words for a
    person (no exception class names)."""
    groups = getattr(builtins, "BaseExceptionGroup", ())  # Python 3.11 and later
    while True:
        inner = getattr(exc, "exceptions", None) if groups and isinstance(exc, groups) else None
        if not inner:
            break
        exc = inner[0]
    text = str(exc).strip().splitlines()[0].strip() if str(exc).strip() else ""
    kind = type(exc).__name__
    if getattr(getattr(exc, "error", None), "code", None) == CONNECTION_CLOSED:
        return "the server closed the connection"
    if kind == "ConnectError" or isinstance(exc, ConnectionRefusedError) or "refused" in text.lower():
        return REFUSED
    if "Timeout" in kind or isinstance(exc, TimeoutError):
        return "it did not answer in time"
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(status, int):
        return f"it answered HTTP {status}"
    return text.rstrip(".") or "it failed without saying why"


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("crystal-kernel")
    except Exception:
        return "0"
