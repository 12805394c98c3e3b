"""Opening a session the same way on every front: process flags, config precedence,
the provider, resume. Fronts (CLI, kernel, magics, ACP) call :func:`open_session`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from crystal_kernel.errors import UserError
from crystal_kernel.host.config import load_config
from crystal_kernel.host.session import ProcessFlags, Session


def add_process_flags(parser: argparse.ArgumentParser) -> None:
    """FL-1..FL-3 and MODE-7, accepted by every front."""
    parser.add_argument("--prompt-set", dest="prompt_set", metavar="NAME")
    parser.add_argument("--prompt-attachments", dest="prompt_attachments", choices=("on", "off"), default="on")
    parser.add_argument("--prompt-attachment", dest="prompt_attachment", action="append", default=[], metavar="NAME")
    parser.add_argument("--disable-tool", dest="disable_tool", action="append", default=[], metavar="NAME")


def add_model_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--provider")
    parser.add_argument("--model")
    parser.add_argument("--base-url", dest="base_url")
    parser.add_argument("--api-key-env", dest="api_key_env")
    parser.add_argument("--mode", choices=("plan", "work"))
    parser.add_argument("--approval")


def flags_from_args(ns: argparse.Namespace) -> ProcessFlags:
    if ns.prompt_attachments == "off" and ns.prompt_attachment:
        raise UserError("--prompt-attachment cannot be combined with --prompt-attachments off.")
    seen: list[str] = []
    for name in ns.prompt_attachment:
        if name not in seen:
            seen.append(name)
    return ProcessFlags(
        prompt_set=ns.prompt_set, prompt_attachments=ns.prompt_attachments,
        prompt_attachment=seen, disable_tool=list(ns.disable_tool),
    )


def overrides_from_args(ns: argparse.Namespace) -> dict[str, Any]:
    return {
        "provider": getattr(ns, "provider", None), "model": getattr(ns, "model", None),
        "baseUrl": getattr(ns, "base_url", None), "apiKeyEnv": getattr(ns, "api_key_env", None),
        "mode": getattr(ns, "mode", None), "approval": getattr(ns, "approval", None),
    }


def open_session(
    workspace: str | Path,
    *,
    overrides: dict[str, Any] | None = None,
    flags: ProcessFlags | None = None,
    resume: str | None = None,
    session_id: str | None = None,
    person_present: bool = True,
    notebook: bool = False,
    provider: Any = None,
) -> Session:
    """Build config (file < env < overrides), the provider and the session.

    ``resume`` must name a saved session; ``session_id`` continues that session when it
    exists and otherwise starts a new one with that id. Every problem is a UserError.
    """
    workspace = Path(workspace).expanduser()
    if not workspace.is_dir():
        raise UserError(f"The workspace '{workspace}' is not a folder.")
    config = load_config(overrides=overrides)
    if provider is None:
        from crystal_kernel.providers.registry import make_provider

        provider = make_provider(config, workspace=workspace)
    session = Session(
        workspace=workspace, config=config, provider=provider, flags=flags,
        person_present=person_present, notebook=notebook, session_id=session_id,
    )
    if resume:
        session.resume(resume)
    elif session_id and session.store.exists(session_id):
        session.resume(session_id)
    elif session_id:
        session.claim()  # a new session under a chosen id: one front at a time
    if overrides and overrides.get("mode"):
        session.mode = overrides["mode"]
    # Compose once now so that flag problems (FL-3) refuse to start.
    session.system_text()
    return session
