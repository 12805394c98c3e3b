"""The world of a command on the Landlock path (SANDBOX-2), made inside the private user
and mount namespace that jobs/landlock.py enters. Standard library only: the supervisor
loads it by path, through landlock.py.

bubblewrap (jobs/bwrap.py) builds a new root from an allow list. Here the command keeps
the host's root, seen through a mount namespace of its own, and what must not be seen or
shared is covered, in this order (a later mount lies on an earlier one):

1. A private temp: the session's own folder (jobs/bwrap.private_temp) is bound at
   ``/tmp``, ``/var/tmp`` and ``$TMPDIR`` (when that is another folder, not the
   workspace's nor one holding Home or the workspace). What lay inside them on the
   host and the command needs (Home, the workspace, the folders the person opened, an
   exec set's folders, Crystal's Python) is bound back at its place: read-only, except
   the writable roots and the ``allowed`` folders.
2. Hidden: each existing folder of ``hidden`` (the Crystal Home, the credential folders)
   is covered by an empty read-only tmpfs, each file by ``/dev/null``. An exec set's
   own folder (``protected``) and its data folders (``allowed``) inside one are bound
   back first, read-only and read-write.
3. ``/run`` (the host services' unix sockets: D-Bus, Docker, ``$XDG_RUNTIME_DIR``) is an
   empty read-only tmpfs; with the network, the file ``/etc/resolv.conf`` leads to
   there is bound back (systemd-resolved's stub).
4. ``/dev/shm`` is a tmpfs of its own, ``/dev/pts`` a new devpts instance (the person's
   terminals are not in it) and ``/dev/ptmx`` its ``ptmx``.
5. Without the network the namespace has a network namespace of its own
   (``CLONE_NEWNET``, made by the same ``unshare``): its loopback is brought up, and
   nothing else exists (no TCP, no UDP, no abstract unix socket of the host).

Mount points are made and mounted through descriptors (``/proc/self/fd``), never by a
path a command could have turned into a link in the private temp. Landlock, applied
after this, forbids every later change of these mounts (no ``umount``, no remount), and
jobs/landlock.py empties the capability bounding set (a command has none, even as root).
"""

import os
import sys

TYPE_CHECKING = False  # True for the type checker only
if TYPE_CHECKING or __package__:
    from crystal_kernel.jobs import libc
else:
    import libc  # jobs/libc.py, loaded by path by the supervisor (-I -S: no package)

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC = 32, 4096, 16384
TEMP_PLACES = ("/tmp", "/var/tmp")
RUN = "/run"
SIOCSIFFLAGS = 0x8914
IFF_UP, IFF_LOOPBACK, IFF_RUNNING = 0x1, 0x8, 0x40


class WorldError(Exception):
    """A step of the world failed after the namespace was entered: nothing runs."""


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _strictly_inside(path: str, root: str) -> bool:
    return path != root and _inside(path, root)


def _mount(lib: "libc.Libc", source: "str | None", target: str, fstype: "str | None", flags: int,
           data: "str | None" = None, what: str = "") -> None:
    enc = [None if x is None else os.fsencode(x) for x in (source, target, fstype, data)]
    if lib.mount(enc[0], enc[1], enc[2], libc.c_ulong(flags), enc[3]) != 0:
        raise WorldError(f"cannot mount {what or target}: {os.strerror(libc.get_errno())}")


def _open(path: str) -> "int | None":
    """An O_PATH descriptor of what ``path`` names now (links followed), or None."""
    try:
        return os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return None


def _is_dir(fd: int) -> bool:
    import stat

    return stat.S_ISDIR(os.fstat(fd).st_mode)


def _mount_point(path: str, folder: bool) -> int:
    """A descriptor of ``path`` as a mount point, made (folders, or an empty file last)
    where it is missing. Each part is opened without following links: a link or a file
    in the way (left by a command in the private temp) is removed and a folder made."""
    parts = [p for p in path.split("/") if p]
    at = os.open("/", os.O_PATH | os.O_CLOEXEC)
    try:
        for i, name in enumerate(parts):
            last = i == len(parts) - 1
            for _ in range(3):
                try:
                    fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=at)
                except FileNotFoundError:
                    try:
                        if last and not folder:
                            os.close(os.open(name, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o600,
                                             dir_fd=at))
                        else:
                            os.mkdir(name, 0o711, dir_fd=at)
                    except FileExistsError:
                        pass
                    continue
                import stat

                mode = os.fstat(fd).st_mode
                if stat.S_ISDIR(mode) or (last and not folder and not stat.S_ISLNK(mode)):
                    break
                os.close(fd)
                fd = -1
                os.unlink(name, dir_fd=at)  # a link or a file where a folder must be
            else:
                raise OSError(f"{path} keeps changing")
            os.close(at)
            at = fd
        return at
    except OSError:
        os.close(at)
        raise


def _bind(lib: "libc.Libc", source: int, path: str, writable: bool, make: bool) -> None:
    """Bind what ``source`` names at ``path`` (its mount point made when ``make``),
    read-only unless ``writable``."""
    folder = _is_dir(source)
    try:
        target = _mount_point(path, folder) if make else os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError as exc:
        raise WorldError(f"cannot mount {path}: {exc.strerror or exc}") from None
    try:
        _mount(lib, f"/proc/self/fd/{source}", f"/proc/self/fd/{target}", None, MS_BIND | MS_REC, what=path)
    finally:
        os.close(target)
    if not writable:
        _read_only(lib, path)


def _read_only(lib: "libc.Libc", path: str) -> None:
    """Remount the mount at ``path`` read-only, keeping the flags a user namespace must keep."""
    keep = ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
            (os.ST_NOATIME, 1024), (os.ST_NODIRATIME, 2048), (os.ST_RELATIME, 1 << 21))
    flags = os.statvfs(path).f_flag
    kept = sum(ms for st, ms in keep if flags & st)
    _mount(lib, None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | kept, what=path)


def temp_places(roots: list[str], home: "str | None") -> list[str]:
    """Where the private temp goes: /tmp, /var/tmp and $TMPDIR, resolved, existing; a
    $TMPDIR inside a writable root, or holding Home or one, is left as it is."""
    found: list[str] = []
    for given in (*TEMP_PLACES, os.environ.get("TMPDIR") or ""):
        if not given:
            continue
        real = os.path.realpath(given)
        if real == "/" or not os.path.isdir(real) or real in found:
            continue
        if given not in TEMP_PLACES and any(_inside(real, r) or _inside(r, real) for r in roots + ([home] if home else [])):
            continue
        found.append(real)
    return found


def _runtime() -> list[str]:
    """Crystal's Python (the supervisor and exec tools run it)."""
    return [os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, os.path.dirname(sys.executable))]


class World:
    """What :func:`build` makes: see the top. ``roots``: writable folders (not temp);
    ``protected``: read-only ones (an exec set's folder, /access ro folders, .crystal/)."""

    def __init__(self, temp: "str | None", hidden: list[str], writable: list[str], protected: list[str],
                 allowed: list[str], network: bool) -> None:
        self.temp, self.protected, self.allowed, self.network = temp, protected, allowed, network
        self.hidden = list(dict.fromkeys(os.path.realpath(p) for p in hidden))
        home = os.environ.get("HOME")
        self.home = os.path.realpath(home) if home and os.path.isdir(home) else None
        # The writable paths that are not temp folders (the workspace, /access rw folders).
        temps = {os.path.realpath(p) for p in (*TEMP_PLACES, os.environ.get("TMPDIR") or "/tmp")}
        self.roots = [p for p in dict.fromkeys(map(os.path.realpath, writable)) if p not in temps]
        self.places = temp_places(self.roots, self.home) if temp else []
        self.held: list[int] = []
        self.shown: list[tuple[str, int, bool]] = []  # (path, descriptor, writable)
        self.hidden_fds: list[tuple[str, int | None]] = []
        self.resolv: tuple[str, int] | None = None
        self.temp_fd = -1

    def open_all(self) -> None:
        """Everything the world binds back, opened now (in the namespace, before
        anything is covered: afterwards the host's paths are gone)."""
        if self.temp:
            fd = _open(self.temp)
            if fd is None:
                raise WorldError(f"cannot open the private temp {self.temp}")
            self.held.append(fd)
            self.temp_fd = fd
        wanted = [(p, False) for p in _runtime()] + [(p, True) for p in self.roots]
        wanted += [(p, False) for p in self.protected] + [(p, True) for p in self.allowed]
        for given, writable in wanted:
            path = os.path.realpath(given)
            in_temp = any(_inside(path, t) for t in self.places)
            in_hidden = any(_strictly_inside(path, h) for h in self.hidden) and path not in self.hidden
            if not (in_temp or in_hidden) or any(p == path for p, _, _ in self.shown):
                continue
            fd = _open(path)
            if fd is not None:
                self.held.append(fd)
                self.shown.append((path, fd, writable))
        # Outer folders first: a writable root inside read-only Home, a read-only .crystal/
        # inside the root, a writable data folder inside that, each lies on the one before.
        self.shown.sort(key=lambda item: item[0].rstrip("/").count("/"))
        resolv = os.path.realpath("/etc/resolv.conf")
        if self.network and _strictly_inside(resolv, RUN):
            fd = _open(resolv)
            if fd is not None:
                self.held.append(fd)
                self.resolv = (resolv, fd)
        self.hidden_fds = [(h, _open(h)) for h in self.hidden]
        self.held += [fd for _, fd in self.hidden_fds if fd is not None]

    def cover_temp(self, lib: "libc.Libc") -> None:
        """Step 1: the private temp, and what the command needs from the host's temp."""
        for place in sorted(self.places, key=len):
            nested = any(_strictly_inside(place, p) for p in self.places)
            _bind(lib, self.temp_fd, place, True, make=nested)
        for path, fd, writable in self.shown:
            if any(_inside(path, t) for t in self.places) and not any(_strictly_inside(path, h) for h in self.hidden):
                _bind(lib, fd, path, writable, make=True)

    def cover_rest(self, lib: "libc.Libc", pinned: "list[int] | None") -> None:
        """Steps 2 to 4. ``pinned``: a lasting confinement keeps the hidden paths'
        descriptors there (their inode numbers are not reused while it lives)."""
        for path, fd in self.hidden_fds:
            if fd is None or not os.path.lexists(path):
                continue
            if pinned is not None:
                self.held.remove(fd)
                pinned.append(fd)
            if not _is_dir(fd):
                _mount(lib, "/dev/null", path, None, MS_BIND)
                _read_only(lib, path)
                continue
            inner = [(p, f, w) for p, f, w in self.shown if _strictly_inside(p, path)]
            _mount(lib, "tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"mode={'0711' if inner else '0555'},size=16k",
                   what=path)
            for inner_path, inner_fd, writable in inner:
                _bind(lib, inner_fd, inner_path, writable, make=True)
            _read_only(lib, path)
        if os.path.isdir(RUN) and not os.path.islink(RUN):
            _mount(lib, "tmpfs", RUN, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=16k")
            if self.resolv is not None:
                _bind(lib, self.resolv[1], self.resolv[0], False, make=True)
            _read_only(lib, RUN)
        shm = os.path.realpath("/dev/shm")
        if os.path.isdir(shm) and not _inside(shm, RUN):
            _mount(lib, "tmpfs", shm, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
        _mount(lib, "devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620")
        _mount(lib, "/dev/pts/ptmx", "/dev/ptmx", None, MS_BIND)
        if not self.network:
            _loopback_up()

    def close(self) -> None:
        """Close what :meth:`open_all` opened (not what was pinned)."""
        for fd in self.held:
            os.close(fd)
        self.held = []


def _loopback_up() -> None:
    """The network namespace's loopback up (as bubblewrap does): a program may still talk
    to itself; nothing leaves."""
    try:
        import _socket
        import fcntl
        import struct

        sock = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)
        try:
            fcntl.ioctl(sock.fileno(), SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", IFF_UP | IFF_LOOPBACK | IFF_RUNNING))
        finally:
            sock.close()
    except (OSError, ImportError):
        pass  # loopback stays down: local servers fail, which Landlock's TCP rule refuses anyway
