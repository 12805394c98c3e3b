"""The front door: every front opens, resumes or forks a session here, the same way.

A front describes what it wants in a :class:`SessionOptions` and calls
:func:`open_session`; nothing outside ``host/`` constructs a ``Session`` (a test guards
it). Behind the door, once for every front (docs/architecture.md, "The front door"):
config precedence (file < env < overrides), the provider, resume or fork, the process
flags (FL-1..FL-3, MODE-7), and the boundary protections: the model keys leave the
process environment (TRUST-4, TRUST-6), the Home's signing key becomes a secret the host
redacts (TRUST-7) and client-supplied folders go through the one check of ``/access
add`` (host/folders.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from crystal_kernel.core.config import Config, load_config
from crystal_kernel.core.environ_block import scrub_initial_environment
from crystal_kernel.core.errors import UserError
from crystal_kernel.core.secrets import key_variables, pass_keys, withdraw_keys
from crystal_kernel.host.flags import ProcessFlags
from crystal_kernel.host.folders import add_client_folders
from crystal_kernel.host.grants import home_key
from crystal_kernel.host.session import Session
from crystal_kernel.providers.base import Provider

# What happens to the model key variables of this process once the provider holds its
# key: "withdraw" (a host process: kernel, `crystal run`, `crystal acp`, the other CLI
# commands) takes them out of os.environ and /proc/self/environ for good; "person_keeps"
# (the %crystal magics in the person's own IPython) leaves os.environ alone, because the
# person's cells may use them, and masks only the copy /proc/PID/environ shows (the
# python tool withdraws them while it runs). Nothing happens with passKeysToTools.
KeyPolicy = Literal["withdraw", "person_keeps"]


@dataclass(frozen=True)
class SessionOptions:
    """What a front asks of the front door: one session, new, resumed or forked."""

    workspace: Path | str
    # Settings that win over config.json and CRYSTAL_* (flags: --model, --mode, ...).
    overrides: Mapping[str, Any] = field(default_factory=dict)
    # Process flags (FL-*, MODE-7); copied per session, never saved.
    flags: ProcessFlags | None = None
    # The Crystal Home to read config from (default: CRYSTAL_HOME, else ~/.crystal).
    home: Path | None = None
    # Continue this saved session (it must exist).
    resume: str | None = None
    # With ``resume``: continue in a fork of it (a new id; the saved one is unchanged).
    fork: bool = False
    # Continue this session when it exists, else start a new one under this id.
    session_id: str | None = None
    # False: the session is never claimed or saved (``crystal prompts export``, ``crystal
    # tools call``); ``session_id`` is then only its id.
    saves: bool = True
    person_present: bool = True
    notebook: bool = False
    # A provider the front built itself (tests, the demo); default: from the config.
    provider: Provider | None = None
    # False: a person answers approvals but no question forms (ACP without elicitation);
    # the question tool is then not offered.
    questions_available: bool = True
    # Folders a client adds (ACP additionalDirectories): checked like /access add,
    # read-write for this session only, never signed into its document (TRUST-6).
    client_folders: tuple[str, ...] = ()
    # MCP server entries a client passes with the session (mcp/config.client_server).
    client_mcp_servers: tuple[Any, ...] = ()
    # Lines the front wants said in the session's first notes.
    notes: tuple[str, ...] = ()
    keys: KeyPolicy = "withdraw"


def open_session(options: SessionOptions) -> Session:
    """Open the session ``options`` describes; the one way in for every front.

    Every problem is a one-line UserError (a bad workspace, a missing ``resume``, a
    session another front holds, a flag naming an unknown prompt set)."""
    if not isinstance(options, SessionOptions):
        raise TypeError("open_session takes one SessionOptions (host/bootstrap.py), e.g. "
                        "open_session(SessionOptions(workspace, provider=...)).")
    workspace = Path(options.workspace).expanduser()
    if not workspace.is_dir():
        raise UserError(f"The workspace '{workspace}' is not a folder.")
    if options.fork and not options.resume:
        raise UserError("A fork needs the session to fork (resume).")
    config = load_config(options.home, overrides=dict(options.overrides))
    # TRUST-7: the Home's signing key is read before any tool can run, which makes its
    # value a known secret of this process (host/grants.py): it is redacted from tool
    # results and saved files in every front, kernel and magics too. A Home without one
    # gets it at the first signed save, which registers it as it makes it; opening a
    # session writes nothing in Home (crystal prompts export, a /help).
    home_key(config.home, create=False)
    provider = options.provider
    if provider is None:
        from crystal_kernel.providers.registry import make_provider

        provider = make_provider(config, workspace=workspace)
    from crystal_kernel.host.tool_sources import SessionTools

    flags = options.flags or ProcessFlags()
    # A session changes its flags (unknown tools dropped): each gets its own copy.
    flags = dataclasses.replace(flags, prompt_attachment=list(flags.prompt_attachment),
                                disable_tool=list(flags.disable_tool))
    session = Session(
        workspace=workspace, config=config, provider=provider, flags=flags,
        person_present=options.person_present, notebook=options.notebook, session_id=options.session_id,
        tool_source=SessionTools(),  # built-ins, exec sets, plugin tool sets, MCP servers
    )
    for note in config.notes:  # unknown config.json keys: said once, the file is left as it is
        session.note(note, once=True)
    if options.resume:
        session.resume(options.resume)
        if options.fork:
            session = session.fork()
    elif options.saves and options.session_id and session.store.exists(options.session_id):
        session.resume(options.session_id)
    elif options.saves and options.session_id:
        session.claim()  # a new session under a chosen id: one front at a time
    if options.overrides.get("mode"):
        session.mode = options.overrides["mode"]
    if not options.questions_available:
        session.set_questions_available(False)
    if options.client_mcp_servers:
        session.use_client_mcp_servers(list(options.client_mcp_servers))
    add_client_folders(session, options.client_folders)  # checked like /access add (TRUST-6)
    for line in options.notes:
        session.note(line)
    # Compose once now so that flag problems (FL-3) refuse to start.
    session.system_text()
    _guard_keys(config, options.keys)
    return session


def _guard_keys(config: Config, policy: KeyPolicy) -> None:
    """TRUST-4, TRUST-6: the provider (and any /model later, through
    secrets.key_value) holds the key now; code a tool runs in this process, and every
    process that reads /proc/<this pid>/environ, finds none."""
    if pass_keys(config):
        return
    if policy == "withdraw":
        withdraw_keys(config)
    else:
        scrub_initial_environment(key_variables())
