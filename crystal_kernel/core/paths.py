"""Every place Crystal keeps files: Home and the workspace's ``.crystal/`` folder.

One module names them all, so a folder is spelled once (TRUST-3 treats everything under
:data:`HOST_DIR` as host-owned; the server extension, the jobs, the kernel and the CLI
read the same job files). Functions take the root they are under and return a path;
none of them creates anything.
"""

from __future__ import annotations

import os
from pathlib import Path

# The folder of host-owned files in a workspace (TRUST-3), and Home's default name.
HOST_DIR = ".crystal"
# The workspace's MCP server file, and Home's (same name).
MCP_FILE = "mcp.json"
# The workspace's notebook map (the last session of each notebook).
NOTEBOOK_MAP_FILE = "notebooks.json"


def home_dir() -> Path:
    """Home is $CRYSTAL_HOME when set, else ~/.crystal."""
    env = os.environ.get("CRYSTAL_HOME")
    return Path(env).expanduser() if env else Path.home() / HOST_DIR


def host_dir(workspace: Path | str) -> Path:
    """``<workspace>/.crystal``: every host-owned file of a workspace lives under it."""
    return Path(workspace) / HOST_DIR


def sessions_dir(workspace: Path | str) -> Path:
    """``<workspace>/.crystal/sessions``: the session documents and their locks."""
    return host_dir(workspace) / "sessions"


def jobs_root(workspace: Path | str) -> Path:
    """``<workspace>/.crystal/data/jobs``: one folder of job logs per session."""
    return host_dir(workspace) / "data" / "jobs"


def job_dir(workspace: Path | str, session_id: str) -> Path:
    """``<workspace>/.crystal/data/jobs/<session_id>``: a session's job logs and status."""
    return jobs_root(workspace) / session_id


def tool_data_dir(workspace: Path | str, set_name: str) -> Path:
    """``<workspace>/.crystal/data/tools/<set>``: an exec tool set's own data folder."""
    return host_dir(workspace) / "data" / "tools" / set_name


def index_dir(workspace: Path | str) -> Path:
    """``<workspace>/.crystal/index``: the search tool's index."""
    return host_dir(workspace) / "index"


def cassettes_dir(workspace: Path | str) -> Path:
    """``<workspace>/.crystal/cassettes``: the replay provider's recordings."""
    return host_dir(workspace) / "cassettes"


def default_cassette(workspace: Path | str = ".") -> Path:
    """The replay provider's cassette when none is named."""
    return cassettes_dir(workspace) / "default.json"


def workspace_tools_dir(workspace: Path | str) -> Path:
    """``<workspace>/.crystal/tools``: the workspace's exec tool sets (trusted first)."""
    return host_dir(workspace) / "tools"


def workspace_skills_dir(workspace: Path | str) -> Path:
    """``<workspace>/.crystal/skills``: the workspace's skills."""
    return host_dir(workspace) / "skills"


def workspace_prompts_dir(workspace: Path | str) -> Path:
    """``<workspace>/.crystal/prompts``: the workspace's prompt files."""
    return host_dir(workspace) / "prompts"


def workspace_attachments_dir(workspace: Path | str) -> Path:
    """``<workspace>/.crystal/prompt-attachments``: the workspace's prompt attachments."""
    return host_dir(workspace) / "prompt-attachments"


def workspace_mcp_file(workspace: Path | str) -> Path:
    """``<workspace>/.crystal/mcp.json``: the workspace's MCP servers (trusted first)."""
    return host_dir(workspace) / MCP_FILE


def notebook_map_file(workspace: Path | str) -> Path:
    """``<workspace>/.crystal/notebooks.json``: which session each notebook last used."""
    return host_dir(workspace) / NOTEBOOK_MAP_FILE


# Home's folder of host-only state (SANDBOX-2): what the host later runs, trusts or keeps
# secret, made 0700 by core/host_folders.py. Never in temp or the workspace, where tool
# processes write.
RUN_DIR = "run"


def run_dir(home: Path | str) -> Path:
    """``{home}/run``: host-only state of running Crystal processes (one folder each)."""
    return Path(home) / RUN_DIR


def process_dir(home: Path | str, kind: str, pid: int) -> Path:
    """``{home}/run/<kind>-<pid>``: the host-only folder of one process (``space``: a
    ``crystal space``'s kernelspec and Jupyter runtime files)."""
    return run_dir(home) / f"{kind}-{pid}"


def space_runtime_dir(home: Path | str, pid: int) -> Path:
    """``{home}/run/space-<pid>/runtime``: the Jupyter runtime folder of the ``crystal
    space`` process ``pid`` (its server file with the token, its kernels' connection files)."""
    return process_dir(home, "space", pid) / "runtime"


def space_kernels_dir(home: Path | str, pid: int) -> Path:
    """``{home}/run/space-<pid>/kernels``: the kernelspec folder of that ``crystal space``."""
    return process_dir(home, "space", pid) / "kernels"
