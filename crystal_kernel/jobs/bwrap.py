"""The bubblewrap sandbox of a tool process (SANDBOX-2), built from an allow list.

bubblewrap (``bwrap``, Debian's ``bubblewrap``) starts the command in new namespaces:
a mount namespace that holds only what is listed here, its own PID, IPC, UTS and
network namespaces (the network one shared only with ``sandboxNetwork``), a new
session (no controlling terminal: TIOCSTI and ``/dev/tty`` reach nothing), a private
``/dev`` with a ``/dev/pts`` of its own, a ``/proc`` of its PID namespace, and no
capabilities. What the command's world holds, in mount order (a later mount lies on an
earlier one):

1. The system, read-only: ``/usr``, ``/bin``, ``/sbin``, the ``/lib`` folders, ``/etc``,
   ``/opt``, ``/var`` (its ``run`` and ``tmp`` are not the host's), ``/sys``, and the
   folders of the Python that runs Crystal and of Crystal itself (the supervisor is a
   Python program; a venv outside these folders is added).
2. A private temp: the session's own folder (made by the host, mode 0700) at ``/tmp`` and
   ``/var/tmp``; ``TMPDIR`` is ``/tmp``. Not the host's temp, not another session's.
3. Home, read-only (so dotfiles, ``~/.gitconfig`` and a pyenv Python work).
4. Readable folders the person opened (``/access add DIR ro``), read-only.
5. The writable roots (the workspace, ``/access add DIR rw``) read-write.
6. Protected folders inside them read-only again (the workspace's ``.crystal/``).
7. Hidden: the Crystal Home (the signing key, config, trust records) and the credential
   folders and files, each covered by an empty read-only folder (a folder) or by
   ``/dev/null`` (a file) wherever it lies inside what is bound.
8. Granted inside those: an exec set's own folder read-only (a Home set lives in the
   Crystal Home) and its data folders read-write.

Everything else (other people's homes, ``/root`` when it is not Home, ``/mnt``,
``/media``, ``/run`` with its sockets, the host's ``/tmp`` with the ssh-agent's and
the X server's sockets) does not exist in the command's world. Paths are resolved here,
once, by the host: what the command sees is what they named when the call started.
"""

from __future__ import annotations

import itertools
import os
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from crystal_kernel.core import paths

# The system folders a command may read (those that exist; merged-/usr links are kept as links).
SYSTEM_FOLDERS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/var", "/sys")
# An environment variable that names the bwrap program (tests; a bwrap outside PATH).
BWRAP_ENV = "CRYSTAL_BWRAP"

_works: dict[str, bool] = {}
# shutil.which walks PATH (~30-50 µs under load) and a sandboxed call asks three times:
# the program found is kept per PATH, and checked with one access() at each ask, so a
# bwrap removed since is noticed (docs/benchmarks.md).
_found: dict[str | None, str] = {}


def program() -> str | None:
    """The bwrap program to use, or None when there is none that works here."""
    found = os.environ.get(BWRAP_ENV)
    if not found:
        search = os.environ.get("PATH")
        found = _found.get(search)
        if found is None or not os.access(found, os.X_OK):
            found = shutil.which("bwrap")
            if found:
                _found[search] = found
    if not found:
        return None
    if found not in _works:
        _works[found] = _probe(found)
    return found if _works[found] else None


def _probe(found: str) -> bool:
    """Whether bwrap can make its namespaces here (a container may forbid them): ~5 ms, once."""
    try:
        done = subprocess.run([found, "--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/", "/",
                               "--dev", "/dev", "--proc", "/proc", "--", "/bin/true"],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=20)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _real(path: str | Path) -> str:
    return os.path.realpath(os.fspath(path))


def _named_real(paths: Iterable[str]) -> dict[str, None]:
    """The resolved paths of those of ``paths`` that exist as names (a dangling link
    counts), in order, once each. A path that is no name resolves to no name either, so
    it is left out before ``realpath``, which looks up each of its components: the ~26
    credential paths of a Home, most of them absent, cost ~290 lstat calls a sandboxed
    call (~0.3-0.6 ms) resolved first (docs/benchmarks.md)."""
    return dict.fromkeys(_real(p) for p in paths if os.path.lexists(p))


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _runtime_folders() -> list[str]:
    """The folders Crystal's own supervisor needs to read: its Python and its package,
    as named (a venv reached through a link) and resolved."""
    found = [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.abspath(sys.executable)),
             os.path.dirname(_real(sys.executable)), os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
    return [os.path.abspath(p) for p in found]


def _system_binds(args: list[str], home: str | None, temp: str | None) -> list[str]:
    """Read-only binds of the system; returns the roots bound."""
    bound: list[str] = []
    for folder in SYSTEM_FOLDERS:
        if os.path.islink(folder):
            args += ["--symlink", os.readlink(folder), folder]
            bound.append(folder)  # the name is there (merged /usr: /bin -> usr/bin)
        elif os.path.isdir(folder):
            args += ["--ro-bind", folder, folder]
            bound.append(folder)
    named = dict.fromkeys(_runtime_folders())
    for folder in dict.fromkeys(_real(p) for p in named):
        if os.path.isdir(folder) and not any(_inside(folder, b) for b in bound) and not (
                home and _inside(folder, home)):
            args += ["--ro-bind", folder, folder]
            bound.append(folder)
    for given in named:
        _name_through_link(args, given, bound, temp)
    return bound


def _name_through_link(args: list[str], given: str, bound: list[str], temp: str | None = None) -> None:
    """A folder named through a link (/home -> /var/home, a venv that is a link): the
    name the command is given leads there too, when nothing bound holds it already."""
    real = _real(given)
    if real == given or not os.path.isdir(real) or any(_inside(given, b) for b in bound):
        return
    bound.append(given)
    kept = _in_private_temp(given, temp)
    if kept is None:
        args += ["--symlink", real, given]
        return
    # In the private temp, which every call of the session shares: made there by the
    # host, once (bwrap refuses to make a link that is there, and two bwraps of one
    # session may start at once); one a command planted there is replaced.
    try:
        if os.path.islink(kept) and os.readlink(kept) == real:
            return
        os.makedirs(os.path.dirname(kept), mode=0o700, exist_ok=True)
        if os.path.islink(kept):
            os.unlink(kept)
        os.symlink(real, kept)
    except FileExistsError:
        pass  # another call made it meanwhile
    except OSError:
        args += ["--symlink", real, given]


def _in_private_temp(given: str, temp: str | None) -> str | None:
    """Where ``given`` (a path in the command's /tmp or /var/tmp) lies on the host."""
    for place in ("/tmp", "/var/tmp"):
        if temp is not None and given != place and _inside(given, place):
            return os.path.join(temp, os.path.relpath(given, place))
    return None


def _temp_place(args: list[str], temp: str | None, place: str) -> None:
    """The private temp at ``place`` (an empty one for the call when there is none)."""
    args += ["--bind", temp, place] if temp is not None else ["--tmpfs", place]


def _hide(args: list[str], path: str, later: list[str]) -> None:
    """Cover ``path`` (it exists) with nothing readable: an empty folder, made read-only
    at the end (``later``: mount points granted inside it are made first), or /dev/null."""
    if os.path.isdir(path):
        # Traversable, not listable: empty but for what is granted inside (an exec set's
        # folder in the Crystal Home), which a user who is not root must still reach.
        args += ["--perms", "0111", "--tmpfs", path]
        later.append(path)
    else:
        args += ["--ro-bind", "/dev/null", path]


def arguments(bwrap: str, *, roots: Sequence[str], readable: Sequence[str], protected: Sequence[str],
              allowed: Sequence[str], hidden: Sequence[str], temp: str | None, network: bool,
              programs: Sequence[str] = (), whole_system: bool = False, new_session: bool = True) -> list[str]:
    """The whole bwrap command line up to (not including) ``--`` and the program.

    ``roots``: read-write; ``readable``: read-only; ``protected``: read-only again inside
    a root; ``allowed``: read-write again inside a protected folder; ``hidden``: never
    readable; ``programs``: read-only even inside a hidden folder (an exec set's own
    folder in the Crystal Home); ``temp``: the private temp (None: an empty one that lives as long as the
    call); ``network``: share the host's network namespace; ``whole_system``: every
    folder read-only (a program of Crystal's own with fixed arguments: ripgrep), but
    still nothing of ``hidden``; ``new_session``: bwrap starts a session (no controlling
    terminal). Without it the sandbox stays in its starter's session, and is scheduled
    with it; the starter must have no controlling terminal itself (the spawn server lets
    go of the host's: jobs/spawn_server.py)."""
    home = os.environ.get("HOME") or str(Path.home())
    home_real = _real(home) if home and os.path.isdir(home) else None
    args = [bwrap, "--unshare-all", "--die-with-parent"]
    if network:
        args.append("--share-net")
    if new_session:
        args.append("--new-session")
    if whole_system:
        args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        emptied: list[str] = []
        for path in _named_real(hidden):
            if os.path.lexists(path):
                _hide(args, path, emptied)
        for path in emptied:
            args += ["--remount-ro", path]
        return args
    # /tmp first: Crystal's own Python or Home may lie in the host's /tmp and are bound
    # into it below (/var/tmp after /var, which it lies in).
    _temp_place(args, temp, "/tmp")
    bound = _system_binds(args, home_real, temp)
    system = list(bound)
    args += ["--dev", "/dev", "--proc", "/proc"]
    _temp_place(args, temp, "/var/tmp")
    if home_real is not None:
        args += ["--ro-bind", home_real, home_real]
        bound.append(home_real)
    for path in dict.fromkeys(_real(p) for p in readable):
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
            bound.append(path)
    for path in dict.fromkeys(_real(p) for p in roots):
        if os.path.isdir(path):
            args += ["--bind", path, path]
            bound.append(path)
    for path in _named_real(protected):
        if os.path.exists(path) and any(_inside(path, b) for b in bound):
            args += ["--ro-bind", path, path]
    covered: list[str] = []
    for path in _named_real(hidden):
        if os.path.lexists(path) and any(_inside(path, b) for b in bound):
            _hide(args, path, covered)
    # Granted inside what is protected or hidden, so bound after it: an exec set's folder
    # and its data folders.
    for path in dict.fromkeys(_real(p) for p in programs):
        if os.path.exists(path) and not any(_inside(path, b) for b in system):
            args += ["--ro-bind", path, path]
            bound.append(path)
    for given in sorted(dict.fromkeys(os.path.abspath(p) for p in programs), key=len):
        _name_through_link(args, given, bound, temp)  # a venv reached through a link keeps its name
    for path in dict.fromkeys(_real(p) for p in allowed):
        if os.path.isdir(path):
            args += ["--bind", path, path]
    for given in [home, *roots]:
        if given:
            _name_through_link(args, os.path.abspath(given), bound, temp)
    cache = _real(os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache"))
    if not any(_inside(cache, _real(r)) for r in roots):
        # pip, uv, go, yarn and npm keep a cache: the person's is read-only here, the private temp is not.
        args += ["--setenv", "XDG_CACHE_HOME", "/tmp/.cache", "--setenv", "npm_config_cache", "/tmp/.cache/npm"]
    # The root bwrap builds the world in (and the folders it made for mount points) is
    # read-only too: a write anywhere but the binds above fails as it would on the host.
    for path in covered:
        args += ["--remount-ro", path]
    args += ["--remount-ro", "/", "--setenv", "TMPDIR", "/tmp"]
    return args


def private_temp(home: Path, owner: str) -> str:
    """The private temp folder of ``owner`` (a session id, or this process), made 0700
    under the Crystal Home's host-only ``sandbox-tmp`` folder: not the host's temp, and
    not where another session's commands write. Raises OSError when it cannot be made
    (then the command does not run)."""
    os.makedirs(home, mode=0o700, exist_ok=True)
    base = Path(home) / "sandbox-tmp"
    _own_folder(base)
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in owner)[:96] or "process"
    folder = base / safe
    if _own_folder(folder):
        _remove_stale(base)  # a session's first call: left-overs of sessions that never closed
    return str(folder)


# A private temp nothing touched for this long belongs to a session that never closed
# (its process crashed); at most this many are looked at per new session.
STALE_SECONDS = 7 * 24 * 3600
STALE_LOOKED_AT = 64


def _remove_stale(base: Path) -> None:
    now = time.time()
    try:
        entries = list(itertools.islice(os.scandir(base), STALE_LOOKED_AT))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False) and now - entry.stat(follow_symlinks=False).st_mtime > STALE_SECONDS:
                shutil.rmtree(entry.path, ignore_errors=True)
        except OSError:
            continue


def _own_folder(folder: Path) -> bool:
    """Make ``folder`` (mode 0700; True) or check the one there is ours and not a link."""
    made = True
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        made = False
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise OSError(f"{folder} is not a folder of this user")
    if info.st_mode & 0o077:
        os.chmod(folder, 0o700)
    return made


def remove_private_temp(home: Path, owner: str) -> None:
    """Remove a session's private temp (its session ended); errors are ignored."""
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in owner)[:96] or "process"
    shutil.rmtree(Path(home) / "sandbox-tmp" / safe, ignore_errors=True)


def hidden_paths(home: Path, credentials: Iterable[str]) -> list[str]:
    """What the command never reads: the Crystal Home and the credential folders and files."""
    return [str(home), *credentials, str(paths.home_dir())]
