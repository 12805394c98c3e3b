"""One long-lived supervisor per host that forks a job supervisor for each tool process
(standard library only, loaded by path like :mod:`supervisor`).

Why: starting a Python interpreter for the supervisor of every tool call cost ~10 ms of
CPU (docs/benchmarks.md), ten times the tool itself for a program that exits
at once. This server is started once (jobs/spawner.py) as
``python -I -S -c BOOT .../spawn_server.py HOST_PID CONTROL_FD``; for each request it
forks a copy of itself, already initialised, which becomes that call's supervisor:
the same code as a started one (:func:`supervisor.run`), so the guarantees are the same.

- No orphans (ROBUST-3). The server has a parent-death signal on the host and exits when
  the host closes the control socket. Each forked supervisor has a parent-death signal
  on the server and is a child subreaper: the host dies, the server gets SIGTERM and
  dies, each supervisor gets SIGTERM and stops its whole tree (TERM, then KILL after the
  grace). A forked supervisor leads a process group of its own (its pid, which the host
  signals to stop a call, as before); it is in a session of its own too unless the
  request asks to stay in the server's session (below).
- Scheduling. The server is in the host's session (a process group of its own, so a
  Ctrl-C in the host's terminal does not reach it). With automatic process grouping
  (``sched_autogroup_enabled``, on by default) Linux shares the CPU between sessions
  first, so a program in a session of its own under load gets one session's share, spread
  over its threads, and pays a wait at each hand-off with the host that reads its
  output: ripgrep's parallel search took 1.1-1.7x the wall time, with the same CPU, in a
  new session (docs/benchmarks.md). A request with ``session`` false (a program that
  never uses a terminal: ripgrep) keeps its supervisor in the host's session, as a
  program the host started itself would be; bash and exec tools still get a session of
  their own (no controlling terminal). So that such a call has no controlling terminal
  either (SANDBOX-2: the person's terminal is not a tool process's), the server lets go
  of the host's at its start (``TIOCNOTTY``, which for a process that does not lead its
  session detaches that process alone, and keeps its session); whatever it forks has
  none. bubblewrap's server of ripgrep's read-only sandbox is started without
  ``--new-session`` for the same reason (jobs/bwrap.py): with it, ripgrep was in a
  session of its own again (median 0.98 s against 0.35 s started directly, at load 7).
- Sandbox (SANDBOX-1). The forked supervisor confines itself with Landlock (and its
  mount namespace) before it starts the program: the server is single-threaded, so its
  fork may do that.
- A server per sandbox. Confining a call cost ~1.4 ms (min; 2.2 ms median under load),
  more than the whole of ``subprocess.run`` of a program that exits at once. So the
  host asks this server for a **server of one sandbox**: a fork of it that confines
  itself once (jobs/landlock.py, ``lasting``) and then serves requests the same way;
  every supervisor it forks inherits the Landlock domain and the mount namespace. It
  has a parent-death signal on this server (which has one on the host), so the chain
  ends with the host however it dies; when the host closes its socket (a server it
  no longer keeps) it waits for the calls still running, then exits. It first sends
  ``ready`` and marshal of (its pid, its state, the identities of what its rules were
  taken from), which the host compares with ``os.stat`` before each call: a folder
  replaced since (a ``.crystal/`` renamed and made again) means a new server
  (jobs/spawner.py). Rules that cannot be kept (split) leave it unconfined: each call
  confines itself, as here.

A request is one ``SOCK_SEQPACKET`` message: ``marshal`` of (argv, cwd, env,
sandbox launcher options, grace, linger, session) and four descriptors passed with
``SCM_RIGHTS``: the program's stdin, stdout and stderr and the status pipe's write end.
The forked supervisor writes on the status pipe ``pid PID`` (its own pid) at once,
``exit WAITSTATUS`` when the program ends and ``left N`` once its tree is stopped; the
pipe closes when it exits. A request that cannot be started gets ``error TEXT``.
A request for a server of one sandbox is ``S`` followed by marshal of the sandbox's
launcher options, with one descriptor: that server's end of its own socket.
"""

import _signal as signal
import _socket
import marshal
import os
import sys

TYPE_CHECKING = False  # True for the type checker only (importing typing costs a start)
if TYPE_CHECKING:
    from typing import TypeAlias

    from crystal_kernel.jobs.supervisor import _SandboxRules

    # A server's own sandbox: its launcher options, its state (supervisor.confine_lasting), its rules.
    Confined: TypeAlias = tuple[list[str], str, _SandboxRules] | None
if TYPE_CHECKING or __package__:
    from crystal_kernel.jobs import fdpass, landlock, supervisor
else:
    import fdpass
    import landlock  # loaded once here, not in every forked supervisor
    import supervisor

MAX_REQUEST = 1 << 20
FDS = 4


def _write(fd: int, line: str) -> None:
    try:
        os.write(fd, line.encode("utf-8", "replace") + b"\n")
    except OSError:
        pass


def _child(server: int, request: bytes, fds: list[int], confined: "Confined", spare: bool = False) -> None:
    """In the forked copy: become the supervisor of one call; never returns.
    ``confined``: this server's own sandbox (launcher options, state), or None;
    ``spare``: a spare that took the request (:func:`_spare` did the first steps)."""
    if not spare:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the server ignores it to reap us
    signal.pthread_sigmask(signal.SIG_BLOCK, supervisor.WATCHED)
    stdin, stdout, stderr, status = fds
    argv, cwd, env_bytes, launcher, grace, linger, session = marshal.loads(request)
    if session:
        os.setsid()
    else:
        os.setpgid(0, 0)
    _write(status, f"pid {os.getpid()}")
    if not spare:
        supervisor.arm(server)
    elif os.getppid() != server:
        os._exit(255)  # the server died while the request was taken
    for target, fd in enumerate((stdin, stdout, stderr)):
        os.dup2(fd, target)
    for fd in {stdin, stdout, stderr} - {0, 1, 2, status}:
        os.close(fd)
    try:
        os.chdir(cwd)
    except OSError as exc:
        sys.stderr.write(f"crystal: cannot enter {cwd}: {exc.strerror or exc}\n")
        sys.stderr.flush()
        _write(status, f"exit {127 << 8}")
        os._exit(127)
    # SANDBOX-2: the read-only binds' held folders are the server's, not the command's: a
    # command that can read its parent's /proc/PID/fd would write through them.
    for pinned in landlock._PINNED:
        try:
            os.close(pinned)
        except OSError:
            pass
    moved: dict[str, str] = {}  # the caches the sandbox moves (bytes environment below)
    wrap = None
    if confined is not None and confined[1] != "per-call" and confined[0] == launcher:
        if confined[1] != "confined":
            supervisor.refuse(confined[1], status)
        supervisor.use_caches(confined[2], moved)  # this server confined itself: only the caches, per call
        moved.update(supervisor.wrapped_environment(confined[2]))  # inside bubblewrap: its --setenv values
    elif launcher:
        rules, _ = supervisor._sandbox_options(["supervisor", *launcher])
        supervisor.confine_or_exit(rules, server, moved)
        wrap = rules.paths["wrap"] if rules is not None else None
    if moved:
        env_bytes.update({os.fsencode(key): os.fsencode(value) for key, value in moved.items()})
    supervisor.run(server, grace, argv[0], argv, env_bytes, status, drop_output=True, linger=linger, wrap=wrap)
    os._exit(0)


def detach_terminal() -> None:
    """Let go of the controlling terminal, if this process has one, without leaving its
    session (``TIOCNOTTY`` from a process that does not lead the session: only this
    process loses it). Children forked after have none: ``/dev/tty`` does not open."""
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError:
        return  # none (ENXIO), the usual case: nothing imported
    try:
        import fcntl
        import termios

        fcntl.ioctl(fd, termios.TIOCNOTTY)
    except OSError:
        pass
    finally:
        os.close(fd)


def serve(host: int, control_fd: int) -> None:
    """Answer requests on ``control_fd`` until the host closes it or dies."""
    supervisor._set_prctl(supervisor.PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != host:
        os._exit(255)  # the host died before the death signal was armed
    detach_terminal()  # a call kept in the host's session must not have the person's terminal
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the forked supervisors are reaped by the kernel
    _loop(host, _socket.socket(fileno=control_fd), None)


def _serve_one_sandbox(parent: int, options: bytes, control_fd: int) -> None:
    """In a fork of the server: confine this process once with the sandbox of
    ``options`` (marshal of its launcher options), say ``ready``, then serve calls."""
    control = _socket.socket(fileno=control_fd)
    # The parent-death signal on the server, which has one on the host.
    supervisor._set_prctl(supervisor.PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        os._exit(0)
    launcher = marshal.loads(options)
    rules, _ = supervisor._sandbox_options(["supervisor", *launcher])
    if rules is None:
        os._exit(0)  # not a sandbox's options: the host sees the socket closed
    if rules.paths["wrap"]:
        _exec_inside_bubblewrap(launcher, rules, control_fd)
    state, identities = supervisor.confine_lasting(rules)
    supervisor._set_prctl(supervisor.PR_SET_PDEATHSIG, signal.SIGTERM)  # kept through the namespace; again to be sure
    if os.getppid() != parent:
        os._exit(0)
    # SANDBOX-2: the host holds the read-only binds' folders from now on (it passes the
    # same stat checks), not this server, whose /proc/PID/fd every command it serves could
    # read: a folder handle there wrote through the read-only mount.
    held = list(landlock._PINNED[:64])
    try:
        control.sendmsg([b"ready " + marshal.dumps((os.getpid(), state, identities))], fdpass.rights(held))
    except OSError:
        os._exit(0)
    for pinned in landlock._PINNED:
        os.close(pinned)
    del landlock._PINNED[:]
    _serve_with_spares(parent, control, (launcher, state, rules))


# This server inside a bubblewrap sandbox (SANDBOX-2): _exec_inside_bubblewrap starts it.
_BOOT_INSIDE = ("import sys;sys.path.insert(0,sys.argv.pop(1).rpartition('/')[0]);import spawn_server;"
                "spawn_server.serve_inside(*sys.argv[1:])")


def _exec_inside_bubblewrap(launcher: "list[str]", rules: "_SandboxRules", control_fd: int) -> None:
    """SANDBOX-2: become bwrap, with a server of this sandbox inside it (serve_inside),
    so each call is a fork there instead of a bwrap and an interpreter of its own. What
    the rules were taken from is taken now, before bwrap binds it (the host compares it
    before each call, as for a Landlock server: a folder replaced since means a new
    server); this process's pid stays the bwrap's (the host's view of the server).
    Never returns; when bwrap cannot start, the host sees the socket closed."""
    paths = rules.paths
    identities = landlock._identities(paths["write"], paths["allow"] + paths["read"],
                                      paths["protect"] + paths["hide"])
    os.set_inheritable(control_fd, True)
    # The server ignores SIGCHLD to have its children reaped; ignored, it survives exec and
    # bwrap would never hear of its own child's end (it would outlive the sandbox).
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    wrap = paths["wrap"]
    argv = [*wrap, "--", sys.executable, "-I", "-S", "-c", _BOOT_INSIDE, os.path.abspath(__file__),
            str(control_fd), str(os.getpid()), marshal.dumps((launcher, identities)).hex()]
    try:
        os.execv(wrap[0], argv)
    finally:
        os._exit(0)


def serve_inside(control_fd: str, outer: str, state: str) -> None:
    """Inside bubblewrap: say ``ready`` (with the bwrap's pid, ``outer``, and the
    identities taken before it bound them), then serve calls as a Landlock server does:
    every supervisor this server forks, and all it starts, is in the sandbox already."""
    control = _socket.socket(fileno=int(control_fd))
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the forked supervisors are reaped by the kernel
    supervisor._set_prctl(supervisor.PR_SET_PDEATHSIG, signal.SIGTERM)  # on bwrap's init, which ends the sandbox
    parent = os.getppid()
    launcher, identities = marshal.loads(bytes.fromhex(state))
    rules, _ = supervisor._sandbox_options(["supervisor", *launcher])
    if rules is None:
        os._exit(0)
    try:
        control.send(b"ready " + marshal.dumps((int(outer), "confined", identities)))
    except OSError:
        os._exit(0)
    _serve_with_spares(parent, control, (launcher, "confined", rules))


# A server of one sandbox and its spare are named so (``/proc/PID/comm``): helpers, not
# leftovers (jobs/spawner.py: helper_pids). A spare that takes a call takes the name back.
HELPER_NAME = b"crystal-sandbox"
PR_SET_NAME = 15


def _name(name: bytes) -> None:
    try:
        supervisor._LIBC[0].prctl(PR_SET_NAME, name, 0, 0, 0)
    except (IndexError, OSError, AttributeError):
        pass


def _serve_with_spares(parent: int, control: "_socket.socket", confined: "Confined") -> None:
    """Serve calls through a spare: a supervisor forked ahead, already with its
    parent-death signal, that waits on the socket itself. A request
    then wakes it directly, with no fork and no wake of this server on the way (each
    hand-off between processes costs the call a time slice under load); this server
    forks the next spare meanwhile. Never returns."""
    me = os.getpid()
    with open("/proc/self/comm", "rb") as handle:
        own_name = handle.read().strip()
    _name(HELPER_NAME)
    while True:
        took, told = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(took)
            os.close(told)
            _loop(parent, control, confined)  # no spare can be made: a fork per request
            return
        if pid == 0:
            try:
                os.close(took)
                _spare(me, control, confined, told, own_name)
            finally:
                os._exit(255)
        os.close(told)
        try:
            word = os.read(took, 1)
        except OSError:
            word = b""
        os.close(took)
        if word != b"t":  # the host let this server go (or the spare is gone): its calls end first
            if os.getppid() == parent:
                _drain()
            os._exit(0)


def _spare(server: int, control: "_socket.socket", confined: "Confined", told: int, name: bytes) -> None:
    """Wait for one request on the server's socket, tell the server (``t``: took one,
    ``e``: the end), then become its supervisor. Signals stay unblocked while it waits:
    the parent-death signal ends an idle spare at once."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    # Its session or process group is made when the request says which (_child): a
    # process group leader could no longer start a session.
    supervisor.arm(server)
    space = _socket.CMSG_SPACE(FDS * 4)
    # What the call touches first, touched now: after a fork each page first written is
    # copied, which made the cache folder's check ~0.12 ms of the call and is ~0.02 ms once
    # done here (the cache folder may be made now rather than at the call: a temp folder).
    if confined is not None and confined[1] == "confined":
        supervisor.use_caches(confined[2], {})
    marshal.loads(marshal.dumps((["x"], "/", {b"A": b"B"}, ["--sandbox"], 1.0, False, True)))
    request, fds = _receive(control, space)
    if not request:
        os.write(told, b"e")
        os._exit(0)
    os.write(told, b"t")
    os.close(told)
    control.close()
    _name(name)
    if len(fds) != FDS:
        os._exit(0)
    _child(server, request, fds, confined, spare=True)


def _receive(control: "_socket.socket", space: int) -> "tuple[bytes, list[int]]":
    """One request and the descriptors passed with it; (b"", []) when the socket failed
    or its other end closed."""
    while True:
        try:
            request, ancdata, _flags, _address = control.recvmsg(MAX_REQUEST, space)
        except InterruptedError:
            continue
        except OSError:
            return b"", []
        return request, fdpass.received_fds(ancdata)


def _loop(parent: int, control: "_socket.socket", confined: "Confined") -> None:
    me = os.getpid()
    space = _socket.CMSG_SPACE(FDS * 4)
    while True:
        request, fds = _receive(control, space)
        if not request or os.getppid() != parent:
            if confined is not None and os.getppid() == parent:
                _drain()  # a server the host let go: the calls it started run to their end
            os._exit(0)  # the host closed its end, or is gone
        if len(fds) == 1 and request[:1] == b"S" and confined is None:
            _fork_server(me, control, request[1:], fds[0])
            continue
        if len(fds) != FDS:
            for fd in fds:
                os.close(fd)
            continue
        try:
            pid = os.fork()
        except OSError as exc:
            _write(fds[3], f"error cannot start a supervisor: {exc.strerror or exc}")
            pid = -1
        if pid == 0:
            try:
                control.close()
                _child(me, request, fds, confined)
            finally:
                os._exit(255)
        for fd in fds:
            os.close(fd)


def _fork_server(me: int, control: "_socket.socket", options: bytes, fd: int) -> None:
    try:
        pid = os.fork()
    except OSError:
        pid = -1  # the host sees its socket closed and confines each call itself
    if pid == 0:
        try:
            control.close()
            _serve_one_sandbox(me, options, fd)
        finally:
            os._exit(255)
    os.close(fd)


def _drain() -> None:
    """Wait until every supervisor this server forked has exited (SIGCHLD is ignored:
    ``wait`` returns once none is left). A parent-death signal still ends it at once."""
    while True:
        try:
            os.wait()
        except ChildProcessError:
            return


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
