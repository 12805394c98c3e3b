"""What the Crystal kernel publishes in its ``kernel_info_reply`` under ``crystal``, for
the JupyterLab status bar item: ``{"session", "mode", "approval", "provider", "model",
"promptSet", "workspace", "tokens", "busy"}``.

The lab extension asks for kernel info again each time the kernel goes idle, so the
item follows ``/mode``, ``/approval``, ``/model`` and ``/promptset``. Before the first
cell opens the session, the values are the configured ones (config < environment <
the kernel's flags) and ``session`` is null. This never raises: a kernel_info reply
must always go out.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from crystal_kernel.host.session import ProcessFlags, Session
    from crystal_kernel.jupyter.kernel import CrystalKernel


def kernel_status(kernel: CrystalKernel) -> dict[str, Any]:
    try:
        session = getattr(kernel, "crystal", None)
        if session is not None:
            return _from_session(session)
        return _from_config(kernel)
    except Exception as exc:  # the status bar is a convenience; say why it is empty
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}


def _prompt_set(home: Path, workspace: Path, flags: ProcessFlags) -> str:
    try:
        from crystal_kernel.prompts.selection import resolve_selection

        return resolve_selection(home, workspace, flags).set_label
    except Exception:
        return getattr(flags, "prompt_set", None) or "default"


def _from_session(session: Session) -> dict[str, Any]:
    provider = session.provider
    return {
        "session": session.id,
        "mode": session.mode,
        "approval": session.approval,
        "provider": getattr(provider, "name", None),
        "model": getattr(provider, "model", None),
        "promptSet": _prompt_set(session.home, session.workspace, session.flags),
        "workspace": str(session.workspace),
        "tokens": session.usage.total,
        "busy": bool(session.busy),
    }


def _from_config(kernel: CrystalKernel) -> dict[str, Any]:
    from crystal_kernel.core.config import load_config

    options = kernel.options
    config = load_config(overrides=options.overrides)
    workspace = kernel.workspace
    return {
        "session": None,
        "mode": config.mode,
        "approval": config.approval,
        "provider": config.provider,
        "model": config.effective_model,
        "promptSet": _prompt_set(config.home, workspace, options.process_flags()),
        "workspace": str(workspace),
        "tokens": 0,
        "busy": False,
    }
