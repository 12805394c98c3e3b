"""FL-6: one check of a front's process flags and settings, before anything starts.

``crystal``, ``crystal run``, ``crystal space`` and ``crystal acp`` parse the same flags
(host/flags.py); ``check_front`` checks them the same way, and with them every setting
the process would use (config.json, the CRYSTAL_* variables), before a session is
opened, a server started or a file written. A bad one is one English line (a
UserError: exit 2), with a "did you mean" when a known name is close. ``/model``
checks its provider with ``check_provider`` too, before anything is saved.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Iterable
from pathlib import Path

from crystal_kernel.core.errors import UserError


def did_you_mean(word: str, known: Iterable[str], cutoff: float = 0.6) -> str:
    """`` (did you mean X?)`` for the closest known name, or ``""`` when none is close."""
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=cutoff)
    return f" (did you mean {close[0]}?)" if close else ""


def check_provider(name: str) -> None:
    """Refuse a provider name that is neither built in nor a plugin's, naming the close one."""
    from crystal_kernel.providers.registry import BUILTIN, known_providers

    if name in BUILTIN:  # the common case: no plugin scan
        return
    known = known_providers()
    if name not in known:
        raise UserError(f"Unknown provider '{name}'{did_you_mean(name, known)}; use one of: {', '.join(known)}.")


def check_model_prefix(prefix: str, spec: str, current: str) -> None:
    """``/model PREFIX:NAME`` where PREFIX names no provider is a model name with a colon
    on the current provider (Ollama's ``llama3:8b``), unless PREFIX is a typo of a
    provider's name (``antropic``): then one line, and nothing is switched or saved. Only
    a near miss counts (``openchat:7b`` stays a model name)."""
    from crystal_kernel.providers.registry import known_providers

    hint = did_you_mean(prefix, known_providers(), cutoff=0.8)
    if hint:
        raise UserError(f"Unknown provider '{prefix}'{hint}; for a model named '{spec}' on the current provider, "
                        f"write /model {current}:{spec}.")


def check_workspace(value: str | None) -> None:
    """The folder ``--workspace`` names exists and is a folder."""
    if value is None:
        return
    path = Path(value).expanduser()
    if not path.exists():
        raise UserError(f"The workspace folder '{value}' does not exist.")
    if not path.is_dir():
        raise UserError(f"The workspace '{value}' is not a folder.")


def check_session_ids(ns: argparse.Namespace) -> None:
    """``--session`` and ``--resume`` name a session id's shape (the store's own check)."""
    from crystal_kernel.host.store import _ID

    for flag in ("session", "resume"):
        value = getattr(ns, flag, None)
        if value is not None and not _ID.match(value):
            raise UserError(f"--{flag} '{value}' is not a valid session id (letters, digits, '.', '_', '-').")


def check_front(ns: argparse.Namespace) -> None:
    """FL-6: every flag a front took and every setting it would use, checked the same way
    on every front before anything starts or is written; UserError on the first bad one."""
    from crystal_kernel.core.config import load_config
    from crystal_kernel.core.paths import home_dir
    from crystal_kernel.host.flags import flags_from_args, overrides_from_args

    check_workspace(getattr(ns, "workspace", None))
    check_session_ids(ns)
    config = load_config(overrides=overrides_from_args(ns))  # config.json, CRYSTAL_*, flags: each value checked
    check_provider(config.provider)
    flags = flags_from_args(ns)
    if flags.disable_tool:
        from crystal_kernel.tools.catalog import check_disabled

        check_disabled(flags.disable_tool)
    if flags.prompt_set or flags.prompt_attachment:
        from crystal_kernel.prompts.selection import check_prompt_flags

        check_prompt_flags(home_dir(), Path(getattr(ns, "workspace", None) or ".").expanduser(), flags)
