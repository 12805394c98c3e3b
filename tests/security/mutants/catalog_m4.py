"""Rows M4-.. of the mutant catalog: the survivors of the second hand-mutation pass of
the safety core (main at c1a37a5, 2026-12-07). catalog.py adds them to
``MUTANTS``; docs/mutants.md lists them with what a user would lose.

Where the code a mutant changed was rewritten since (the wrapper options of
host/shell_rules.py, M4-62), the row makes the same slip in the new code. Tests are
named ``…__M4_NN``: ``-k __M4_NN`` selects them.
"""

from __future__ import annotations

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
