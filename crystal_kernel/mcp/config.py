"""MCP server configuration: ``{home}/mcp.json`` and ``<workspace>/.crystal/mcp.json``.

The format is the one people already write for other agents::

    {"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "some-server"], "env": {"TOKEN": "${TOKEN}"}},
        "tracker": {"url": "http://127.0.0.1:8931/mcp", "headers": {"Authorization": "Bearer ${KEY}"}}
    }}

Crystal's own keys per server (all optional): ``catalogs`` (``plan``/``work``, default
``["work"]``), ``timeoutSeconds`` (per call, default 60, ``"unlimited"`` allowed),
``startupTimeoutSeconds`` (start + initialize + tool listing, default 30), ``risk``
(``write`` or ``execute`` for every tool of the server), ``tools`` (per MCP tool name:
``{"risk": "write"|"execute", "authority": "workspace"|"outside-workspace"}``) and
``disabled`` (true skips the server quietly). ``${VAR}`` and ``${VAR:-default}`` in
``command``, ``args``, ``env``, ``url`` and ``headers`` expand from the host's environment,
so secrets need not be written into the file.

A workspace file is used only once the person trusts it as it is (TRUST-2,
host/trust.py); until then it is not read at all and a note says how to trust it.

Overrides may only raise the external floor of write risk with workspace authority
(MODE-3); a lower value is ignored with a note. An entry that is not valid is skipped
with an English note naming the file; the other entries still load. A server named in
both files takes the workspace entry whole (as prompt attachments do, PA-4).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from crystal_kernel.core import paths
from crystal_kernel.tools.base import Authority, Risk

FILE_NAME = "mcp.json"
CATALOGS = frozenset({"plan", "work"})
DEFAULT_TIMEOUT_SECONDS = 60.0
# A Python server on the SDK 1.x spends about 3 CPU seconds importing it (jsonschema and
# its format checkers come with `import mcp`): 15 s was too short on a busy machine.
DEFAULT_STARTUP_SECONDS = 30.0
MAX_STARTUP_SECONDS = 300.0
NAME_LIMIT = 64
_KNOWN_TYPES = {"stdio": "stdio", "http": "http", "streamable-http": "http", "streamableHttp": "http",
                "streamable_http": "http"}
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_RISKS = {"write": Risk.WRITE, "execute": Risk.EXECUTE}
_AUTHORITIES = {"workspace": Authority.WORKSPACE, "outside-workspace": Authority.OUTSIDE,
                "outside": Authority.OUTSIDE}


class EntryError(ValueError):
    """One server entry is not valid; the message completes 'server NAME in FILE ...'."""


@dataclass(frozen=True)
class ToolOverride:
    """A raised floor for one MCP tool."""

    risk: Risk = Risk.WRITE
    authority: Authority = Authority.WORKSPACE


@dataclass(frozen=True)
class ServerConfig:
    """One usable server entry, variables expanded."""

    name: str
    source: Path
    transport: Literal["stdio", "http"]
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    catalogs: frozenset[str] = frozenset({"work"})
    timeout: float | None = DEFAULT_TIMEOUT_SECONDS
    startup_timeout: float = DEFAULT_STARTUP_SECONDS
    risk: Risk = Risk.WRITE
    overrides: tuple[tuple[str, ToolOverride], ...] = field(default=())

    def key(self) -> str:
        """What decides whether a running server still matches this entry."""
        return json.dumps([self.transport, self.command, self.args, self.env, self.url, self.headers,
                           self.startup_timeout])

    def override(self, tool: str) -> ToolOverride:
        """The floor for one tool: the server's risk, raised by a per-tool entry."""
        for name, over in self.overrides:
            if name == tool:
                return ToolOverride(max(self.risk, over.risk), over.authority)
        return ToolOverride(self.risk, Authority.WORKSPACE)

    @property
    def where(self) -> str:
        """How listings and notes name this server."""
        target = shown_url(self.url or "") if self.transport == "http" else " ".join([self.command or "", *self.args]).strip()
        return f"MCP server '{self.name}' ({self.transport}: {target}; {self.source})"


CLIENT_SOURCE = Path("passed by the ACP client")
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#@\s]*@")


def shown_url(url: str) -> str:
    """``url`` as notes and listings show it: a user and password in it (``https://me:
    TOKEN@host``, often a ``${VAR}`` expanded) are written ``***``."""
    return _USERINFO.sub(r"\1***@", url)


def client_server(name: str, *, command: str | None = None, args: list[str] | None = None,
                  env: dict[str, str] | None = None, url: str | None = None,
                  headers: dict[str, str] | None = None) -> ServerConfig:
    """A server the person's ACP client passed in ``session/new`` (stdio, or HTTP with
    ``url``). It comes from the person's own client, so it needs no workspace trust;
    it runs under the same supervisor, floors and bounds as a configured server."""
    if url:
        return ServerConfig(name=name, source=CLIENT_SOURCE, transport="http", url=url,
                            headers=tuple(sorted((headers or {}).items())))
    return ServerConfig(name=name, source=CLIENT_SOURCE, transport="stdio", command=command,
                        args=tuple(args or ()), env=tuple(sorted((env or {}).items())))


def config_files(home: Path, workspace: Path) -> list[Path]:
    """The two files, Home first; the workspace file wins for a name in both."""
    return [Path(home) / FILE_NAME, paths.workspace_mcp_file(workspace)]


def load_servers(home: Path, workspace: Path, notes: list[str]) -> list[ServerConfig]:
    """Every usable server entry of both files, in file order (Home, then workspace)."""
    from crystal_kernel.core.trust import is_trusted

    found: dict[str, ServerConfig] = {}
    for index, path in enumerate(config_files(home, workspace)):
        if index == 1 and path.is_file():
            # TRUST-2: a workspace file is not even read (no ${VAR} expands) until the
            # person trusts it as it is now.
            state = is_trusted(home, "mcp", path)
            if not state.trusted:
                notes.append(state.note())
                continue
        for server in read_file(path, notes):
            found.pop(server.name, None)  # the later file's entry is used whole
            found[server.name] = server
    return list(found.values())


def read_file(path: Path, notes: list[str], environ: dict[str, str] | None = None) -> list[ServerConfig]:
    """The usable entries of one file; a missing file holds none."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        notes.append(f"MCP configuration {path} cannot be read ({getattr(exc, 'strerror', None) or exc}); "
                     "its servers were skipped.")
        return []
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        notes.append(f"MCP configuration {path} is not valid JSON ({exc.msg} at line {exc.lineno} column "
                     f"{exc.colno}); its servers were skipped.")
        return []
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        notes.append(f"MCP configuration {path} has no \"mcpServers\" object; nothing was loaded from it.")
        return []
    env = dict(os.environ if environ is None else environ)
    out: list[ServerConfig] = []
    for name, entry in servers.items():
        try:
            server = parse_entry(name, entry, path, env, notes)
        except EntryError as exc:
            notes.append(f"MCP server '{name}' in {path} {exc}; skipped.")
            continue
        if server is not None:
            out.append(server)
    return out


def parse_entry(name: str, entry: Any, path: Path, env: dict[str, str], notes: list[str]) -> ServerConfig | None:
    """One entry; raises EntryError. Returns None for a server marked disabled."""
    if not name.strip() or len(name) > NAME_LIMIT:
        raise EntryError(f"has a name that is empty or longer than {NAME_LIMIT} characters")
    if not isinstance(entry, dict):
        raise EntryError("is not an object")
    if entry.get("disabled") is True:
        return None
    kind = entry.get("type")
    if kind is not None and kind not in _KNOWN_TYPES:
        raise EntryError(f"has type {kind!r}; Crystal speaks stdio and streamable HTTP (\"http\"), not SSE or others")
    has_command, has_url = "command" in entry, "url" in entry
    if has_command == has_url:
        raise EntryError("must set exactly one of \"command\" (a stdio server) or \"url\" (a streamable HTTP server)")
    common = _common(name, entry, path, notes)
    if has_command:
        if kind is not None and _KNOWN_TYPES[kind] != "stdio":
            raise EntryError(f"has type {kind!r} but sets \"command\"")
        command = _expand(_string(entry["command"], "command"), env, "command")
        args = tuple(_expand(a, env, "args") for a in _strings(entry.get("args", []), "args"))
        values = _string_map(entry.get("env", {}), "env")
        return ServerConfig(transport="stdio", command=command, args=args,
                            env=tuple((k, _expand(v, env, f"env.{k}")) for k, v in values.items()), **common)
    if kind is not None and _KNOWN_TYPES[kind] != "http":
        raise EntryError(f"has type {kind!r} but sets \"url\"")
    url = _expand(_string(entry["url"], "url"), env, "url")
    if not re.match(r"^https?://[^\s/]+", url):
        raise EntryError(f"has url {url!r}, which is not an http:// or https:// address")
    headers = _string_map(entry.get("headers", {}), "headers")
    return ServerConfig(transport="http", url=url,
                        headers=tuple((k, _expand(v, env, f"headers.{k}")) for k, v in headers.items()), **common)


def _common(name: str, entry: dict[str, Any], path: Path, notes: list[str]) -> dict[str, Any]:
    catalogs = entry.get("catalogs", ["work"])
    if (not isinstance(catalogs, list) or not catalogs or not all(isinstance(c, str) for c in catalogs)
            or not set(catalogs) <= CATALOGS):
        raise EntryError("has \"catalogs\" that is not a non-empty list of \"plan\" and/or \"work\"")
    timeout = entry.get("timeoutSeconds", DEFAULT_TIMEOUT_SECONDS)
    if timeout == "unlimited" or timeout is None:
        timeout = None
    elif isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise EntryError("has \"timeoutSeconds\" that is not a positive number or \"unlimited\"")
    startup = entry.get("startupTimeoutSeconds", DEFAULT_STARTUP_SECONDS)
    if isinstance(startup, bool) or not isinstance(startup, (int, float)) or not 0 < startup <= MAX_STARTUP_SECONDS:
        raise EntryError(f"has \"startupTimeoutSeconds\" that is not a number above 0 and at most "
                         f"{MAX_STARTUP_SECONDS:g}")
    risk = _risk(entry.get("risk", "write"), f"MCP server '{name}' in {path}", notes)
    overrides: list[tuple[str, ToolOverride]] = []
    tools = entry.get("tools", {})
    if not isinstance(tools, dict):
        raise EntryError("has \"tools\" that is not an object of tool names")
    for tool, over in tools.items():
        where = f"MCP server '{name}' in {path}, tool '{tool}'"
        if not isinstance(over, dict):
            notes.append(f"{where}: the override is not an object; ignored.")
            continue
        tool_risk = _risk(over.get("risk", "write"), where, notes)
        authority = over.get("authority", "workspace")
        if authority not in _AUTHORITIES:
            notes.append(f"{where}: authority {authority!r} is not workspace or outside-workspace; "
                         "the workspace floor is kept.")
            authority = "workspace"
        overrides.append((tool, ToolOverride(tool_risk, _AUTHORITIES[authority])))
    return {"name": name, "source": path, "catalogs": frozenset(catalogs), "timeout": None if timeout is None
            else float(timeout), "startup_timeout": float(startup), "risk": risk, "overrides": tuple(overrides)}


def _risk(value: Any, where: str, notes: list[str]) -> Risk:
    """Overrides only raise the floor (MODE-3): read, or anything unknown, keeps write."""
    if value in _RISKS:
        return _RISKS[value]
    if value == "read":
        notes.append(f"{where}: risk 'read' would lower the external floor; MCP tools stay at write risk.")
    else:
        notes.append(f"{where}: risk {value!r} is not write or execute; the write floor is kept.")
    return Risk.WRITE


def _string(value: Any, key: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise EntryError(f"has \"{key}\" that is not a non-empty string")
    return value


def _strings(value: Any, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise EntryError(f"has \"{key}\" that is not a list of strings")
    return value


def _string_map(value: Any, key: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise EntryError(f"has \"{key}\" that is not an object of strings")
    return value


def _expand(text: str, env: dict[str, str], key: str) -> str:
    """``${VAR}`` / ``${VAR:-default}`` from the host environment; an unset variable
    without a default refuses the entry (a server half-configured is worse than none)."""

    def one(match: re.Match[str]) -> str:
        value = env.get(match.group(1))
        if value is None:
            if match.group(2) is None:
                raise EntryError(f"uses ${{{match.group(1)}}} in \"{key}\", which is not set")
            return match.group(2)
        return value

    return _VAR.sub(one, text)


def tool_name(server: str, tool: str) -> str:
    """``SERVER_TOOL`` made to match ``^[a-z][a-z0-9_]{0,63}$``: lower case, other
    characters as ``_``, ``mcp_`` in front when it would not start with a letter, and a
    short hash when it has to be cut to 64 characters (so cut names stay distinct)."""
    raw = f"{server}_{tool}"
    name = re.sub(r"_+", "_", re.sub(r"[^a-z0-9_]", "_", raw.lower())).strip("_")
    if not name or not name[0].isalpha():
        name = "mcp_" + name
    if len(name) > NAME_LIMIT:
        digest = hashlib.sha1(raw.encode("utf-8")).hexdigest()[:8]
        name = name[: NAME_LIMIT - 9].rstrip("_") + "_" + digest
    return name
