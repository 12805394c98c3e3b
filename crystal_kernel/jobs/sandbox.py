"""What the sandbox of a tool's processes allows (SANDBOX-1), decided in the host.

Every process a tool starts runs under the job supervisor
(:mod:`crystal_kernel.jobs.supervisor`); :meth:`Sandbox.launcher_args` are the options
that make the supervisor confine itself with Landlock (:mod:`crystal_kernel.jobs.landlock`)
before it starts the command, so the command and everything it starts inherit the
restrictions. docs/security.md lists what is enforced and the limits.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from crystal_kernel.core import paths
from crystal_kernel.core.access import CREDENTIAL_DIRS, CREDENTIAL_SUFFIXES
from crystal_kernel.core.config import Config

# Test switch: pretend the kernel's Landlock ABI is this (0: no Landlock), to exercise
# the fallback on a machine that has it.
ABI_ENV = "CRYSTAL_SANDBOX_ABI"
# Files and folders of /dev that ordinary programs write: output thrown away, terminals,
# shared memory (Python's multiprocessing locks).
DEVICE_PATHS = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx",
                "/dev/pts", "/dev/shm")
CREDENTIAL_FILES_IN_HOME = (".netrc", ".git-credentials", ".pgpass", ".pypirc", ".npmrc")
# The one line the model gets when a sandboxed command failed on what the sandbox refuses.
# (EACCES from Landlock, EROFS and EBUSY from the read-only .crystal/ mount, EPERM, EXDEV
# from a rename Landlock refuses.)
REFUSED_MARKERS = ("Permission denied", "Read-only file system", "Operation not permitted",
                   "Device or resource busy", "Invalid cross-device link")

_abi: int | None = None


def landlock_abi() -> int:
    """The kernel's Landlock ABI (0: none), asked once per process."""
    global _abi
    forced = os.environ.get(ABI_ENV)
    if forced is not None and forced.strip().isdigit():
        return int(forced)
    if _abi is None:
        # Here, not at the top: landlock imports ctypes (~4 ms of every `crystal run` start).
        from crystal_kernel.jobs import landlock

        _abi = landlock.abi_version()
    return _abi


def temp_folders() -> list[str]:
    """Where any program may write scratch files."""
    found = ["/tmp", "/var/tmp", tempfile.gettempdir()]
    if os.environ.get("TMPDIR"):
        found.append(os.environ["TMPDIR"])
    return list(dict.fromkeys(found))


def credential_folders() -> list[str]:
    """The person's credential folders and files in their home (core/access.py's rules)."""
    home = Path.home()
    found = [home / name for name in sorted(CREDENTIAL_DIRS)]
    found += [home.joinpath(*suffix) for suffix in CREDENTIAL_SUFFIXES if suffix[0] != ".git"]
    found += [home / name for name in CREDENTIAL_FILES_IN_HOME]
    return [str(p) for p in found]


@dataclass(frozen=True)
class Sandbox:
    """The rules for one process: where it may write, what stays unwritable inside
    that, and whether it may use TCP."""

    mode: str
    writable: tuple[str, ...]
    protected: tuple[str, ...]
    allowed: tuple[str, ...] = ()
    network: bool = False
    # A temp folder the command's caches use when the person's own is not writable.
    cache: str | None = None

    def with_allowed(self, *folders: str) -> Sandbox:
        """The same rules plus folders that stay writable even inside a protected one
        (an exec set's own data folders)."""
        return replace(self, allowed=self.allowed + tuple(folders))

    def launcher_args(self) -> list[str]:
        """The supervisor's options that apply these rules."""
        args = ["--sandbox"]
        for flag, items in (("--write", self.writable), ("--protect", self.protected), ("--allow", self.allowed),
                            ("--cache", (self.cache,) if self.cache else ())):
            for item in items:
                args += [flag, item]
        if not self.network:
            args.append("--no-network")
        return args

    def describe(self) -> str:
        """One line for the model: what a refusal means."""
        where = ("inside the workspace (not its .crystal/ folder) and temp folders"
                 if self.mode == "workspace-write" else "only in temp folders")
        net = "" if self.network else " and cannot open network connections"
        return (f"This ran in the sandbox (SANDBOX-1): it may write {where}{net}; a 'Permission denied', "
                "'Read-only file system' or 'Operation not permitted' above may be the sandbox refusing. "
                "Do not try to get around it: use the write/edit tools inside the workspace, or ask the person.")


def sandbox_for(config: Config, workspace: Path, *, writable: tuple[Path, ...] = ()) -> Sandbox | None:
    """The sandbox of a tool process in ``workspace`` (None: ``sandbox`` is ``off`` or
    the kernel has no Landlock; :func:`sandbox_state` tells which). ``writable``: more
    folders the person opened for writing (``/access add DIR rw``)."""
    if sandbox_state(config) != "on":
        return None
    workspace = Path(workspace)
    # A missing .crystal/ could be created by the command and then read by the host;
    # an existing one is kept read-only (landlock.py explains how). Made at every call:
    # the person may have removed it since the last one.
    if config.sandbox == "workspace-write":
        try:
            paths.host_dir(workspace).mkdir(exist_ok=True)
        except OSError:
            pass
    return _rules(config, workspace, writable)


# The rules computed from the settings, the environment and the file system (the
# person's credential folders, where caches may go), kept per input: a call paid
# ~0.6 ms for them on first use and ~0.15 ms after (docs/benchmarks.md). Sandboxes are frozen.
_KEPT_RULES = 32
_kept: dict[tuple[object, ...], Sandbox] = {}


def _rules(config: Config, workspace: Path, writable: tuple[Path, ...]) -> Sandbox:
    key = (config.sandbox, bool(config.sandbox_network), str(workspace), tuple(str(p) for p in writable),
           str(config.home), tempfile.gettempdir(),
           *(os.environ.get(name) for name in ("HOME", "TMPDIR", "XDG_CACHE_HOME")))
    kept = _kept.get(key)
    if kept is not None:
        return kept
    roots = ([str(workspace)] + [str(p) for p in writable] if config.sandbox == "workspace-write" else [])
    protected = [str(paths.host_dir(workspace)), str(config.home), *credential_folders()]
    allowed = roots + temp_folders()
    kept = Sandbox(mode=config.sandbox, writable=tuple(allowed + list(DEVICE_PATHS)),
                   protected=tuple(protected), network=bool(config.sandbox_network),
                   cache=_cache_folder(allowed, protected))
    if len(_kept) >= _KEPT_RULES:
        _kept.clear()
    _kept[key] = kept
    return kept


def warm(config: Config, workspace: Path) -> Sandbox | None:
    """Do now, off the turn, what the first sandboxed call of a session would otherwise
    do itself (docs/benchmarks.md): ask the kernel's Landlock ABI (loads landlock.py) and compute
    the workspace's rules (returned: bash's, before any /access folder). Creates nothing;
    safe from any thread."""
    if sandbox_state(config) == "on":
        return _rules(config, Path(workspace), ())
    return None


def _cache_folder(writable: list[str], protected: list[str]) -> str | None:
    """A temp folder for the command's caches (pip, uv, go, npm) when the person's cache
    folder is outside what the sandbox lets it write; None when it is writable."""
    cache = os.path.realpath(os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache"))

    def inside(path: str, roots: list[str]) -> bool:
        return any(path == r or path.startswith(r.rstrip("/") + "/") for r in map(os.path.realpath, roots))

    if inside(cache, writable) and not inside(cache, protected):
        return None
    return os.path.join(tempfile.gettempdir(), f"crystal-cache-{os.getuid()}")


def read_only_sandbox() -> Sandbox | None:
    """For programs that only read (ripgrep): no writes but temp, no network."""
    if landlock_abi() < 1:
        return None
    return Sandbox(mode="read-only", writable=tuple(temp_folders() + list(DEVICE_PATHS)), protected=())


def sandbox_state(config: Config) -> str:
    """``on``, ``off`` (the person's choice) or ``missing`` (wanted, but no Landlock)."""
    if config.sandbox == "off":
        return "off"
    return "on" if landlock_abi() >= 1 else "missing"


MISSING_NOTE = ("The sandbox for tool processes (SANDBOX-1) is not available: this system has no Landlock. "
                "Commands run unconfined, so bash, background jobs, exec tools and notebook_run are asked "
                "about in every approval mode, full and review included. Set \"sandbox\": \"off\" in "
                "config.json to run them as before without the sandbox.")


def refusal_note(sandbox: Sandbox | None, failed: bool, output: str) -> str | None:
    """The line for the model when a sandboxed process failed the way the sandbox
    makes it fail (EACCES, EPERM, EROFS in its output); None otherwise."""
    if sandbox is None or not failed or not any(marker in output for marker in REFUSED_MARKERS):
        return None
    return sandbox.describe()
