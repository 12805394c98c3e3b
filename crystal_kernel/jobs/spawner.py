"""Tool processes started by a long-lived spawn server instead of a new supervisor
interpreter per call (ROBUST-3 and SANDBOX-1 kept: jobs/spawn_server.py).

:func:`spawn` returns a :class:`SupervisedProcess`, the part of ``subprocess.Popen`` the
tools use (``pid``, the three streams, ``poll``, ``wait``, ``returncode``), or None when
the server cannot take the request (not Linux, a request too large for one message, the
server could not start): the caller then starts a supervisor of its own as before.

The server is started on first use from a thread of its own that lives as long as the
process (the parent-death signal follows the thread that started a child, so it cannot
be a worker thread that may end), and again after a fork or if it died.

A sandboxed call goes to a **server of its sandbox**: a fork of the server that
confined itself once (jobs/spawn_server.py), so the call pays no Landlock rules and no
mount namespace of its own. They are kept by the sandbox's launcher options (its rules
exactly), at most :data:`CONFINED_SERVERS`, the least recently used let go (it finishes
its running calls, then exits). Before each call the identities its rules were taken
from (every path of the rules, and each read-only bind's folder) are compared with
``os.stat``: a folder replaced since (renamed, or removed and made again) means a new
server, so a bind never protects a folder that is no longer there.
"""

from __future__ import annotations

import errno
import marshal
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from crystal_kernel.jobs.fdpass import received_fds, rights
from crystal_kernel.jobs.sandbox import Sandbox

SERVER = str(Path(__file__).resolve().with_name("spawn_server.py"))
# Imported as a module from its folder, so its compiled form in __pycache__ is used.
_BOOT = ("import sys;sys.path.insert(0,sys.argv.pop(1).rpartition('/')[0]);import spawn_server;"
         "spawn_server.serve(int(sys.argv[1]),int(sys.argv[2]))")
_START_SECONDS = 10.0
# Servers of one sandbox kept at once: bash's, ripgrep's and one per exec set.
CONFINED_SERVERS = 4
# A killed supervisor reports nothing: the call is reported as killed.
_KILLED = -signal.SIGKILL


class SupervisedProcess:
    """One tool process under a forked supervisor. ``pid`` is the supervisor's, the
    leader of the call's process group (as a started supervisor was); ``returncode``
    is the program's, from the status pipe (``sentinel``: readable when a line or the
    end arrives)."""

    def __init__(self, pid: int, status_fd: int, pending: bytes, stdin: IO[bytes] | None,
                 stdout: IO[bytes] | None, stderr: IO[bytes] | None) -> None:
        self.pid = pid
        self.sentinel = status_fd
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.returncode: int | None = None
        self.left: int | None = None
        self._buffer = pending
        self._eof = False
        os.set_blocking(status_fd, False)
        self._parse()

    def _parse(self) -> None:
        while b"\n" in self._buffer:
            line, _, self._buffer = self._buffer.partition(b"\n")
            word, _, value = line.decode("ascii", "replace").partition(" ")
            if word == "exit" and self.returncode is None:
                self.returncode = os.waitstatus_to_exitcode(int(value))
            elif word == "left":
                self.left = int(value)

    def _read(self) -> None:
        while not self._eof:
            try:
                data = os.read(self.sentinel, 4096)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self._eof = True
                if self.returncode is None:
                    self.returncode = _KILLED
                return
            self._buffer += data
            self._parse()

    @property
    def finished(self) -> bool:
        """The supervisor has exited (its tree is stopped)."""
        self._read()
        return self._eof

    def poll(self) -> int | None:
        """The program's exit code once it has exited (negative: killed by a signal)."""
        if self.returncode is None:
            self._read()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Block until the program has exited; ``subprocess.TimeoutExpired`` after ``timeout``."""
        poller = select.poll()
        poller.register(self.sentinel, select.POLLIN)
        while self.poll() is None:
            if not poller.poll(None if timeout is None else timeout * 1000):
                raise subprocess.TimeoutExpired([str(self.pid)], timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        """Signal the call's process group (the supervisor and the program)."""
        if not self.finished:
            try:
                os.killpg(self.pid, sig)
            except OSError:
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def close(self) -> None:
        """Release the status pipe (the streams are the caller's to close)."""
        if self.sentinel >= 0:
            os.close(self.sentinel)
            self.sentinel = -1


class _Confined:
    """The host's side of a server of one sandbox: its socket and, once its ``ready``
    message is read, its pid and the identities to compare before each call."""

    def __init__(self, control: socket.socket) -> None:
        self.control = control
        self.pid: int | None = None
        # (path, st_dev, st_ino, st_mtime_ns or None), st_dev None: missing (jobs/landlock.py).
        self.identities: list[tuple[str, int | None, int | None, int | None]] | None = None
        self.gone = False
        self.held: list[int] = []

    def close(self) -> None:
        """Close our end (that server finishes its calls, then exits) and what we held for it."""
        self.control.close()
        _close(self.held)
        self.held = []

    def settle(self, wait: float = 0.0) -> bool:
        """Read its ``ready`` message if it came (waiting up to ``wait`` seconds); True once read."""
        if self.identities is not None or self.gone:
            return self.identities is not None
        if wait:
            poller = select.poll()
            poller.register(self.control, select.POLLIN)
            if not poller.poll(wait * 1000):
                return False
        try:
            data, ancdata, _flags, _address = self.control.recvmsg(MAX_READY, socket.CMSG_SPACE(MAX_HELD * 4),
                                                                   socket.MSG_DONTWAIT)
        except BlockingIOError:
            return False
        except OSError:
            data, ancdata = b"", []
        # SANDBOX-2: the read-only binds' folders, held here in the host (outside the
        # sandbox, where no command can reach them through /proc) for as long as the server lives.
        self.held = received_fds(ancdata)
        try:
            pid, _state, identities = marshal.loads(data[6:]) if data.startswith(b"ready ") else (None, "", None)
        except (EOFError, ValueError, TypeError):
            identities = None
        if identities is None:
            self.gone = True  # it could not start (or died): a new one next time
            return False
        self.pid = pid
        self.identities = list(dict.fromkeys(tuple(i) for i in identities))
        return True

    def current(self) -> bool:
        """False when the server is gone or a path of its rules names another file than
        when it confined itself. Not yet ``ready``: it is confining itself now, so the
        rules it takes are current ones."""
        if not self.settle():
            return not self.gone
        for path, dev, ino, mtime in self.identities or ():
            if dev is None:
                if os.access(path, os.F_OK):  # made since (no exception raised when it still is not)
                    return False
                continue
            try:
                info = os.stat(path)
            except OSError:
                return False
            if info.st_ino != ino or info.st_dev != dev or (mtime is not None and info.st_mtime_ns != mtime):
                return False
        return True


MAX_READY = 1 << 20
# struct ucred: pid, uid, gid.
_CREDENTIALS = struct.Struct("iII")
# Folders a server of one sandbox holds open at most (its read-only binds: .crystal/, Home,
# the credential folders that lie in the workspace).
MAX_HELD = 64


class _Server:
    """The spawn server of this process: started once, from a thread that lives on,
    and the servers of one sandbox it forked (:class:`_Confined`), by launcher options."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.owner = -1
        self.control: socket.socket | None = None
        self.failed = False
        self.pid: int | None = None
        self.confined: OrderedDict[tuple[str, ...], _Confined] = OrderedDict()

    def control_socket(self) -> socket.socket | None:
        with self.lock:
            if self.owner != os.getpid():  # first use, or a forked copy of the host
                self.control, self.owner, self.failed = None, os.getpid(), False
                for entry in self.confined.values():
                    entry.close()  # our copies only: the host that forked keeps its own
                self.confined.clear()
            if self.control is None and not self.failed:
                self.control = self._start()
                self.failed = self.control is None
            return self.control

    def confined_socket(self, launcher: list[str]) -> socket.socket | None:
        """The socket of the server of this sandbox, started if needed (it confines
        itself while the call's request waits in its socket); None: the main server
        cannot be used."""
        key = tuple(launcher)
        with self.lock:
            main = self.control_socket()
            if main is None:
                return None
            entry = self.confined.get(key)
            if entry is not None:
                if entry.current():
                    self.confined.move_to_end(key)
                    return entry.control
                self._let_go(key)
            if "--wrap" not in launcher and not all(a.startswith("--") or os.path.isabs(a) for a in launcher):
                return main  # a relative path names another folder in each call's cwd: confined per call
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                main.sendmsg([b"S" + marshal.dumps(launcher)], rights([theirs.fileno()]))
            except OSError:
                ours.close()
                return main
            finally:
                theirs.close()
            self.confined[key] = _Confined(ours)
            while len(self.confined) > CONFINED_SERVERS:
                self._let_go(next(iter(self.confined)))
            return ours

    def _let_go(self, key: tuple[str, ...]) -> None:
        """Close our end: that server finishes the calls it runs, then exits."""
        self.confined.pop(key).close()

    def forget(self, control: socket.socket) -> None:
        with self.lock:
            if self.control is control:
                self.control = None
            for key, entry in list(self.confined.items()):
                if entry.control is control:
                    del self.confined[key]
                    _close(entry.held)
            control.close()

    def helpers(self, wait: float) -> set[int]:
        """The pids of the main server and of each server of one sandbox (each one's
        ``ready`` awaited up to ``wait`` seconds)."""
        with self.lock:
            if self.owner != os.getpid() or self.control is None:
                return set()
            found = {self.pid} if self.pid is not None else set()
            for entry in self.confined.values():
                if entry.settle(wait) and entry.pid is not None:
                    found.add(entry.pid)
                    found.update(_helpers_below(entry.pid))
            return found

    def _start(self) -> socket.socket | None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        started = threading.Event()
        # Popen[Any]: own_group()'s options are a dict, so a checker cannot tell the
        # stream type from the call (no stream is opened: all three are DEVNULL).
        box: list[subprocess.Popen[Any] | None] = [None]

        def keep() -> None:
            try:
                proc = box[0] = subprocess.Popen(
                    [sys.executable, "-I", "-S", "-c", _BOOT, SERVER, str(os.getpid()), str(theirs.fileno())],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    pass_fds=(theirs.fileno(),), **own_group())
            except OSError:
                return
            finally:
                theirs.close()
                started.set()
            self.pid = proc.pid
            proc.wait()  # this thread lives as long as the server: its death signal follows it
            self.forget(ours)

        threading.Thread(target=keep, name="crystal-spawn-server", daemon=True).start()
        started.wait(_START_SECONDS)
        if box[0] is None:
            ours.close()
            return None
        return ours


def own_group() -> dict[str, Any]:
    """Popen options for a helper that must not get the host's terminal signals (a
    process group of its own) but should be scheduled with the host: in the host's
    session, which Linux's automatic process grouping shares the CPU by (spawn_server.py,
    "Scheduling"). Python 3.10 has no ``process_group``: a session of its own there."""
    if sys.version_info >= (3, 11):
        return {"process_group": 0}
    return {"start_new_session": True}


_SERVER = _Server()
# What a tool's child process is: a Popen, or a forked supervisor's handle.
ToolProcess = subprocess.Popen[bytes] | SupervisedProcess


def server_pid() -> int | None:
    """The pid of this process's spawn server while it runs (a helper that lives as long
    as the host, not a leftover: tests that look for leftovers skip it)."""
    return _SERVER.pid if _SERVER.owner == os.getpid() and _SERVER.control is not None else None


def helper_pids(wait: float = 5.0) -> set[int]:
    """The spawn server's pid and those of the servers of one sandbox it runs for this
    process (helpers, not leftovers)."""
    return _SERVER.helpers(wait)


def server_ready() -> bool:
    """True when the server of this process runs: :func:`send` then does not block."""
    return _SERVER.owner == os.getpid() and _SERVER.control is not None


def start_server() -> bool:
    """Start the server if it is not running (blocks while it starts, once)."""
    return _SERVER.control_socket() is not None


def server_of(sandbox: Sandbox) -> int | None:
    """The pid of the server of ``sandbox`` once it is ready (None: none kept, or not
    ready yet); starts nothing."""
    with _SERVER.lock:
        entry = _SERVER.confined.get(tuple(sandbox.launcher_args())) if _SERVER.owner == os.getpid() else None
        return entry.pid if entry is not None and entry.settle() else None


def prepare(sandbox: Sandbox | None) -> None:
    """Start the server of ``sandbox`` now (blocks while the spawn server starts, once):
    its first call then finds it confined."""
    if sandbox is not None and sys.platform.startswith("linux"):
        _SERVER.confined_socket(sandbox.launcher_args())


def start_server_soon(then: Callable[[], object] | None = None) -> None:
    """Start the server in the background (a session whose tools will need it), then run
    ``then`` in the same thread (what the first call would otherwise do first)."""
    if not sys.platform.startswith("linux") or (server_ready() and then is None):
        return

    def start() -> None:
        start_server()
        if then is not None:
            try:
                then()
            except Exception:
                pass  # only a head start: the call itself does it again, and reports

    threading.Thread(target=start, name="crystal-spawn-start", daemon=True).start()


class Request:
    """A request the server has taken: the host's ends of the streams and the status
    pipe, until the supervisor's ``pid`` line arrives (:meth:`read`)."""

    def __init__(self, status_fd: int, ours: list[int | None], bufsize: int) -> None:
        self.status_fd = status_fd
        self.ours = ours
        self.bufsize = bufsize
        self.buffer = b""
        self.ended = False
        # The writer's process id as the host sees it (SCM_CREDENTIALS), once read.
        self.sender: int | None = None

    def read(self) -> bool:
        """Read what the status channel holds (blocking only if it was left blocking);
        True once the first line (or the end) is there."""
        while b"\n" not in self.buffer and not self.ended:
            try:
                data, sender = read_status(self.status_fd)
            except BlockingIOError:
                return False
            self.sender = self.sender or sender
            if not data:
                self.ended = True
            self.buffer += data
        return True

    def started(self) -> SupervisedProcess:
        """The supervised process, once :meth:`read` returned True; OSError (every fd
        released) when the supervisor could not start."""
        line, _, rest = self.buffer.partition(b"\n")
        word, _, value = line.decode("utf-8", "replace").partition(" ")
        if word != "pid":
            self.abandon()
            raise OSError(value or "the supervisor did not start")
        stdin_fd, stdout_fd, stderr_fd = self.ours
        bufsize = self.bufsize
        return SupervisedProcess(
            self.sender or int(value), self.status_fd, rest,
            open(stdin_fd, "wb", buffering=bufsize) if stdin_fd is not None else None,  # noqa: SIM115 - the caller closes
            open(stdout_fd, "rb", buffering=bufsize) if stdout_fd is not None else None,  # noqa: SIM115
            open(stderr_fd, "rb", buffering=bufsize) if stderr_fd is not None else None)  # noqa: SIM115

    def abandon(self) -> None:
        """Release every fd of a request whose process is not wanted (or did not start)."""
        _close([fd for fd in [*self.ours, self.status_fd] if fd is not None])
        self.ours, self.status_fd = [None, None, None], -1


def send(argv: list[str], *, cwd: str, env: dict[Any, Any] | None, sandbox: Sandbox | None, grace: float,
         stdin: int | None, stdout: int | None, stderr: int | None, bufsize: int = -1,
         linger: bool = False, session: bool = True) -> Request | None:
    """Ask the server to start ``argv`` (argv[0] a path) under a forked supervisor.
    ``stdin``/``stdout``/``stderr``: ``subprocess.PIPE``, ``subprocess.DEVNULL`` or
    (stderr only) ``subprocess.STDOUT``. ``session``: the supervisor starts a session of
    its own (no controlling terminal: what a shell command needs); False keeps it in the
    server's session, the host's (a process group of its own either way): for a
    program that never uses a terminal, which is then scheduled with the host
    (spawn_server.py, "Scheduling"). Does not wait for the process (only starts the
    server on first use); None when the server cannot be used."""
    if not sys.platform.startswith("linux"):
        return None
    launcher = sandbox.launcher_args() if sandbox else []
    # A server of the sandbox serves the call: one that confined itself once (Landlock) or
    # one inside a bubblewrap sandbox made once (jobs/spawn_server.py).
    control = _SERVER.confined_socket(launcher) if launcher else _SERVER.control_socket()
    if control is None:
        return None
    environment = os.environb if env is None else env
    if env is not None and type(env) is dict and env and type(next(iter(env))) is bytes:
        encoded = env  # already bytes (an exec tool's environment: child_environment_bytes)
    else:
        encoded = {os.fsencode(k): os.fsencode(v) for k, v in environment.items()}
    request = marshal.dumps((list(argv), cwd, encoded, launcher, grace, linger, session))
    theirs: list[int] = []
    ours: list[int | None] = []
    try:
        for kind, writes in ((stdin, False), (stdout, True), (stderr, True)):
            if kind == subprocess.STDOUT:
                theirs.append(theirs[1])
                ours.append(None)
            elif kind == subprocess.PIPE:
                read_end, write_end = os.pipe()
                theirs.append(write_end if writes else read_end)
                ours.append(read_end if writes else write_end)
            else:
                theirs.append(os.open(os.devnull, os.O_WRONLY if writes else os.O_RDONLY))
                ours.append(None)
        # A socket, not a pipe: the supervisor's first line comes with its process id as
        # the host sees it (SCM_CREDENTIALS), which inside bubblewrap's PID namespace is
        # not the one it can name itself (SANDBOX-2).
        status_ours, status_theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        status_ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        status_read = status_ours.detach()
        ours.append(status_read)
        theirs.append(status_theirs.detach())
        passed = rights(theirs)
        try:
            try:
                control.sendmsg([request], passed)
            except OSError as exc:
                main = _SERVER.control_socket()
                if exc.errno == errno.EMSGSIZE or control is main or main is None:
                    raise
                # A server of one sandbox that is gone: this call confines itself in the main server.
                _SERVER.forget(control)
                control = main
                control.sendmsg([request], passed)
        except OSError as exc:
            # Too large for one message (an environment of hundreds of KB), or the server
            # is gone (started again next time): a supervisor of its own this time.
            if exc.errno != errno.EMSGSIZE:
                _SERVER.forget(control)
            _close([fd for fd in ours if fd is not None])
            return None
    except BaseException:
        _close([fd for fd in ours if fd is not None])
        raise
    finally:
        _close(sorted(set(theirs)))
    return Request(status_read, ours[:3], bufsize)


def spawn(argv: list[str], *, cwd: str, env: dict[Any, Any] | None, sandbox: Sandbox | None, grace: float,
          stdin: int | None, stdout: int | None, stderr: int | None, bufsize: int = -1,
          linger: bool = False, session: bool = True) -> SupervisedProcess | None:
    """:func:`send`, then wait for the supervisor (~a fork). OSError when it cannot
    start; None when the server cannot be used."""
    request = send(argv, cwd=cwd, env=env, sandbox=sandbox, grace=grace, stdin=stdin, stdout=stdout, stderr=stderr,
                   bufsize=bufsize, linger=linger, session=session)
    if request is None:
        return None
    request.read()
    return request.started()


def read_status(fd: int) -> tuple[bytes, int | None]:
    """One read of a supervisor's status channel: the bytes (b"": the end) and the
    writer's process id as this process sees it, which the socket :func:`send` makes
    carries (SCM_CREDENTIALS; inside bubblewrap's PID namespace the supervisor's own id
    is another, SANDBOX-2); None for a pipe. BlockingIOError as ``os.read``."""
    try:
        channel = socket.socket(fileno=fd)
    except OSError:
        return os.read(fd, 4096), None  # a pipe: a supervisor started by the host itself
    try:
        data, ancdata, _flags, _address = channel.recvmsg(4096, socket.CMSG_SPACE(_CREDENTIALS.size))
    finally:
        channel.detach()  # the descriptor stays the caller's
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(payload) >= _CREDENTIALS.size:
            return data, _CREDENTIALS.unpack_from(payload)[0] or None
    return data, None


def _helpers_below(server: int) -> list[int]:
    """The helpers below a server of one sandbox: its spare supervisors (still named as
    it is: jobs/spawn_server.py) and, for one inside bubblewrap, bwrap's own processes
    and the server inside. A call's supervisor takes another name: not a helper."""
    found: list[int] = []
    todo = [server]
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as handle:
                children = [int(child) for child in handle.read().split()]
        except OSError:
            continue
        for child in children:
            try:
                with open(f"/proc/{child}/comm", "rb") as handle:
                    name = handle.read().strip()
            except OSError:
                continue
            if name in (b"crystal-sandbox", b"bwrap"):
                found.append(child)
                todo.append(child)
    return found


def _close(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
