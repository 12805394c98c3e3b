"""The tiny supervisor every background job runs under (standard library only).

The host starts ``python -I -S -c BOOT .../supervisor.py HOST_PID GRACE BASH COMMAND``
(jobs/guarded.py: ``supervisor_command``, which loads this module's cached bytecode) in a
new session; the supervisor starts ``BASH -c COMMAND`` with stdin on /dev/null and the
host's output pipe as stdout and stderr, then waits. Why a supervisor:

- No orphans when the host dies, however it dies. The supervisor asks Linux for a
  parent-death signal (``PR_SET_PDEATHSIG``: SIGTERM when the host thread that started
  it goes away, SIGKILL included) and also polls ``getppid()`` as a fallback.
- Grandchildren cannot escape. The supervisor is a child subreaper
  (``PR_SET_CHILD_SUBREAPER``): whatever the job forks, double-forks or moves to a new
  session stays below it, so a scan of ``/proc`` finds the whole tree.
- A job is its whole tree. When the shell exits, anything it left running in the
  background is stopped as well; on SIGTERM/SIGINT/SIGHUP (a stop, a timeout, the
  host's death) every descendant gets SIGTERM, and after GRACE seconds SIGKILL.

The supervisor exits the way the shell did: the same exit code, or killed by the same
signal, so the host's ``returncode`` is the job's.

Foreground mode (the ``bash`` tool): an optional fifth argument STATUS_FD names a pipe
the host passed in. The supervisor then keeps no copy of the output pipe (so the host
sees end-of-file once the command's processes close it), and when the shell exits it
writes ``exit WAITSTATUS`` to STATUS_FD at once. If processes are still running, it
waits rather than stopping them: the host gives them a moment to finish their output,
then sends SIGTERM. Before exiting it writes ``left N``: how many processes it had to
stop after the shell exited.

Sandbox (SANDBOX-1): with leading ``--sandbox ...`` options (jobs/sandbox.py builds
them) the supervisor confines itself with Landlock (jobs/landlock.py) before it starts
the shell; when that fails it prints one line and exits 126 without running anything.

The prctl calls are made here, after exec, rather than in a ``preexec_fn``: the host
is multi-threaded (the kernel always is) and ``preexec_fn`` is unsafe there. The race
that ``preexec_fn`` would close (the host dying before the call) is closed by checking
``getppid()`` right after it.
"""

import _signal as signal  # the C module: `import signal` costs ~5 ms (enum) per job start
import os
import stat
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
WATCHED = STOP_SIGNALS | {signal.SIGCHLD}
# Python ignores SIGPIPE and SIGXFSZ; ignored signals survive exec, so reset them (and
# the ones we block) for the job: `yes | head` must end with SIGPIPE as in a terminal.
RESET = WATCHED | {signal.SIGPIPE, signal.SIGXFSZ, signal.SIGQUIT}
POLL_SECONDS = 0.5
# Inside a bubblewrap sandbox: stdin back from descriptor 3 (see run()), then the program.
_STDIN_BACK = 'exec 0<&3 3<&-; exec "$@"'
# True for the type checker only (importing typing costs a job start several milliseconds).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, MutableMapping
    from types import ModuleType

    from crystal_kernel.jobs.landlock import Identity

    Environment = MutableMapping[str, str]  # os.environ or a command's own
    SpawnEnvironment = Mapping[str, str] | Mapping[bytes, bytes]
if TYPE_CHECKING or __package__:
    from crystal_kernel.jobs import libc
else:
    # jobs/libc.py beside this file (run as a script under -I, its folder is not on sys.path).
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        import libc
    finally:
        del sys.path[0]


_LIBC: "list[libc.Libc]" = []  # made once: a forked supervisor (jobs/spawn_server.py) inherits it


def _set_prctl(option: int, value: int) -> None:
    try:
        if not _LIBC:
            _LIBC.append(libc.Libc())
        _LIBC[0].prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the getppid() poll still stops the job when the host is gone


def _has_children() -> bool:
    """True while this process has a child, running or not yet reaped. A subreaper with
    no child has no descendant at all (an orphan is re-parented to us), so the /proc
    scan of :func:`_tree` (~3 ms, twice per call) is skipped for a command that left
    nothing behind."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


def _tree(root: int) -> list[int]:
    """Live (non-zombie) descendants of ``root``, found by scanning /proc."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        # Fields after the command name, which is in parentheses and may hold spaces.
        rest = stat[stat.rfind(b")") + 2:].split()
        if rest[0] == b"Z":
            continue
        children.setdefault(int(rest[1]), []).append(int(name))
    out: list[int] = []
    todo = [root]
    while todo:
        for pid in children.get(todo.pop(), ()):
            out.append(pid)
            todo.append(pid)
    return out


def _reap(shell: int, status: "int | None") -> "int | None":
    """Reap every finished child (orphans land here too); return the shell's status."""
    while True:
        try:
            pid, wait_status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return status
        if pid == 0:
            return status
        if pid == shell:
            status = wait_status


def _signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _stop_tree(shell: int, status: "int | None", grace: float) -> "int | None":
    """TERM every descendant, wait up to ``grace`` seconds, then KILL what is left."""
    me = os.getpid()
    status = _reap(shell, status)
    if not _has_children():
        return status
    first = _tree(me)
    termed = set(first)
    _signal_all(first, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while True:
        status = _reap(shell, status)
        left = _tree(me)
        if not left:
            return status
        if time.monotonic() >= deadline:
            break
        # A process that appeared since (forked by one still starting when the TERM went
        # out) gets its TERM too, once: else it lives to the KILL at the grace's end.
        newcomers = [pid for pid in left if pid not in termed]
        if newcomers:
            termed.update(newcomers)
            _signal_all(newcomers, signal.SIGTERM)
        signal.sigtimedwait({signal.SIGCHLD}, 0.02)
    for _ in range(100):  # a fork bomb keeps forking while we kill: keep at it
        _signal_all(left, signal.SIGKILL)
        signal.sigtimedwait({signal.SIGCHLD}, 0.02)
        status = _reap(shell, status)
        left = _tree(me)
        if not left:
            break
    return _reap(shell, status)


def _exit_like(status: "int | None") -> None:
    if status is None:
        os._exit(255)
    if os.WIFEXITED(status):
        os._exit(os.WEXITSTATUS(status))
    sig = os.WTERMSIG(status)
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # never leave a core file behind
        signal.signal(sig, signal.SIG_DFL)
    except (ValueError, OSError, ImportError):
        pass
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    os.kill(os.getpid(), sig)
    os._exit(128 + sig)


def _report(fd: "int | None", line: str) -> None:
    if fd is None:
        return
    try:
        os.write(fd, line.encode() + b"\n")
    except OSError:
        pass  # the host stopped listening; the exit status still tells it


def _linger(host: int) -> bool:
    """Foreground mode, after the shell exited with processes left: wait until the host
    says stop (or dies) or nothing is left. True if something may still be running."""
    me = os.getpid()
    while _has_children() and _tree(me):
        info = signal.sigtimedwait(WATCHED, 0.1)
        if info is not None and info.si_signo in STOP_SIGNALS:
            return True
        if os.getppid() != host:
            return True
    return False


class _SandboxRules:
    """The ``--sandbox`` options: the paths of each kind, and the two switches."""

    def __init__(self) -> None:
        # "wrap": a bubblewrap command line the program runs under (SANDBOX-2), instead of
        # confining this process with Landlock.
        # "hide": never readable (the Crystal Home, credential folders); "temp": the private
        # temp bound at /tmp and /var/tmp (the Landlock path's namespace; SANDBOX-2).
        # "read": read-only folders a bubblewrap sandbox binds (for the identities a server
        # of it compares, jobs/spawn_server.py).
        self.paths: dict[str, list[str]] = {"write": [], "protect": [], "allow": [], "cache": [], "wrap": [],
                                            "hide": [], "temp": [], "read": []}
        self.network = True
        self.split = False


def _sandbox_options(argv: list[str]) -> tuple[_SandboxRules | None, list[str]]:
    """Leading ``--sandbox [--write P] [--protect P] [--allow P] [--cache P] [--no-network]
    [--split] [--wrap ARG]...`` options (SANDBOX-1, built by jobs/sandbox.py); the rest of argv."""
    if len(argv) < 2 or argv[1] != "--sandbox":
        return None, argv
    rules = _SandboxRules()
    i = 2
    while i < len(argv) and argv[i].startswith("--"):
        flag = argv[i][2:]
        if flag == "no-network":
            rules.network = False
        elif flag == "split":
            rules.split = True
        else:
            rules.paths[flag].append(argv[i + 1])
            i += 1
        i += 1
    return rules, [argv[0]] + argv[i:]


def wrapped_environment(rules: _SandboxRules) -> "dict[str, str]":
    """The variables a bubblewrap command line sets (``--setenv NAME VALUE``): a call
    served inside it takes them over the environment the host sent."""
    wrap = rules.paths["wrap"]
    return {wrap[i + 1]: wrap[i + 2] for i in range(len(wrap) - 2) if wrap[i] == "--setenv"}


def _use_cache(folder: str, env: "Environment") -> None:
    """Point the command's caches (XDG_CACHE_HOME: pip, uv, go, yarn; npm's own) at
    ``folder``, a temp folder the sandbox lets it write, when the person's cache folder
    is outside it. Only a folder of our own: a planted link or another user's folder is
    not used (the caches then fail as before). ``env``: the command's environment."""
    try:
        info = os.lstat(folder)  # one call when it is there (each call of a sandbox's server asks)
    except FileNotFoundError:
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            info = os.lstat(folder)
        except OSError:
            return
    except OSError:
        return
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        return
    env["XDG_CACHE_HOME"] = folder
    env["npm_config_cache"] = os.path.join(folder, "npm")


def _landlock() -> "ModuleType":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        if TYPE_CHECKING:
            from crystal_kernel.jobs import landlock
        else:
            import landlock  # jobs/landlock.py, loaded by path (-I -S: the package is not importable)
    finally:
        del sys.path[0]
    return landlock


def use_caches(rules: _SandboxRules, env: "Environment") -> None:
    """Point the command's caches at the sandbox's cache folder (see :func:`_use_cache`)."""
    for cache in rules.paths["cache"]:
        _use_cache(cache, env)
    if rules.paths["temp"] and not rules.paths["wrap"]:
        env["TMPDIR"] = "/tmp"  # SANDBOX-2: the Landlock namespace's private temp lies there


def refuse(reason: str, status_fd: "int | None" = None) -> None:
    """The sandbox could not start: say so, run nothing, exit 126."""
    sys.stderr.write(f"crystal: the sandbox could not start ({reason}); the command did not run.\n")
    sys.stderr.flush()
    _report(status_fd, f"exit {126 << 8}")
    os._exit(126)


def _confine(rules: _SandboxRules, env: "Environment") -> None:
    """Apply the sandbox to this process (and so to the command, whose environment is
    ``env``) or refuse to run."""
    if rules.paths["wrap"]:
        return  # bubblewrap confines the program itself (run() starts it through bwrap)
    landlock = _landlock()
    use_caches(rules, env)
    try:
        landlock.confine(rules.paths["write"], rules.paths["protect"], rules.paths["allow"], rules.network,
                         use_namespace=not rules.split, hidden=rules.paths["hide"], temp=rules.paths["temp"])
    except landlock.SandboxError as exc:
        refuse(str(exc))


def confine_lasting(rules: _SandboxRules) -> "tuple[str, list[Identity]]":
    """For a spawn server that serves one sandbox (jobs/spawn_server.py): confine this
    process once, for every call it will fork. Returns ``("confined", identities)``
    (landlock.py: what the host compares before each call), ``("per-call", [])`` when
    these rules cannot be kept (nothing changed: each call confines itself), or
    ``(reason, [])`` when the sandbox could not start (each call is refused)."""
    landlock = _landlock()
    identities: list[Identity] = []
    try:
        landlock.confine(rules.paths["write"], rules.paths["protect"], rules.paths["allow"], rules.network,
                         use_namespace=not rules.split, lasting=identities, hidden=rules.paths["hide"],
                         temp=rules.paths["temp"])
    except landlock.NotLasting:
        return "per-call", []
    except landlock.SandboxError as exc:
        return str(exc) or "unknown error", []
    return "confined", identities


def arm(parent: int) -> None:
    """Ask for SIGTERM when ``parent`` dies and adopt every orphan below us; exit at once
    if ``parent`` is already gone (it died before the death signal was armed)."""
    _set_prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    _set_prctl(PR_SET_CHILD_SUBREAPER, 1)
    if os.getppid() != parent:
        os._exit(255)


def confine_or_exit(rules: "_SandboxRules | None", parent: int, env: "Environment") -> None:
    """SANDBOX-1: the supervisor confines itself, so the command and all it starts
    inherit the rules (a launcher after exec or fork, not a preexec_fn in the threaded
    host)."""
    if rules is None:
        return
    _confine(rules, env)
    _set_prctl(PR_SET_PDEATHSIG, signal.SIGTERM)  # kept through the namespace; armed again to be sure
    if os.getppid() != parent:
        os._exit(255)


def run(parent: int, grace: float, program: str, argv: list[str], env: "SpawnEnvironment",
        status_fd: "int | None", *, drop_output: bool, linger: bool, wrap: "list[str] | None" = None) -> "int | None":
    """Start ``argv`` (``program`` is its path), wait for it, stop what it left behind
    and return its wait status. WATCHED signals must be blocked and :func:`arm` done.
    ``status_fd`` gets ``exit WAITSTATUS`` when the program exits and ``left N`` once
    its tree is stopped; ``drop_output``: keep no copy of stdout/stderr (the host then
    sees end-of-file once the command's processes close them); ``linger``: after the
    program exits, wait for the host's stop (or for nothing to be left) before stopping
    the rest. ``wrap``: a bubblewrap command line (SANDBOX-2) that starts the program in its
    sandbox; the supervisor stays outside it, where the command cannot see or signal it."""
    if status_fd is not None:
        os.set_inheritable(status_fd, False)  # the host's channel, not the command's
    actions = []
    if wrap:
        # bubblewrap's own processes keep the descriptors 0-2 they were given for as long as
        # the sandbox lives, so a program that stops reading its stdin would not break the
        # host's pipe (EX-15): stdin goes in as descriptor 3, which they close, and a shell
        # puts it back at 0 inside.
        program, argv = wrap[0], [*wrap, "--", "/bin/sh", "-c", _STDIN_BACK, "sh", program, *argv[1:]]
        actions = [(os.POSIX_SPAWN_DUP2, 0, 3), (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0)]
    try:
        shell = os.posix_spawn(program, argv, env, setsigmask=(), setsigdef=RESET, file_actions=actions)
    except OSError as exc:
        sys.stderr.write(f"crystal: cannot start {program}: {exc.strerror or exc}\n")
        sys.stderr.flush()
        _report(status_fd, f"exit {127 << 8}")
        os._exit(127)
    # The supervisor never reads stdin: keeping the host's pipe open here would let a host
    # writing arguments to a program that stopped reading block instead of seeing EPIPE.
    null_in = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null_in, 0)
    os.close(null_in)
    if drop_output:
        # Only the command's processes hold the output pipes from now on.
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.close(null)
    status = None
    stopping = False
    while status is None and not stopping:
        info = signal.sigtimedwait(WATCHED, POLL_SECONDS)
        if info is not None and info.si_signo in STOP_SIGNALS:
            stopping = True
        elif info is None and os.getppid() != parent:
            stopping = True
        status = _reap(shell, status)
    left = 0
    if status_fd is not None and status is not None:
        _report(status_fd, f"exit {status}")
        if linger and _linger(parent):
            left = len(_tree(os.getpid()))
    status = _stop_tree(shell, status, grace)
    while status is None:  # the shell was killed above; make sure we have its status
        try:
            pid, wait_status = os.waitpid(shell, 0)
            status = wait_status
        except ChildProcessError:
            break
    _report(status_fd, f"left {left}")
    return status


def main(argv: list[str]) -> None:
    rules, argv = _sandbox_options(argv)
    host, grace, bash, command = int(argv[1]), float(argv[2]), argv[3], argv[4]
    status_fd = int(argv[5]) if len(argv) > 5 else None
    # Block first: a stop that arrives from now on is read by sigtimedwait, not lost.
    signal.pthread_sigmask(signal.SIG_BLOCK, WATCHED)
    arm(host)
    confine_or_exit(rules, host, os.environ)
    status = run(host, grace, bash, [os.path.basename(bash), "-c", command], os.environ, status_fd,
                 drop_output=status_fd is not None, linger=status_fd is not None,
                 wrap=rules.paths["wrap"] if rules is not None else None)
    _exit_like(status)


if __name__ == "__main__":
    main(sys.argv)
