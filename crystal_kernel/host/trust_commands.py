"""The person's ways to trust workspace configuration (TRUST-2, TRUST-5): ``crystal trust
[--workspace DIR] [list|FILE]`` and the ``/trust [list|FILE|all]`` slash command (the
kernel's Trust button calls :func:`trust_file` too). Nothing else writes trust."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crystal_kernel.core.errors import UserError
from crystal_kernel.core.textsafe import terminal_safe
from crystal_kernel.core.trust import (
    TrustStore,
    WorkspaceFile,
    describe,
    find_candidate,
    trust_all,
    workspace_states,
)

if TYPE_CHECKING:
    from crystal_kernel.host.session import Session


def trust_file(home: Path, workspace: Path, name: str) -> WorkspaceFile:
    """Trust the workspace file ``name`` as it is now; UserError when it is not one."""
    kind, path = find_candidate(workspace, name)
    return TrustStore(home).trust(kind, path)


def trusted_text(state: WorkspaceFile) -> str:
    return (f"Trusted {state.path} (sha256 {state.digest[:12]}…). A later change to it needs trust again.")


def add_subparsers(subparsers: Any) -> None:
    """Register ``crystal trust``."""
    p = subparsers.add_parser("trust", help="list or trust workspace configuration that runs programs or "
                                            "steers a decision (.crystal/mcp.json, .crystal/tools/<dir>/, "
                                            "review prompts, cassettes)")
    p.add_argument("target", nargs="?", default="list", metavar="list|FILE",
                   help="list (default), or the file (or exec set folder) to trust")
    p.add_argument("--workspace", metavar="DIR", default=".", help="workspace root (default .)")
    p.set_defaults(handler=cmd_trust)


def cmd_trust(ns: argparse.Namespace) -> int:
    from crystal_kernel.core.paths import home_dir

    workspace = Path(ns.workspace).expanduser()
    if not workspace.is_dir():
        raise UserError(f"The workspace '{ns.workspace}' is not a folder.")
    home = home_dir()
    if ns.target == "list":
        print(terminal_safe(describe(workspace_states(home, workspace))))
        return 0
    print(terminal_safe(trusted_text(trust_file(home, workspace, ns.target))))
    return 0


def trust_command(session: Session, target: str = "list") -> str:
    """``/trust`` lists, ``/trust FILE`` trusts one file, ``/trust all`` every untrusted one.
    The catalog is rebuilt, so trusted servers and tools are offered from the next request."""
    if target == "list":
        return describe(workspace_states(session.home, session.workspace))
    if target == "all":
        done = trust_all(session.home, session.workspace)
        if not done:
            return "Every workspace configuration file here is already trusted (or there is none)."
        lines = [trusted_text(s) for s in done]
    else:
        lines = [trusted_text(trust_file(session.home, session.workspace, target))]
    session.refresh_system()
    return "\n".join(lines)
