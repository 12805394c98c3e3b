"""What the sandbox of a tool's processes allows (SANDBOX-1), decided in the host.

Every process a tool starts runs under the job supervisor
(:mod:`crystal_kernel.jobs.supervisor`); :meth:`Sandbox.launcher_args` are the options
that make the supervisor confine itself with Landlock (:mod:`crystal_kernel.jobs.landlock`)
before it starts the command, so the command and everything it starts inherit the
restrictions. docs/security.md lists what is enforced and the limits.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from crystal_kernel.core import paths
from crystal_kernel.core.access import CREDENTIAL_DIRS, CREDENTIAL_SUFFIXES
from crystal_kernel.core.config import Config
from crystal_kernel.jobs import bwrap

# Test switch: pretend the kernel's Landlock ABI is this (0: no Landlock), to exercise
# the fallback on a machine that has it. Set, it also means "the Landlock path only".
ABI_ENV = "CRYSTAL_SANDBOX_ABI"
# Test switch: "0" pretends no user namespace can be made here (the Landlock path then
# cannot build SANDBOX-2's world: the sandbox counts as missing).
NAMESPACE_ENV = "CRYSTAL_SANDBOX_NAMESPACE"
# Test switch: which mechanism to use, ``bubblewrap`` or ``landlock`` (either: only when
# it works here); unset, bubblewrap where it works, else Landlock (SANDBOX-2).
MECHANISM_ENV = "CRYSTAL_SANDBOX_MECHANISM"
BUBBLEWRAP, LANDLOCK = "bubblewrap", "landlock"
# Files and folders of /dev that ordinary programs write: output thrown away, terminals,
# shared memory (Python's multiprocessing locks). On the Landlock path these are granted
# inside its namespace (jobs/landlock_world.py): /dev/pts and /dev/ptmx are a devpts
# instance of the command's own and /dev/shm a tmpfs of its own, so the person's terminals
# are not among them; /dev/tty is only ever the command's own terminal (it starts in a
# session of its own, with none).
DEVICE_PATHS = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx",
                "/dev/pts", "/dev/shm")
CREDENTIAL_FILES_IN_HOME = (".netrc", ".git-credentials", ".pgpass", ".pypirc", ".npmrc")
# What a command says when the sandbox's network namespace refused it (SANDBOX-2; both mechanisms).
NETWORK_REFUSED_MARKERS = ("Connection refused", "Network is unreachable", "Temporary failure in name resolution",
                           "Could not resolve host", "Name or service not known")
# The one line the model gets when a sandboxed command failed on what the sandbox refuses.
# (EACCES from Landlock, EROFS and EBUSY from the read-only .crystal/ mount, EPERM, EXDEV
# from a rename Landlock refuses.)
REFUSED_MARKERS = ("Permission denied", "Read-only file system", "Operation not permitted",
                   "Device or resource busy", "Invalid cross-device link")

_abi: int | None = None
_namespace: bool | None = None


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


def namespace_works() -> bool:
    """Whether the Landlock path can enter the user, mount and network namespace it
    builds SANDBOX-2's world in (jobs/landlock_world.py); probed once per process in a
    process of its own (~15 ms), only where bubblewrap does not run."""
    global _namespace
    if os.environ.get(NAMESPACE_ENV, "").strip() == "0":
        return False
    if _namespace is None:
        folder = os.path.dirname(os.path.abspath(__file__))
        code = (f"import sys; sys.path.insert(0, {folder!r}); import landlock; "
                "sys.exit(0 if landlock.namespace_here() else 1)")
        try:
            done = subprocess.run([sys.executable, "-I", "-S", "-c", code], stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=20)
            _namespace = done.returncode == 0
        except (OSError, subprocess.SubprocessError):
            _namespace = False
    return _namespace


def mechanism() -> str | None:
    """What confines tool processes here: ``bubblewrap``, ``landlock``, or None (neither
    works on this system). bubblewrap is asked once per process (~5 ms). Landlock counts
    only with the namespace of :func:`namespace_works`: without it the Crystal Home, the
    credentials and the network could not be kept from a command (SANDBOX-2), so the
    sandbox is missing and commands are asked about (docs/security.md)."""
    forced = os.environ.get(MECHANISM_ENV, "").strip().lower()
    if forced not in (BUBBLEWRAP, LANDLOCK) and os.environ.get(ABI_ENV) is not None:
        forced = LANDLOCK
    if forced != LANDLOCK and bwrap.program() is not None:
        return BUBBLEWRAP
    if forced != BUBBLEWRAP and landlock_abi() >= 1 and namespace_works():
        return LANDLOCK
    return None


def temp_folders() -> list[str]:
    """Where any program may write scratch files."""
    found = ["/tmp", "/var/tmp", tempfile.gettempdir()]
    if os.environ.get("TMPDIR"):
        found.append(os.environ["TMPDIR"])
    return list(dict.fromkeys(found))


def credential_folders() -> list[str]:
    """The person's credential folders and files in their home (core/access.py's rules)."""
    return list(_credential_folders(os.path.expanduser("~")))  # what Path.home() gives, without pathlib


# Paths only (nothing read from the file system), asked twice per sandboxed call: ~0.2 ms
# each under load, most of an exec tool's own work (docs/benchmarks.md).
@lru_cache(maxsize=8)
def _credential_folders(home_text: str) -> tuple[str, ...]:
    home = Path(home_text)
    found = [home / name for name in sorted(CREDENTIAL_DIRS)]
    found += [home.joinpath(*suffix) for suffix in CREDENTIAL_SUFFIXES if suffix[0] != ".git"]
    found += [home / name for name in CREDENTIAL_FILES_IN_HOME]
    return tuple(str(p) for p in found)


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
    mechanism: str = LANDLOCK
    # bubblewrap only (SANDBOX-2): the read-write roots (the workspace, /access rw
    # folders), read-only folders (/access ro, an exec set's own folder), what is never
    # readable, the session's private temp, and "the whole system read-only" (ripgrep).
    roots: tuple[str, ...] = ()
    readable: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    temp: str | None = None
    whole_system: bool = False
    programs: tuple[str, ...] = ()

    def with_allowed(self, *folders: str) -> Sandbox:
        """The same rules plus folders that stay writable even inside a protected one
        (an exec set's own data folders)."""
        return replace(self, allowed=self.allowed + tuple(folders))

    def with_programs(self, *folders: str) -> Sandbox:
        """The same rules plus folders of programs the process runs and reads (an exec
        set's own folder, which may lie in the hidden Crystal Home); only bubblewrap
        restricts reads."""
        return replace(self, programs=self.programs + tuple(folders))

    def launcher_args(self) -> list[str]:
        """The supervisor's options that apply these rules. bubblewrap's are taken from
        the file system now (what exists is bound), so each call asks again."""
        if self.mechanism == BUBBLEWRAP:
            program = bwrap.program()
            if program is None:
                raise OSError("bubblewrap no longer works here")
            # ripgrep's sandbox (whole_system) stays in the host's session: Linux shares the CPU
            # between sessions first, and a search in a session of its own took up to 2.8x the
            # wall time under load (docs/benchmarks.md). It has no controlling
            # terminal all the same: its server is forked by the spawn server, which has none.
            wrapped = bwrap.arguments(program, roots=self.roots, readable=self.readable, protected=self.protected,
                                      allowed=self.allowed, hidden=self.hidden, temp=self.temp, programs=self.programs,
                                      network=self.network, whole_system=self.whole_system,
                                      new_session=not self.whole_system)
            # What the binds were taken from, for a server of this sandbox to compare before
            # each call (jobs/spawn_server.py), then the bwrap command line itself.
            out = ["--sandbox"]
            roots = self.roots + ((self.temp,) if self.temp else ())  # a temp removed and made again: a new server
            for flag, items in (("--write", roots), ("--protect", self.protected), ("--allow", self.allowed),
                                ("--hide", self.hidden), ("--read", self.readable + self.programs)):
                for item in items:
                    out += [flag, item]
            for item in wrapped:
                out += ["--wrap", item]
            return out
        args = ["--sandbox"]
        # SANDBOX-2 on Landlock (jobs/landlock_world.py): what is read-only (an exec set's own
        # folder, /access ro folders) is protected too, and so bound back inside a hidden folder.
        read_only = (*self.protected, *(p for p in (*self.readable, *self.programs) if p not in self.protected))
        for flag, items in (("--write", self.writable), ("--protect", read_only), ("--allow", self.allowed),
                            ("--cache", (self.cache,) if self.cache else ()), ("--hide", self.hidden),
                            ("--temp", (self.temp,) if self.temp else ())):
            for item in items:
                args += [flag, item]
        if not self.network:
            args.append("--no-network")
        return args

    def describe(self) -> str:
        """One line for the model: what a refusal means."""
        if self.mechanism == BUBBLEWRAP:
            where = ("inside the workspace (not its .crystal/ folder) and its private /tmp"
                     if self.roots else "only in its private /tmp")
            net = "" if self.network else "; it has no network"
            return (f"This ran in the sandbox (SANDBOX-2, bubblewrap): it may write {where}; Home and the "
                    f"system are read-only, the Crystal Home and credential folders are hidden, and folders "
                    f"not opened to it do not exist there{net}. A 'Permission denied', 'Read-only file "
                    "system' or 'No such file or directory' above may be the sandbox refusing. Do not try to "
                    "get around it: use the write/edit tools inside the workspace, or ask the person.")
        where = ("inside the workspace (not its .crystal/ folder) and its private /tmp"
                 if self.mode == "workspace-write" else "only in its private /tmp")
        net = "" if self.network else " and cannot open network connections"
        return (f"This ran in the sandbox (SANDBOX-1): it may write {where}{net}; the Crystal Home and "
                "credential folders are hidden. A 'Permission denied', 'Read-only file system', 'Operation not "
                "permitted' or 'Network is unreachable' above may be the sandbox refusing. "
                "Do not try to get around it: use the write/edit tools inside the workspace, or ask the person.")


def sandbox_for(config: Config, workspace: Path, *, writable: tuple[Path, ...] = (),
                readable: tuple[Path, ...] = (), session: str = "") -> Sandbox | None:
    """The sandbox of a tool process in ``workspace`` (None: ``sandbox`` is ``off`` or
    neither bubblewrap nor Landlock works here; :func:`sandbox_state` tells which).
    ``writable``/``readable``: more folders the person opened (``/access add DIR rw|ro``);
    ``session``: whose private temp the process gets (bubblewrap; SANDBOX-2)."""
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
    if mechanism() == BUBBLEWRAP:
        return _bubblewrap_rules(config, workspace, writable, readable, session)
    return _rules(config, workspace, writable, readable, session)


def _bubblewrap_rules(config: Config, workspace: Path, writable: tuple[Path, ...], readable: tuple[Path, ...],
                      session: str) -> Sandbox:
    """SANDBOX-2's allow list: the workspace (read-write in ``workspace-write``, read-only
    in ``read-only``), the /access folders, the session's private temp; the workspace's
    .crystal/ read-only; the Crystal Home and credential folders hidden."""
    roots = (str(workspace), *map(str, writable)) if config.sandbox == "workspace-write" else ()
    seen = () if roots else (str(workspace), *map(str, writable))
    protected = (str(paths.host_dir(workspace)), str(config.home), *credential_folders())
    try:
        temp: str | None = bwrap.private_temp(Path(config.home), session or f"process-{os.getpid()}")
    except OSError:
        temp = None  # an empty private /tmp that lives as long as the call: still nobody else's
    return Sandbox(mode=config.sandbox, writable=(), protected=protected, network=bool(config.sandbox_network),
                   mechanism=BUBBLEWRAP, roots=roots, readable=(*seen, *map(str, readable)),
                   hidden=(str(config.home), *credential_folders()), temp=temp)


# The rules computed from the settings, the environment and the file system (the
# person's credential folders, where caches may go), kept per input: a call paid
# ~0.6 ms for them on first use and ~0.15 ms after (docs/benchmarks.md). Sandboxes are frozen.
_KEPT_RULES = 32
_kept: dict[tuple[object, ...], Sandbox] = {}


def _rules(config: Config, workspace: Path, writable: tuple[Path, ...], readable: tuple[Path, ...] = (),
           session: str = "") -> Sandbox:
    """SANDBOX-1's write rules, and SANDBOX-2's world as far as Landlock's namespace
    makes it (jobs/landlock_world.py): the session's private temp at /tmp, /var/tmp and
    $TMPDIR; the Crystal Home and credential folders hidden; no network namespace shared."""
    # Made (again) at every call, outside what is kept: a private temp removed since is
    # there again for the next command.
    try:
        temp: str | None = bwrap.private_temp(Path(config.home), session or f"process-{os.getpid()}")
    except OSError:
        temp = None  # the host's temp then: landlock_world.py leaves it as it is
    key = (config.sandbox, bool(config.sandbox_network), str(workspace), tuple(str(p) for p in writable),
           tuple(str(p) for p in readable), session, str(config.home), tempfile.gettempdir(), temp,
           *(os.environ.get(name) for name in ("HOME", "TMPDIR", "XDG_CACHE_HOME")))
    kept = _kept.get(key)
    if kept is not None:
        return kept
    roots = ([str(workspace)] + [str(p) for p in writable] if config.sandbox == "workspace-write" else [])
    protected = [str(paths.host_dir(workspace)), str(config.home), *credential_folders()]
    allowed = roots + temp_folders()
    seen = () if roots else (str(workspace), *map(str, writable))
    # Home is read-only (landlock_world.py binds it back when it lies in a temp folder),
    # unless it lies in a writable root.
    home = str(Path.home())
    if not any(home == r or home.startswith(r.rstrip("/") + "/") for r in roots):
        seen = (home, *seen)
    kept = Sandbox(mode=config.sandbox, writable=tuple(allowed + list(DEVICE_PATHS)),
                   protected=tuple(protected), network=bool(config.sandbox_network),
                   cache=_cache_folder(allowed, protected, private_temp=temp is not None),
                   readable=(*seen, *map(str, readable)), hidden=(str(config.home), *credential_folders()),
                   temp=temp)
    if len(_kept) >= _KEPT_RULES:
        _kept.clear()
    _kept[key] = kept
    return kept


def warm(config: Config, workspace: Path, session: str = "") -> Sandbox | None:
    """Do now, off the turn, what the first sandboxed call of a session would otherwise
    do itself (docs/benchmarks.md): ask the kernel's Landlock ABI (loads landlock.py) and compute
    the workspace's rules (returned: bash's, before any /access folder) for ``session``
    (makes its private temp, and under bubblewrap the workspace's .crystal/, as its first
    call would); safe from any thread."""
    if sandbox_state(config) != "on":
        return None
    if mechanism() == BUBBLEWRAP:
        # As bash's first call would have it: .crystal/ made (sandbox_for), its binds taken
        # from what is there; starting its server takes a bwrap and an interpreter (~25 ms).
        return sandbox_for(config, Path(workspace), session=session)
    return _rules(config, Path(workspace), (), session=session)


def _cache_folder(writable: list[str], protected: list[str], private_temp: bool = False) -> str | None:
    """A temp folder for the command's caches (pip, uv, go, npm) when the person's cache
    folder is outside what the sandbox lets it write; None when it is writable.
    ``private_temp``: in the session's private /tmp (SANDBOX-2)."""
    cache = os.path.realpath(os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache"))

    def inside(path: str, roots: list[str]) -> bool:
        return any(path == r or path.startswith(r.rstrip("/") + "/") for r in map(os.path.realpath, roots))

    if inside(cache, writable) and not inside(cache, protected):
        return None
    return os.path.join("/tmp" if private_temp else tempfile.gettempdir(), f"crystal-cache-{os.getuid()}")


def read_only_sandbox() -> Sandbox | None:
    """For programs that only read (ripgrep): no writes but temp, no network; with
    bubblewrap the whole system read-only but the Crystal Home and credential folders."""
    found = mechanism()
    if found == BUBBLEWRAP:
        return Sandbox(mode="read-only", writable=(), protected=(), mechanism=BUBBLEWRAP,
                       hidden=(str(paths.home_dir()), *credential_folders()), whole_system=True)
    if found is None:
        return None
    return Sandbox(mode="read-only", writable=tuple(temp_folders() + list(DEVICE_PATHS)), protected=(),
                   hidden=(str(paths.home_dir()), *credential_folders()))


def sandbox_state(config: Config) -> str:
    """``on``, ``off`` (the person's choice) or ``missing`` (wanted, but neither
    bubblewrap nor Landlock works here)."""
    if config.sandbox == "off":
        return "off"
    return "on" if mechanism() is not None else "missing"


def mechanism_note(config: Config) -> str:
    """One line for the person: which sandbox confines tool processes (SANDBOX-2)."""
    state = sandbox_state(config)
    if state == "off":
        return "Sandbox: off (\"sandbox\": \"off\" in config.json): tool processes run unconfined."
    if state == "missing":
        return ("Sandbox: none available (neither bubblewrap nor Landlock in a user namespace works here): tool "
                "processes are asked about.")
    found = mechanism()
    if found == BUBBLEWRAP:
        return (f"Sandbox: bubblewrap ({config.sandbox}): tool processes see the system and Home read-only, the "
                "workspace, their private /tmp, no Crystal Home or credentials"
                + (", and the network." if config.sandbox_network else ", and no network."))
    return (f"Sandbox: Landlock ({config.sandbox}; bubblewrap is not installed or does not work here): tool "
            "processes write only in the workspace and their private /tmp, no Crystal Home or credentials"
            + (", and the network" if config.sandbox_network else ", and no network")
            + "; they still see the host's processes (no PID namespace).")


MISSING_NOTE = ("The sandbox for tool processes (SANDBOX-1) is not available: this system has neither bubblewrap "
                "nor Landlock in a user namespace (Landlock alone cannot hide the Crystal Home and credentials "
                "or cut the network). "
                "Commands run unconfined, so bash, background jobs, exec tools and notebook_run are asked "
                "about in every approval mode, full and review included. Set \"sandbox\": \"off\" in "
                "config.json to run them as before without the sandbox.")


def refusal_note(sandbox: Sandbox | None, failed: bool, output: str) -> str | None:
    """The line for the model when a sandboxed process failed the way the sandbox
    makes it fail (EACCES, EPERM, EROFS in its output); None otherwise."""
    if sandbox is None or not failed:
        return None
    markers: tuple[str, ...] = REFUSED_MARKERS
    if not sandbox.network:
        markers += NETWORK_REFUSED_MARKERS
    if not any(marker in output for marker in markers):
        return None
    return sandbox.describe()
