"""The command-line flags every front shares (FL-1..FL-3, MODE-7, the model settings).

Kept apart from host/bootstrap.py, which opens sessions and so imports the whole host:
the kernel and `crystal acp` parse their flags at start, before anything asks for a
session, and must not pay for that import there (the kernel's start to idle).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any, Literal

from crystal_kernel.core.errors import UserError


@dataclass
class ProcessFlags:
    """Process flags every front accepts (FL-*, MODE-7). Never saved."""

    prompt_set: str | None = None
    prompt_attachments: Literal["on", "off"] = "on"
    prompt_attachment: list[str] = field(default_factory=list)
    disable_tool: list[str] = field(default_factory=list)


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


def add_session_flags(parser: argparse.ArgumentParser, resume_help: str | None = None) -> None:
    """``--session ID`` and ``--resume ID``, alike on ``crystal``, ``crystal run`` and
    ``crystal space`` (SPEC §13 Fronts, FL-6); one or the other."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--session", metavar="ID",
                       help="continue this session, or start one with this id (default: a new session)")
    group.add_argument("--resume", metavar="ID",
                       help=resume_help or "continue a saved session, which must exist (default: a new session)")


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


def overrides_from_args(ns: argparse.Namespace) -> dict[str, Any]:
    return {
        "provider": getattr(ns, "provider", None), "model": getattr(ns, "model", None),
        "baseUrl": getattr(ns, "base_url", None), "apiKeyEnv": getattr(ns, "api_key_env", None),
        "mode": getattr(ns, "mode", None), "approval": getattr(ns, "approval", None),
        "reasoningEffort": getattr(ns, "reasoning", None),
    }


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
