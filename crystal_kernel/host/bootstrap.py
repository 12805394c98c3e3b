"""Opening a session the same way on every front: process flags, config precedence,
the provider, resume. Fronts (CLI, kernel, magics, ACP) call :func:`open_session`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from crystal_kernel.core.config import load_config
from crystal_kernel.core.errors import UserError
from crystal_kernel.host.session import ProcessFlags, Session


def add_process_flags(parser: argparse.ArgumentParser) -> None:
    """FL-1..FL-3 and MODE-7, accepted by every front. Never saved (FL-5)."""
    parser.add_argument("--prompt-set", dest="prompt_set", metavar="NAME",
                        help="use this prompt set even if its prompt.json says enabled: false; 'default' = the "
                             "built-in prompts (default: the set enabled in ~/.crystal/promptsets)")
    parser.add_argument("--prompt-attachments", dest="prompt_attachments", choices=("on", "off"), default="on",
                        help="off attaches no prompt attachment (default: on, as their prompt.json files say)")
    parser.add_argument("--prompt-attachment", dest="prompt_attachment", action="append", default=[], metavar="NAME",
                        help="attach this prompt attachment even if disabled; repeatable (default: none)")
    parser.add_argument("--disable-tool", dest="disable_tool", action="append", default=[], metavar="NAME",
                        help="leave out this built-in tool, e.g. bash; repeatable (default: none)")


def add_model_flags(parser: argparse.ArgumentParser) -> None:
    """The settings flags share with config.json and the CRYSTAL_* variables (they win)."""
    from crystal_kernel.core.config import APPROVAL_MODES

    parser.add_argument("--provider", metavar="P",
                        help="openai, openai-responses, anthropic, replay or a plugin's provider "
                             "(default: config.json's provider, else replay)")
    parser.add_argument("--model", metavar="M",
                        help="the model name (default: config.json's, else the provider's: gpt-4.1, "
                             "claude-sonnet-4-6)")
    parser.add_argument("--base-url", dest="base_url", metavar="U",
                        help="the model server's URL, e.g. http://localhost:11434/v1 for Ollama "
                             "(default: the provider's)")
    parser.add_argument("--api-key-env", dest="api_key_env", metavar="VAR",
                        help="the variable that holds the API key (default: OPENAI_API_KEY or ANTHROPIC_API_KEY)")
    parser.add_argument("--mode", choices=("plan", "work"),
                        help="the mode to start in (default: config.json's, else work)")
    # Checked by the config (one line naming the choices), so no argparse choices here.
    parser.add_argument("--approval", metavar="{" + ",".join(APPROVAL_MODES) + "}",
                        help="the approval mode (default: config.json's, else default)")


def add_reasoning_flag(parser: argparse.ArgumentParser) -> None:
    """SPEC §12 ``--reasoning EFFORT`` (config ``reasoningEffort``), on the fronts that run turns."""
    parser.add_argument("--reasoning", metavar="EFFORT", choices=("none", "low", "medium", "high", "default"),
                        help="reasoning effort: none, low, medium, high or default (the provider's)")


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
        "reasoningEffort": getattr(ns, "reasoning", None),
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
    from crystal_kernel.host.tool_sources import SessionTools

    session = Session(
        workspace=workspace, config=config, provider=provider, flags=flags,
        person_present=person_present, notebook=notebook, session_id=session_id,
        tool_source=SessionTools(),  # built-ins, exec sets, plugin tool sets, MCP servers
    )
    for note in config.notes:  # unknown config.json keys: said once, the file is left as it is
        session.note(note, once=True)
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
