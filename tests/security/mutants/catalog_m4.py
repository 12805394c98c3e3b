"""Rows M4-.. of the mutant catalog: the survivors of the second hand-mutation pass of
the safety core (main at c1a37a5, 2026-12-07). catalog.py adds them to
``MUTANTS``; docs/mutants.md lists them with what a user would lose.

Where the code a mutant changed was rewritten since (the wrapper options of
host/shell_rules.py, M4-62), the row makes the same slip in the new code. Tests are
named ``…__M4_NN``: ``-k __M4_NN`` selects them.

Rows S2-10.. (``SANDBOX2_PASS``) are the fourth pass, over the SANDBOX-2 and TRUST-7 code
(main at 07dcbb8): the survivors' tests are ``…__S2_NN`` in
tests/security/test_mutants_s2.py; the equivalent rows are kept apart
(``SANDBOX2_EQUIVALENT``, not re-checked).
"""

from __future__ import annotations

from dataclasses import replace

from catalog import ACCESS, DIGEST, FLOW, GRANTS, LANDLOCK, PARSE, RULES, SANDBOX, TRUST, Mutant, _m

FOLDERS = "crystal_kernel/host/folders.py"
ACP_CHECKS = "crystal_kernel/acp/checks.py"
SECRETS = "crystal_kernel/core/secrets.py"
SIGN = "crystal_kernel/host/journal_sign.py"
SUPERVISOR = "crystal_kernel/jobs/supervisor.py"
SPAWNER = "crystal_kernel/jobs/spawner.py"
BWRAP = "crystal_kernel/jobs/bwrap.py"

T_SHELL = "tests/security/test_mutants_m4_shell.py"
T_FOLDERS = "tests/security/test_mutants_m4_folders.py"
T_ACP = "tests/acp/test_mutants_m4_acp.py"
T_TRUST = "tests/security/test_mutants_m4_trust.py"
T_FLOW = "tests/approval/test_mutants_m4_flow.py"
T_SECRETS = "tests/security/test_mutants_m4_secrets.py"
T_SIGNATURES = "tests/security/test_mutants_signatures.py"
T_SANDBOX = "tests/security/test_mutants_m4_sandbox.py"


FOURTH_PASS: list[Mutant] = [
    # ----- host/shell_rules.py
    _m("M4-55", RULES, '_KEYWORDS = frozenset({"{", "}", "!", "if",', '_KEYWORDS = frozenset({"{", "}", "if",',
       "`! rm -rf x` passes a forbidden rm rule", T_SHELL),
    _m("M4-57", RULES, '        if t == "--":\n            return i + 1', '        if t == "--":\n            return i',
       "`sudo -- rm -rf x` passes a forbidden rm rule", T_SHELL),
    _m("M4-60", RULES, '"--rcfile", "--init-file"):\n            i += 2', '"--rcfile", "--init-file"):\n            i += 1',
       "`bash -o pipefail -c 'rm -rf x'` passes a forbidden rm rule", T_SHELL),
    _m("M4-62", RULES, "        if eq:\n            return option, Word(attached, word.dynamic), i + 1",
       "        if False:\n            return option, Word(attached, word.dynamic), i + 1",
       "`su --command='rm -rf x'` passes a forbidden rm rule", T_SHELL),
    _m("M4-65", RULES, "            if nested.unsure:\n", "            if False:\n",
       "an unreadable `bash -c` line passes silently instead of going to the person", T_SHELL),
    _m("M4-68", RULES, "i = _skip_options(rest, _WATCH_VALUES)", "i = 0",
       "`watch -n 1 rm -rf x` passes a forbidden rm rule", T_SHELL),
    # ----- host/shell_parse.py
    _m("M4-46", PARSE, "if cur.started and cur.text.isdigit() and not cur.dynamic:",
       "if cur.started and not cur.dynamic:", "`rm>/dev/null -rf x` passes a forbidden rm rule", T_SHELL),
    _m("M4-52", PARSE, 'out.append(chr(int(digits, 16)) if digits else "\\\\x")', 'out.append("\\\\x" + digits)',
       "`$'\\x72m' -rf x` passes a forbidden rm rule", T_SHELL),
    # ----- host/folders.py
    _m("M4-30", FOLDERS, "        if _holds(resolved, protected):", "        if _holds(protected, resolved):",
       "a folder holding the home is accepted and every folder inside it refused", T_FOLDERS),
    _m("M4-31", FOLDERS, "if is_credential_path(resolved):", "if is_credential_path(Path(resolved.name)):",
       "~/.ssh/keys and ~/.config/gcloud can be added", T_FOLDERS),
    _m("M4-35", FOLDERS, "if _holds(_real(crystal_home), resolved):", "if _holds(resolved, _real(crystal_home)):",
       "a folder inside the Crystal Home can be added", T_FOLDERS),
    # ----- core/access.py
    _m("M4-28", ACCESS, "        self.directories = [d for d in self.directories if d.path != resolved]\n"
       "        rule = DirectoryRule(", "        rule = DirectoryRule(",
       "adding a folder again read-only leaves it writable", T_FOLDERS),
    # ----- acp/checks.py
    _m("M4-38", ACP_CHECKS, "if _inside(resolved, Path(os.path.realpath(crystal_home))):",
       "if _inside(path, Path(os.path.realpath(crystal_home))):",
       "an ACP cwd linked to the Crystal Home is a workspace", T_ACP),
    _m("M4-39", ACP_CHECKS, "0x7F <= ord(ch) <= 0x9F for ch in name", "ord(ch) == 0x7F for ch in name",
       "a client's MCP server name may hold C1 controls", T_ACP),
    # ----- host/grants.py and host/journal_sign.py (TRUST-3, TRUST-5, TRUST-7). The
    # journal format changed since the pass (the signature binds the workspace too):
    # M4-82 and M4-83 make the same slip in the new code.
    _m("M4-79", GRANTS,
       'return hmac.compare_digest(expected.encode("ascii"), signature.encode("utf-8", "surrogatepass"))',
       'return signature.encode("utf-8", "surrogatepass") in expected.encode("ascii")',
       "an empty (or partial) grant signature re-grants a session's folders on resume",
       T_SIGNATURES),
    _m("M4-80", GRANTS, "        if len(key) < 16:\n", "        if len(key) < 1:\n",
       "a 1-byte Home key is accepted: grants and journals forgeable in 256 tries",
       T_SIGNATURES),
    _m("M4-81", SIGN, "    return chain if start == end else None",
       "    return chain", "lines appended after the last signature line verify",
       T_SIGNATURES),
    _m("M4-82", SIGN,
       '_SEED + signer.place + b"\\0" + session_id.encode("utf-8"), hashlib.sha256',
       '_SEED + signer.place + b"\\0", hashlib.sha256',
       "the chain is not bound to the session id: a renamed journal verifies",
       T_SIGNATURES),
    _m("M4-83", SIGN,
       'b"tail\\0" + signer.place + b"\\0" + session_id.encode("utf-8") + b"\\0" + chain',
       'b"tail\\0" + signer.place + b"\\0" + chain',
       "the listing's tail signature is not bound to the session id",
       T_SIGNATURES),
    # ----- core/trust.py and core/trust_digest.py
    _m("M4-69", TRUST, "    real = Path(os.path.realpath(path))\n    return not _inside(real,",
       "    real = Path(os.path.abspath(path))\n    return not _inside(real,",
       "a workspace reached through a link in the Crystal Home is trusted without asking", T_TRUST),
    _m("M4-73", DIGEST, 'executable = b"x" if st.st_mode & 0o111 else b"-"', 'executable = b"-"',
       "chmod +x on a file an MCP server runs keeps mcp.json trusted", T_TRUST),
    _m("M4-74", DIGEST, 'digest.update(b"link\\0" + os.fsencode(os.path.relpath(target, real_root)) + b"\\0")',
       "pass", "re-pointing a folder link inside an exec set keeps it trusted", T_TRUST),
    # ----- host/approval_flow.py
    _m("M4-16", FLOW, "review_timeout(session) + 5)", "None)",
       "a plugged-in reviewer that never returns hangs the turn", T_FLOW),
    # ----- core/secrets.py
    _m("M4-92", SECRETS, 'if len(environ.get(name) or "") >= MIN_SECRET_LENGTH}',
       'if len(environ.get(name) or "") > MIN_SECRET_LENGTH}',
       "a 4-character key kept in os.environ (the magics) is saved unredacted", T_SECRETS),
    _m("M4-93", SECRETS, '        if len(value) >= WHOLE_TOKEN_BELOW:\n            text = text.replace(',
       '        if len(value) > WHOLE_TOKEN_BELOW:\n            text = text.replace(',
       "an 8-character key inside a longer token is saved unredacted", T_SECRETS),
    # ----- the Landlock path of the sandbox (SANDBOX-1; SANDBOX-2's fallback). The grep
    # tool's sandbox is now chosen by mechanism(): M4-95 makes the same slip there.
    _m("M4-94", SANDBOX, "    found += [home / name for name in CREDENTIAL_FILES_IN_HOME]\n", "",
       "with the workspace at ~, bash rewrites ~/.netrc and ~/.git-credentials", T_SANDBOX),
    _m("M4-95", SANDBOX, "    if found is None:\n        return None\n    return Sandbox(mode=\"read-only\"",
       "    if True:\n        return None\n    return Sandbox(mode=\"read-only\"",
       "the grep tool's ripgrep runs unconfined on the Landlock path", T_SANDBOX),
    _m("M4-96", LANDLOCK, "if not network and abi >= 4:", "if not network and abi >= 5:",
       "on a Landlock ABI 4 kernel the no-network rule is not applied", T_SANDBOX),
    _m("M4-97", SUPERVISOR, "    except landlock.SandboxError as exc:\n        refuse(str(exc))",
       "    except landlock.SandboxError as exc:\n        pass",
       "a sandbox that fails to start runs the command unconfined (jobs, per-call path)", T_SANDBOX),
    _m("M4-99", SPAWNER, " or (mtime is not None and info.st_mtime_ns != mtime):", ":",
       "a dangling link made at a missing protected path keeps the server's old rules", T_SANDBOX),
    # ----- SANDBOX-2's bubblewrap path: the same kind of decision (a sandbox that cannot
    # start), written with the M4 sandbox rows.
    _m("S2-01", BWRAP, "    return done.returncode == 0", "    return True",
       "a bwrap that cannot make its namespaces is chosen: every command fails, no Landlock fallback", T_SANDBOX),
]
# ----- fifth pass (SANDBOX-2, TRUST-7): appended to catalog_m4.py
HOST_FOLDERS = "crystal_kernel/core/host_folders.py"
JOURNAL_INDEX = "crystal_kernel/host/journal_index.py"
SPAWN_SERVER = "crystal_kernel/jobs/spawn_server.py"
WORLD = "crystal_kernel/jobs/landlock_world.py"
EXEC_SETS = "crystal_kernel/tools/exec_sets.py"
TOOL_SANDBOX = "crystal_kernel/tools/_sandbox.py"
APPROVAL = "crystal_kernel/host/approval.py"

T_WORLD2 = "tests/security/test_sandbox2_world.py"
T_TREE2 = "tests/security/test_sandbox2_tree.py"
T_LINKS2 = "tests/security/test_sandbox2_links.py"
T_SPACE2 = "tests/security/test_sandbox2_space_state.py"
T_SBX1 = "tests/security/test_sandbox1_tool_processes.py"
T_PY1 = "tests/security/test_sandbox1_python_tool.py"
T_TRUST7 = "tests/security/test_trust7_sessions.py"
T_SPAWN = "tests/jobs/test_spawn_server.py"
T_BASH = "tests/tools/test_bash.py"
T_EXECP = "tests/exec/test_exec_process.py"
T_S2 = "tests/security/test_mutants_s2.py"


def _k(id: str, file: str, old: str, new: str, what: str, *tests: str) -> Mutant:
    """A row whose catching tests are pytest arguments (files, ``-k`` expressions)."""
    return Mutant(id, file, old, new, what, tests)


SANDBOX2_PASS: list[Mutant] = [
    # ----- jobs/bwrap.py
    _k("S2-10", BWRAP, '    if network:\n        args.append("--share-net")',
       '    if not network:\n        args.append("--share-net")',
       "bubblewrap shares the host's network exactly when sandboxNetwork is off",
       T_WORLD2, "-k", "udp and bubblewrap"),
    # ripgrep's bwrap has no --new-session now (scheduled with the host): the
    # spawn server's letting go of the host's terminal is what keeps it from the person's.
    _k("S2-11", SPAWN_SERVER, "    detach_terminal()  # a call kept in the host's session",
       "    pass  # a call kept in the host's session",
       "ripgrep stays in the host's session with its terminal: a taken-over rg writes the person's terminal",
       T_WORLD2, "-k", "terminal and bubblewrap"),
    _k("S2-12", BWRAP, '        args += ["--ro-bind", "/dev/null", path]\n\n\ndef arguments',
       '        pass\n\n\ndef arguments',
       "a hidden credential file (~/.netrc, ~/.git-credentials) is readable under bubblewrap",
       T_WORLD2, "-k", "signing_key and bubblewrap"),
    _k("S2-13", BWRAP, "            if os.path.lexists(path):\n                _hide(args, path, emptied)",
       "            if False:\n                _hide(args, path, emptied)",
       "ripgrep (grep tool) under bubblewrap reads the Crystal Home and the credential folders",
       T_WORLD2, "-k", "signing_key and bubblewrap"),
    _k("S2-14", BWRAP, '    args += ["--bind", temp, place] if temp is not None else ["--tmpfs", place]',
       '    args += ["--tmpfs", place]',
       "a session's /tmp under bubblewrap is not kept between its calls",
       T_WORLD2, "-k", "temp_is_private and bubblewrap"),
    _k("S2-15", BWRAP, '        args += ["--ro-bind", home_real, home_real]',
       '        args += ["--bind", home_real, home_real]',
       "Home is writable under bubblewrap (dotfiles, ~/.bashrc)",
       T_SBX1, "-k", "beyond_the_workspace and bubblewrap"),
    _k("S2-16", BWRAP, '        if os.path.exists(path):\n            args += ["--ro-bind", path, path]\n            bound.append(path)\n    for path in dict.fromkeys(_real(p) for p in roots):',
       '        if os.path.exists(path):\n            args += ["--bind", path, path]\n            bound.append(path)\n    for path in dict.fromkeys(_real(p) for p in roots):',
       "a folder opened read-only (/access add DIR ro) is writable under bubblewrap",
       T_SBX1, "-k", "bubblewrap"),
    _k("S2-17", BWRAP, "        if os.path.exists(path) and any(_inside(path, b) for b in bound):\n            args += [\"--ro-bind\", path, path]",
       "        if False:\n            args += [\"--ro-bind\", path, path]",
       "the workspace's .crystal/ is writable under bubblewrap",
       T_SBX1, "-k", "beyond_the_workspace and bubblewrap"),
    _k("S2-18", BWRAP, '    for path in dict.fromkeys(_real(p) for p in allowed):\n        if os.path.isdir(path):\n            args += ["--bind", path, path]',
       '    for path in dict.fromkeys(_real(p) for p in allowed):\n        if os.path.isdir(path):\n            args += ["--ro-bind", path, path]',
       "an exec set's data folders are read-only under bubblewrap",
       T_SBX1, "-k", "exec_set and bubblewrap"),
    _k("S2-19", BWRAP, "    if not any(_inside(cache, _real(r)) for r in roots):",
       "    if any(_inside(cache, _real(r)) for r in roots):",
       "pip/npm caches under bubblewrap point at the person's read-only cache",
       T_SBX1, "-k", "caches and bubblewrap"),
    _k("S2-20", BWRAP, "    found = os.environ.get(BWRAP_ENV)\n    if not found:",
       "    found = None\n    if not found:", "CRYSTAL_BWRAP is ignored",
       "tests/security/test_mutants_m4_sandbox.py", "-k", "__S2_01"),
    _k("S2-21", BWRAP, "    if info.st_mode & 0o077:\n        os.chmod(folder, 0o700)", "    pass",
       "a session's private temp made wider by someone else stays readable by other users",
       T_WORLD2, T_TREE2, "-k", "bubblewrap"),
    _k("S2-22", BWRAP, "    info = os.lstat(folder)\n    if not stat.S_ISDIR", "    info = os.stat(folder)\n    if not stat.S_ISDIR",
       "a private temp replaced by a link (to the workspace's .crystal/, to Home) is followed and bound at /tmp",
       T_WORLD2, T_TREE2, "-k", "bubblewrap"),
    # ----- jobs/sandbox.py: mechanism(), _bubblewrap_rules, launcher_args, refusal_note, warm
    _k("S2-23", SANDBOX, "    if forced != LANDLOCK and bwrap.program() is not None:",
       "    if bwrap.program() is not None:", "CRYSTAL_SANDBOX_MECHANISM=landlock still runs bubblewrap",
       T_WORLD2, "-k", "landlock"),
    _k("S2-24", SANDBOX, '    roots = (str(workspace), *map(str, writable)) if config.sandbox == "workspace-write" else ()',
       '    roots = (str(workspace), *map(str, writable)) if config.sandbox != "off" else ()',
       "read-only mode writes the workspace under bubblewrap",
       T_SBX1, "-k", "read_only_mode and bubblewrap"),
    _k("S2-25", SANDBOX, "hidden=(str(config.home), *credential_folders()), temp=temp)\n\n\n# The rules",
       "hidden=(*credential_folders(),), temp=temp)\n\n\n# The rules",
       "the Crystal Home (the signing key) is readable under bubblewrap",
       T_WORLD2, "-k", "signing_key and bubblewrap"),
    _k("S2-26", SANDBOX, "mechanism=BUBBLEWRAP, roots=roots, readable=(*seen, *map(str, readable)),",
       "mechanism=BUBBLEWRAP, roots=roots, readable=seen,",
       "a folder opened read-only (/access add DIR ro) does not exist under bubblewrap",
       T_SBX1, "-k", "read_write and bubblewrap"),
    _k("S2-27", SANDBOX, "            roots = self.roots + ((self.temp,) if self.temp else ())",
       "            roots = self.roots",
       "a private temp removed between calls keeps the old bubblewrap server: /tmp writes fail",
       T_TREE2, "-k", "private_temp"),
    _k("S2-28", SANDBOX, "    if not sandbox.network:\n        markers += NETWORK_REFUSED_MARKERS",
       "    if sandbox.network:\n        markers += NETWORK_REFUSED_MARKERS",
       "the model is not told that the sandbox refused a network connection",
       T_SBX1, "-k", "connect and bubblewrap"),
    _k("S2-29", SANDBOX, "        return sandbox_for(config, Path(workspace), session=session)\n    return _rules(",
       "        return _rules(config, Path(workspace), (), session=session)\n    return _rules(",
       "a session under bubblewrap warms a Landlock server: its first call starts bwrap on the turn",
       T_TREE2, T_SPAWN, "-k", "before"),
    _k("S2-30", SANDBOX, "    if found == BUBBLEWRAP:\n        return (f\"Sandbox: bubblewrap",
       "    if found != BUBBLEWRAP:\n        return (f\"Sandbox: bubblewrap",
       "/access and the first note name the wrong sandbox", T_WORLD2, "-k", "listing"),
    # ----- jobs/spawn_server.py
    _k("S2-31", SPAWN_SERVER, "    for pinned in landlock._PINNED:\n        os.close(pinned)\n    del landlock._PINNED[:]",
       "    del landlock._PINNED[:]",
       "a Landlock server keeps its read-only binds' folders open: a command writes .crystal/ through /proc/PPID/fd",
       T_WORLD2, "-k", "held_folder"),
    _k("S2-32", SPAWN_SERVER, "    for pinned in landlock._PINNED:\n        try:\n            os.close(pinned)",
       "    for pinned in []:\n        try:\n            os.close(pinned)",
       "a forked supervisor keeps the server's held folders open",
       T_WORLD2, "-k", "held_folder or descriptors"),
    _k("S2-33", SPAWN_SERVER, "    signal.signal(signal.SIGCHLD, signal.SIG_DFL)\n    wrap = paths[\"wrap\"]",
       "    wrap = paths[\"wrap\"]",
       "bwrap inherits an ignored SIGCHLD: the sandbox outlives its server",
       T_TREE2, T_SPAWN, "-k", "tree or sigkilled or bubblewrap"),
    _k("S2-34", SPAWN_SERVER, "        moved.update(supervisor.wrapped_environment(confined[2]))",
       "        pass", "a call served inside bubblewrap keeps the host's TMPDIR and caches",
       T_WORLD2, T_SBX1, "-k", "(temp_is_private or caches) and bubblewrap"),
    # ----- jobs/spawner.py
    _k("S2-35", SPAWNER, "            return data, _CREDENTIALS.unpack_from(payload)[0] or None",
       "            return data, None",
       "the host takes a supervisor's PID-namespace id for its own: cancel and timeouts signal the wrong process",
       T_TREE2, T_BASH, "-k", "tree or cancellation or timeout_kills"),
    _k("S2-36", SPAWNER, '            if name in (b"crystal-sandbox", b"bwrap"):', '            if name == b"crystal-sandbox":',
       "bwrap's own processes count as a command's leftovers", T_TREE2, T_SPAWN, "-k", "tree or sigkilled or few_servers"),
    _k("S2-37", SPAWNER, 'if "--wrap" not in launcher and not all(', 'if not all(',
       "bubblewrap calls get no lasting server (a bwrap and an interpreter per call)", T_TREE2, T_SPAWN),
    # ----- jobs/supervisor.py
    _k("S2-38", SUPERVISOR, "_STDIN_BACK = 'exec 0<&3 3<&-; exec \"$@\"'", "_STDIN_BACK = 'exec \"$@\"'",
       "under bubblewrap a command's stdin is /dev/null and descriptor 3 leaks in",
       T_EXECP, T_WORLD2, "-k", "(descriptors and bubblewrap) or ex15 or ex6 or ex8"),
    _k("S2-39", SUPERVISOR, "        actions = [(os.POSIX_SPAWN_DUP2, 0, 3), (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0)]",
       "        actions = [(os.POSIX_SPAWN_DUP2, 0, 3)]",
       "bwrap keeps the command's stdin open: a program that stops reading does not break the host's pipe",
       T_EXECP, "-k", "ex15 or ex9"),
    _k("S2-40", SUPERVISOR, "for i in range(len(wrap) - 2) if wrap[i] == \"--setenv\"}",
       "for i in range(len(wrap) - 3) if wrap[i] == \"--setenv\"}",
       "the last --setenv (TMPDIR=/tmp) is not applied to calls a bubblewrap server runs",
       T_WORLD2, T_SBX1, "-k", "(temp_is_private or caches) and bubblewrap"),
    _k("S2-41", SUPERVISOR, '    if rules.paths["temp"] and not rules.paths["wrap"]:', "    if False:",
       "Landlock-path commands keep the host's TMPDIR, not the private /tmp",
       T_WORLD2, T_SBX1, T_TREE2, "-k", "(temp or caches) and landlock"),
    _k("S2-42", SUPERVISOR, "                 wrap=rules.paths[\"wrap\"] if rules is not None else None)",
       "                 wrap=None)",
       "a per-call supervisor (background jobs, no spawn server) runs the command without bwrap: unconfined",
       T_SBX1, "-k", "background and bubblewrap"),
    # ----- jobs/landlock_world.py
    _k("S2-43", WORLD, "        if not self.network:\n            _loopback_up()", "        if self.network:\n            _loopback_up()",
       "on the Landlock path the loopback is down: a command cannot talk to itself on 127.0.0.1",
       T_SBX1, T_WORLD2, "-k", "(connect or udp) and landlock"),
    _k("S2-44", WORLD, "        if given not in TEMP_PLACES and any(", "        if any(",
       "with Home in /tmp the Landlock path leaves /tmp the host's (not private)",
       T_WORLD2, "-k", "(defect_11 or temp) and landlock"),
    _k("S2-45", WORLD, "            if not (in_temp or in_hidden) or any(", "            if not in_temp or any(",
       "an exec set in the Crystal Home is hidden from itself on the Landlock path",
       T_SBX1, "-k", "exec_set and landlock"),
    # ----- core/host_folders.py
    _k("S2-46", HOST_FOLDERS, "    if info.st_mode & 0o077:\n        try:", "    if info.st_mode & 0o070:\n        try:",
       "a host-only folder open to others (0707) stays so", T_SPACE2),
    _k("S2-47", HOST_FOLDERS, "            if looked >= STALE_LOOKED_AT or removed >= STALE_REMOVED:",
       "            if looked >= STALE_LOOKED_AT or removed > STALE_REMOVED:",
       "one start removes 17 stale folders, not 16", T_SPACE2),
    _k("S2-48", HOST_FOLDERS, "    if folder.is_symlink() or folder.exists():  # left by an earlier process with this pid\n        remove_folder(folder)",
       "    if False:\n        remove_folder(folder)",
       "a folder an earlier process with this pid left (a planted kernel.json) is reused", T_SPACE2),
    _k("S2-49", HOST_FOLDERS, "    if stat.S_ISLNK(info.st_mode):\n        raise", "    if False:\n        raise",
       "a linked host-only folder is refused with the wrong line", T_SPACE2),
    # ----- host/journal_index.py and host/journal_sign.py (TRUST-7)
    _k("S2-50", JOURNAL_INDEX, "    if (known_size, known_chain) != (size, chain):", "    if known_size != size:",
       "a journal of the recorded length but other signed content counts as the last save", T_TRUST7),
    _k("S2-51", JOURNAL_INDEX, "    if data.get(\"workspace\") != signer.workspace or data.get(\"id\") != session_id:",
       "    if False:", "a record of another session is taken for this one's", T_TRUST7),
    _k("S2-52", JOURNAL_INDEX, "    for _, name in found[:len(found) - LIMIT]:", "    for _, name in found[LIMIT:]:",
       "a full index drops the newest records instead of the oldest", T_TRUST7),
    _k("S2-53", JOURNAL_INDEX, "    if new:\n        _prune(path.parent)", "    if not new:\n        _prune(path.parent)",
       "the index is never pruned when a session is added", T_TRUST7),
    _k("S2-54", SIGN, "        return str(Path(workspace).resolve())", "        return os.path.abspath(workspace)",
       "a workspace opened through a link signs for another place: its sessions are unverified through the real path",
       T_TRUST7, "tests/security/test_mutants_signatures.py"),
    _k("S2-55", SIGN, "    message = b\"tail\\0\" + signer.place + b\"\\0\" + session_id",
       "    message = b\"tail\\0\" + session_id",
       "the listing's tail signature is not bound to the workspace", T_TRUST7, "tests/security/test_mutants_signatures.py"),
    _k("S2-56", SIGN, "    return isinstance(line, dict) and \"v\" not in line and \"c\" in line",
       "    return isinstance(line, dict) and \"c\" in line",
       "a current-format journal that fails is said to be in the older format", T_TRUST7),
    # ----- tools/exec_sets.py and tools/_sandbox.py
    _k("S2-57", EXEC_SETS, "    if os.path.isfile(os.path.join(venv, \"pyvenv.cfg\")):\n        found.append(venv)",
       "    if False:\n        found.append(venv)",
       "an exec tool run by a venv's python outside Home and the system fails under bubblewrap",
       T_SBX1, "-k", "exec_set and bubblewrap"),
    _k("S2-58", EXEC_SETS, "os.path.join(os.path.realpath(os.path.join(key[0], \"data\")), \"tools\", name)",
       "os.path.join(key[0], \"data\", \"tools\", name)",
       "a Crystal Home reached through a link: every Home exec set is refused as a linked data folder",
       T_LINKS2, T_SBX1, "-k", "exec or data"),
    _k("S2-59", EXEC_SETS, "        for folder in data_dirs:\n            problem = check_data_dir(",
       "        for folder in data_dirs[:1]:\n            problem = check_data_dir(",
       "a workspace data folder that is a link is handed to the sandbox", T_LINKS2),
    _k("S2-60", TOOL_SANDBOX, "    folders = [(ctx.workspace, \"The workspace\", \"open a session in the folder you mean\")]",
       "    folders = []", "a workspace swapped for a link is handed to the sandbox", T_LINKS2),
    _k("S2-61", TOOL_SANDBOX, "    if real != str(folder):", "    if real != os.path.realpath(real):",
       "a folder swapped for a link is handed to the sandbox", T_LINKS2),
    # ----- the approval flow's outside_sandbox rule
    _k("S2-62", APPROVAL, "    return bool(c.unsandboxed) or c.unconfined", "    return c.unconfined",
       "the python tool runs in full with nobody asked", T_PY1),
    _k("S2-63", APPROVAL, "    if c.unsandboxed:\n        return (f\"It runs unsandboxed", "    if False:\n        return (f\"It runs unsandboxed",
       "the python tool's approval form does not say it runs unsandboxed", T_PY1,
       "tests/security/test_approval_form_shows_whole_call.py"),
]

# The rows no earlier test caught: each is checked against the tests written for it,
# named ``…__S2_NN`` in tests/security/test_mutants_s2.py (the arguments above are the
# tests the pass ran).
S2_SURVIVORS = {"S2-11", "S2-12", "S2-13", "S2-14", "S2-21", "S2-22", "S2-25", "S2-26", "S2-27", "S2-40", "S2-41",
                "S2-43", "S2-45", "S2-46", "S2-48", "S2-50", "S2-54", "S2-56", "S2-57", "S2-58"}
# Equivalent alone (docs/mutants.md says why): written and run, not re-checked by make mutants.
S2_EQUIVALENT = {"S2-31", "S2-32", "S2-51"}
SANDBOX2_EQUIVALENT = [m for m in SANDBOX2_PASS if m.id in S2_EQUIVALENT]
SANDBOX2_PASS = [replace(m, tests=(T_S2, "-k", f"__{m.id.replace('-', '_')}")) if m.id in S2_SURVIVORS else m
                 for m in SANDBOX2_PASS if m.id not in S2_EQUIVALENT]
