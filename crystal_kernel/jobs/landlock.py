"""The tool-process sandbox, applied by the launcher to itself before it starts the
command (SANDBOX-1). Standard library only: the job supervisor loads it by path (it runs
as ``python -I -S``), and the host imports it to ask the kernel's Landlock ABI.

What is enforced, in the process that calls :func:`confine` and everything it starts:

- Writes (create, write, truncate, remove, rename, link, make special files) only
  beneath the ``writable`` paths. Reads and execution are not restricted.
- ``protected`` paths stay unwritable even when they lie inside a writable path (the
  workspace's ``.crystal/`` inside the workspace). Landlock only grants, it cannot take
  back a subfolder of a granted folder, so:

  1. Where an unprivileged user and mount namespace can be made (most Linux desktops;
     this is measured at each start, it costs ~1 ms), every existing protected path
     inside a writable one is bind-mounted read-only over itself in a private mount
     namespace (uid and gid mapped to themselves), and ``allowed`` subfolders of them
     (an exec set's data folder) are bound writable again. The writable path is then
     granted whole: new files at the workspace's top level work.
     A missing protected path could be created: its nearest existing folder is bound
     read-only instead (a Home inside a temporary test folder).
  2. Otherwise (or when a missing protected path would be created directly in the
     writable path: a workspace whose ``.crystal/`` does not exist yet)
     the writable path is split: each of its entries that holds no protected path is
     granted, the protected ones are not, and the folder itself is not, so no new entry
     can be created directly in it (a new file at the workspace's top level fails).

- No TCP: with ``network`` False and Landlock ABI >= 4, TCP ``connect`` and ``bind`` are
  refused (any address, loopback included). UDP and unix-domain sockets are not covered
  by Landlock; with ABI >= 6 abstract unix sockets made outside the sandbox are refused
  too.

A process confined here cannot lift the restrictions: Landlock domains only stack, and
``no_new_privs`` is set (set-uid programs such as ``sudo`` do not gain privileges).

Confined once for many calls (``lasting``: a spawn server that serves one sandbox,
jobs/spawn_server.py): the rules must not depend on a folder's entries, so the split
way is refused (:class:`NotLasting`, raised before anything is changed), and what the
rules were taken from is returned as identities, ``(path, st_dev, st_ino)`` (``None``
twice: missing), for the host to compare with ``os.stat`` before each call
(jobs/spawner.py). Each read-only bind's folder is held open (``O_PATH``) from before
it is bound, so its inode number cannot be reused by a folder made in its place.
"""

import os
import stat

TYPE_CHECKING = False  # True for the type checker only
if TYPE_CHECKING or __package__:
    from crystal_kernel.jobs import landlock_world, libc
else:
    import landlock_world  # jobs/landlock_world.py, beside this file
    import libc  # jobs/libc.py, loaded by path by the supervisor (-I -S: no package)

SYS_CREATE_RULESET = 444  # the same number on every Linux architecture since 5.13
SYS_ADD_RULE = 445
SYS_RESTRICT_SELF = 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

WRITE_FILE = 1 << 1
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_ALL = sum(1 << bit for bit in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6: no signal to a process outside the sandbox (SANDBOX-2)

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
# statvfs flags -> mount flags that a remount inside a user namespace must keep.
_KEEP = ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
         (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME), (os.ST_RELATIME, MS_RELATIME))

_libc: "libc.Libc | None" = None


class SandboxError(Exception):
    """The sandbox could not be set up; the command must not run."""


class NotLasting(SandboxError):
    """These rules cannot be kept for later calls (split: granted entry by entry).
    Raised before anything is changed."""


# The read-only binds' folders, held open by a lasting confinement (see the top).
_PINNED: list[int] = []
# An identity no stat matches: the folder changed while it was being bound.
_CHANGED = -1
# (path, st_dev, st_ino, st_mtime_ns or None); st_dev None: the path names nothing.
Identity = tuple[str, "int | None", "int | None", "int | None"]


def identity(path: str, with_entries: bool = False) -> Identity:
    """What ``path`` names now (links followed, as the rules are taken); with
    ``with_entries`` its modification time too, which changes when an entry of the
    folder is made, removed or renamed."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return (path, None, None, None)
    return (path, info.st_dev, info.st_ino, info.st_mtime_ns if with_entries else None)


def _identities(writable: list[str], allowed: list[str], protected: list[str]) -> list[Identity]:
    """What a lasting confinement's rules are taken from. Writable and allowed paths
    (not /dev's files: the system's, never replaced) and existing protected paths: what
    they name. A missing protected path: its nearest existing folder, with its entries
    (the missing part made since, as a folder or a link elsewhere, changes it), along the
    path as written and along its links resolved, and the missing path itself. (The
    world of :func:`confine`'s ``hidden`` and ``temp``: hidden paths count as protected
    ones, the private temp as a writable one.)"""
    out = [identity(p) for p in writable + allowed if not p.startswith("/dev/")]
    for path in protected:
        found = identity(path)
        if found[1] is not None:
            out.append(found)
            continue
        for start in dict.fromkeys([path, os.path.realpath(path)]):
            # The missing path itself too: the host then asks whether it exists now, which
            # does not depend on how fine the anchor's timestamps are (before Linux 6.13 a
            # folder's modification time moves by the clock tick, a few milliseconds).
            out.append((start, None, None, None))
            anchor = start
            while found[1] is None and anchor != os.path.dirname(anchor):
                anchor = os.path.dirname(anchor)
                found = identity(anchor, with_entries=True)
            out.append(found)
            found = (path, None, None, None)
    return list(dict.fromkeys(out))


def _lib() -> "libc.Libc":
    global _libc
    if _libc is None:
        _libc = libc.Libc()
    return _libc


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 when there is none (or it is disabled)."""
    try:
        lib = _lib()
        version = lib.syscall(SYS_CREATE_RULESET, None, libc.c_size_t(0), libc.c_uint32(CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(int(version), 0)


class _RulesetAttr(libc.Structure):
    _fields_ = [("handled_access_fs", libc.c_uint64), ("handled_access_net", libc.c_uint64),
                ("scoped", libc.c_uint64)]


class _PathBeneath(libc.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", libc.c_uint64), ("parent_fd", libc.c_int32)]


def _fail(what: str) -> "SandboxError":
    err = libc.get_errno()
    return SandboxError(f"{what}: {os.strerror(err)}")


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _exists(path: str) -> bool:
    return os.path.lexists(path)


def _nearest_existing(path: str) -> str:
    while not _exists(path) and path != os.path.dirname(path):
        path = os.path.dirname(path)
    return path


def _split(root: str, protected: list[str], out: list[str]) -> None:
    """Grant ``root`` entry by entry, leaving out the protected paths (and ``root``
    itself, so nothing new can be created in it)."""
    if any(_inside(root, p) for p in protected):
        return
    if not any(_inside(p, root) for p in protected):
        out.append(root)
        return
    try:
        names = os.listdir(root)
    except OSError:
        return
    for name in names:
        _split(os.path.join(root, name), protected, out)


def _write_file(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _mount(lib: "libc.Libc", source: str | None, target: str, flags: int) -> None:
    src = None if source is None else os.fsencode(source)
    if lib.mount(src, os.fsencode(target), None, libc.c_ulong(flags), None) != 0:
        raise _fail(f"cannot mount {target}")


def _enter_namespace(read_only: list[str], writable_again: list[str],
                     lasting: "list[Identity] | None" = None,
                     world: "landlock_world.World | None" = None) -> bool:
    """A private user and mount namespace where ``read_only`` paths are read-only bind
    mounts; False (nothing changed) when the system does not allow one. ``lasting``:
    each bound folder is held open first and its identity appended (``-1`` twice when
    the path named another folder once bound). ``world``: SANDBOX-2's world is made there
    too (jobs/landlock_world.py), with a network namespace of its own unless it has the
    network."""
    lib = _lib()
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWUSER | CLONE_NEWNS
    if world is not None and not world.network:
        flags |= CLONE_NEWNET
    if lib.unshare(flags) != 0:
        return False
    # From here a failure cannot be undone: it is an error, and the command does not run.
    try:
        _write_file("/proc/self/setgroups", "deny")
        _write_file("/proc/self/uid_map", f"{uid} {uid} 1")
        _write_file("/proc/self/gid_map", f"{gid} {gid} 1")
    except OSError as exc:
        raise SandboxError(f"cannot map the user into the namespace: {exc.strerror}") from None
    _mount(lib, None, "/", MS_REC | MS_PRIVATE)
    try:
        if world is not None:
            world.open_all()
            world.cover_temp(lib)
        _bind_read_only(lib, read_only, writable_again, lasting)
        if world is not None:
            world.cover_rest(lib, _PINNED if lasting is not None else None)
    except landlock_world.WorldError as exc:
        raise SandboxError(str(exc)) from None
    finally:
        if world is not None:
            world.close()
    return True


def _bind_read_only(lib: "libc.Libc", read_only: list[str], writable_again: list[str],
                    lasting: "list[Identity] | None") -> None:
    for path, extra in [(p, MS_RDONLY) for p in read_only] + [(p, 0) for p in writable_again]:
        held = None
        if lasting is not None:
            try:
                pin = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError as exc:
                raise SandboxError(f"cannot mount {path}: {exc.strerror}") from None
            _PINNED.append(pin)
            held = os.fstat(pin)
        _mount(lib, path, path, MS_BIND | MS_REC)
        kept = 0
        flags = os.statvfs(path).f_flag
        for st_flag, ms_flag in _KEEP:
            if flags & st_flag:
                kept |= ms_flag
        _mount(lib, None, path, MS_REMOUNT | MS_BIND | extra | kept)
        if lasting is not None and held is not None:
            bound = identity(path)  # the mount's root, seen from inside
            same = bound[1:3] == (held.st_dev, held.st_ino)
            lasting.append(bound if same else (path, _CHANGED, _CHANGED, None))


PR_CAPBSET_DROP = 24


def _drop_capabilities() -> None:
    """Empty the capability bounding set: a program the command runs gets none of the
    capabilities this process has in its user namespace, not even as root (uid 0 mapped
    to itself), as under bubblewrap. This process keeps its own, needing none after this."""
    lib = _lib()
    for cap in range(64):
        if lib.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            if libc.get_errno() == 22:  # EINVAL: past the last capability this kernel knows
                return
            raise _fail("cannot drop the capabilities")


def namespace_here() -> bool:
    """Whether this process can make the namespace SANDBOX-2's world needs (a user, mount
    and network namespace where tmpfs and devpts can be mounted: some systems let the
    user namespace be made but give it no right to mount). Changes this process: a probe
    run in a process of its own (jobs/sandbox.py) calls it, then exits."""
    lib = _lib()
    uid, gid = os.getuid(), os.getgid()
    if lib.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET) != 0:
        return False
    try:
        _write_file("/proc/self/setgroups", "deny")
        _write_file("/proc/self/uid_map", f"{uid} {uid} 1")
        _write_file("/proc/self/gid_map", f"{gid} {gid} 1")
        _mount(lib, None, "/", MS_REC | MS_PRIVATE)
        landlock_world._mount(lib, "tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV)
        landlock_world._mount(lib, "devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666")
    except (OSError, SandboxError, landlock_world.WorldError):
        return False
    return True


def plan(writable: list[str], protected: list[str], allowed: list[str],
         use_namespace: bool = True, lasting: "list[Identity] | None" = None,
         world: "landlock_world.World | None" = None) -> tuple[list[str], str]:
    """Decide (and, with ``use_namespace``, enter the namespace for) what Landlock grants.
    Returns ``(granted paths, how)`` where how is "namespace" or "split". ``lasting``:
    see :func:`confine`. ``world`` (SANDBOX-2): the namespace is entered whatever the
    paths, and must be: :class:`SandboxError` when it cannot be made."""
    writable = [os.path.realpath(p) for p in writable if _exists(p)]
    protected = [os.path.realpath(p) for p in protected]
    allowed = [os.path.realpath(p) for p in allowed if _exists(p)]
    # The private temp is not the host's: what lies in the host's temp is not in it.
    places = world.places if world is not None else []
    roots = [w for w in writable if w not in places]
    inside = [p for p in protected if any(_inside(p, w) and p != w for w in roots)]
    # A missing protected path could be created: its nearest existing folder is made
    # read-only instead, unless that folder is a writable root itself (then: split).
    binds = [_nearest_existing(p) for p in inside]
    split = any(b in writable for b in binds)
    if use_namespace and (world is not None or (inside and not split)):
        again = [a for a in allowed if any(_inside(a, b) for b in binds)]
        if split and lasting is not None:
            raise NotLasting("protected folders inside writable ones without a namespace are granted entry by entry")
        if _enter_namespace([] if split else sorted(set(binds)), [] if split else again, lasting, world):
            if not split:
                return writable + allowed, "namespace"
        elif world is not None:
            raise SandboxError("no user namespace can be made here, so the Crystal Home and credentials cannot be "
                               "hidden")
    if inside and lasting is not None:
        raise NotLasting("protected folders inside writable ones without a namespace are granted entry by entry")
    granted: list[str] = []
    for root in writable:
        _split(root, protected, granted)
    return granted + allowed, "split" if inside else "plain"


def confine(writable: list[str], protected: list[str], allowed: list[str], network: bool,
            use_namespace: bool = True, lasting: "list[Identity] | None" = None,
            hidden: "list[str] | None" = None, temp: "list[str] | None" = None) -> str:
    """Restrict this process (single-threaded: the launcher) and its future children.
    Raises :class:`SandboxError` when Landlock is missing or a step fails. Returns how
    protected paths inside writable ones were kept ("namespace", "split" or "plain").
    ``lasting``: confined once for many calls (see the top): :class:`NotLasting` instead
    of the split way, and the identities the rules were taken from are appended."""
    abi = abi_version()
    if abi < 1:
        raise SandboxError("Landlock is not available in this kernel")
    hidden, temp = list(hidden or ()), list(temp or ())
    world = None
    if (hidden or temp) and use_namespace:
        folders = [p for p in writable if _exists(p) and not p.startswith("/dev/")]
        world = landlock_world.World(temp[0] if temp else None, hidden, folders, protected, allowed, network)
    if lasting is not None:
        # Taken before the rules are: a folder replaced meanwhile then differs at the next call.
        lasting.extend(_identities(writable + temp[:1], allowed, protected + hidden))
    granted, how = plan(writable, protected, allowed, use_namespace, lasting, world)
    if world is not None:
        _drop_capabilities()
    lib = _lib()
    fs = WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_ALL
    if abi >= 2:
        fs |= REFER
    if abi >= 3:
        fs |= TRUNCATE
    attr = _RulesetAttr(fs, 0, 0)
    size = 8
    if not network and abi >= 4:
        attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP
        size = 16
        if abi >= 6:
            attr.scoped = SCOPE_ABSTRACT_UNIX
            size = 24
    if abi >= 6:
        # The host's processes (and the person's others) cannot be signalled from inside;
        # bubblewrap's PID namespace does the same there.
        attr.scoped |= SCOPE_SIGNAL
        size = 24
    ruleset = lib.syscall(SYS_CREATE_RULESET, libc.byref(attr), libc.c_size_t(size), libc.c_uint32(0))
    if ruleset < 0:
        raise _fail("cannot create the Landlock rules")
    try:
        for path in granted:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # vanished meanwhile: nothing to grant
            try:
                is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
                beneath = _PathBeneath(fs if is_dir else fs & (WRITE_FILE | TRUNCATE), fd)
                if lib.syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, libc.byref(beneath), 0) != 0:
                    raise _fail(f"cannot grant {path}")
            finally:
                os.close(fd)
        if lib.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise _fail("cannot set no_new_privs")
        if lib.syscall(SYS_RESTRICT_SELF, ruleset, 0) != 0:
            raise _fail("cannot enforce the Landlock rules")
    finally:
        os.close(ruleset)
    return how
