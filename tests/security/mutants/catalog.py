"""The hand mutants of the approval core and the tests that must catch each one.

Rows A/F/X/R/P/T/G come from the mutation pass on main at 58dd0dd (2026-12-01; the
36 survivors that no test noticed then). ``old`` is the exact code text
(it must occur once in ``file``), ``new`` what a slip would make of it. ``tests`` are
pytest arguments: a file and ``-k __ID`` select the tests named after the mutant.
docs/mutants.md lists them with what a user would lose.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    id: str
    file: str
    old: str
    new: str
    what: str
    tests: tuple[str, ...]


APPROVAL = "crystal_kernel/host/approval.py"
FLOW = "crystal_kernel/host/approval_flow.py"
ACCESS = "crystal_kernel/core/access.py"
RULES = "crystal_kernel/host/shell_rules.py"
PARSE = "crystal_kernel/host/shell_parse.py"
TRUST = "crystal_kernel/core/trust.py"
DIGEST = "crystal_kernel/core/trust_digest.py"
GRANTS = "crystal_kernel/host/grants.py"

T_APPROVAL = "tests/approval/test_mutants_approval.py"
T_FLOW = "tests/approval/test_mutants_approval_flow.py"
T_ACCESS = "tests/security/test_mutants_access.py"
T_SHELL = "tests/security/test_mutants_shell.py"
T_TRUST = "tests/security/test_mutants_trust.py"
T_GRANTS = "tests/security/test_mutants_grants.py"


def _m(id: str, file: str, old: str, new: str, what: str, test_file: str) -> Mutant:
    # Test names cannot hold "-": M4-55's tests are named ``…__M4_55``.
    return Mutant(id, file, old, new, what, (test_file, "-k", f"__{id.replace('-', '_')}"))


MUTANTS: list[Mutant] = [
    # ----- host/approval.py
    _m("A01", APPROVAL, "if c.external and c.risk < Risk.WRITE:", "if c.external and c.risk > Risk.WRITE:",
       "MODE-3 floor flipped", T_APPROVAL),
    _m("A16", APPROVAL, "if risk not in LEVELS or auth not in LEVELS:", "if risk not in LEVELS and auth not in LEVELS:",
       "a verdict missing one level is not an error", T_APPROVAL),
    _m("A18", APPROVAL, "if rule_tool == tool or fnmatch.fnmatchcase(tool, rule_tool):", "if rule_tool == tool:",
       "forbidden rule tool globs ignored", T_APPROVAL),
    _m("A21", APPROVAL, "real = os.path.realpath(absolute_text)", "real = absolute_text",
       "forbidden path rules do not resolve symlinks", T_APPROVAL),
    _m("A22", APPROVAL, "return [json.dumps(arguments, sort_keys=True, ensure_ascii=False)]", "return []",
       "tools without path/command never match a forbidden rule", T_APPROVAL),
    _m("A23", APPROVAL, "if tool not in SHELL_TOOLS or not isinstance(command, str):",
       'if tool != "bash" or not isinstance(command, str):',
       "forbidden_unsure ignores bash_start", T_APPROVAL),
    _m("A26", APPROVAL, "entry = (tool, pattern, glob and pattern is not None)",
       "entry = (tool, pattern, pattern is not None)", "every exact allowance becomes a glob", T_APPROVAL),
    _m("A28", APPROVAL, "            if pattern is None:\n                continue",
       "            if pattern is None:\n                return True",
       "a call without pattern is covered by any pattern allowance", T_APPROVAL),
    _m("A29", APPROVAL, "if pattern == pat:", "if pattern.startswith(pat):",
       "exact allowance widened to a prefix", T_APPROVAL),
    # ----- host/approval_flow.py
    _m("F04", FLOW, "    if c.host_owned:\n",
       "    if c.host_owned and not session.allowances.allows(call.name, c.pattern):\n",
       "TRUST-3: a session allowance stands in for the person", T_FLOW),
    _m("F07", FLOW, 'return Decision(verdict.outcome == "allow", "reviewer", reason)',
       'return Decision(verdict.outcome == "allow" or reason is None, "reviewer", reason)',
       "a reviewer deny without rationale allows", T_FLOW),
    _m("F11", FLOW, '    if answer.outcome == "deny":\n        record("deny", "person", "; ".join(x for x in (via, '
       'answer.reason) if x) or None)\n        return Decision(False, "person", answer.reason)\n    if answer.outcome '
       '== "allow_session":',
       '    if answer.outcome == "deny" and answer.reason:\n        record("deny", "person", "; ".join(x for x in '
       '(via, answer.reason) if x) or None)\n        return Decision(False, "person", answer.reason)\n    if '
       'answer.outcome == "allow_session":',
       "a person's deny without a reason allows", T_FLOW),
    _m("F12", FLOW, '    if answer.outcome == "allow_session":\n        scope',
       '    if answer.outcome in ("allow_session", "allow_once"):\n        scope',
       "allow-once recorded as allow-for-session", T_FLOW),
    # ----- core/access.py
    _m("X01", ACCESS, "def _inside(path: Path, root: Path) -> bool:\n    return path == root or root in path.parents",
       "def _inside(path: Path, root: Path) -> bool:\n    return str(path).startswith(str(root))",
       "containment by string prefix (/ws2 inside /ws)", T_ACCESS),
    _m("X06", ACCESS,
       "if is_credential_path(resolved.relative_to(rule.path)) or is_credential_path(Path(resolved.name)):",
       "if is_credential_path(Path(resolved.name)):", "credential check on the file name only", T_ACCESS),
    _m("X17", ACCESS, "for candidate in (written, resolved):", "for candidate in (written,):",
       "TRUST-3: a symlink into .crystal/ is not host-owned", T_ACCESS),
    _m("X18", ACCESS, "if _inside(resolved, real_home):", "if _inside(written, real_home):",
       "TRUST-3: a symlink into Home is not host-owned", T_ACCESS),
    _m("X19", ACCESS, "resolved = Path(os.path.realpath(self.absolute(path)))\n        return _inside",
       "resolved = Path(self.absolute(path))\n        return _inside",
       "in_workspace does not resolve '..' or symlinks", T_ACCESS),
    # ----- host/shell_rules.py
    _m("R06", RULES, '("-exec", "-execdir", "-ok", "-okdir")', '("-exec",)',
       "find -execdir/-ok not unwrapped", T_SHELL),
    _m("R07", RULES, "    if i + 1 < len(words):\n        return option, words[i + 1], i + 2",
       "    if i + 2 < len(words):\n        return option, words[i + 1], i + 2",
       "su -c CMD as the last words not unwrapped", T_SHELL),
    _m("R15", RULES, "if view.unsure or not view.literal:", "if not view.literal:",
       "a session glob covers an unsure command", T_SHELL),
    _m("R16", RULES, 'all(fnmatch.fnmatchcase(" ".join(e.argv), glob) for e in view.effective if e.wrapped)',
       "True", "a session glob ignores wrapped commands", T_SHELL),
    _m("R22", RULES, 'if name in _SHELLS or (name == "busybox"', 'if name in ("sh", "bash") or (name == "busybox"',
       "zsh/dash/ksh -c not unwrapped", T_SHELL),
    # ----- host/shell_parse.py
    _m("P04", PARSE, '_BLANKS = " \\t\\r"', '_BLANKS = " "', "tab is not a word separator", T_SHELL),
    _m("P05", PARSE, 'if c == "#" and not cur.started:', 'if c == "#":', "'#' inside a word starts a comment",
       T_SHELL),
    _m("P09", PARSE, '("case", "function", "select", "coproc", "alias")', '("case", "function", "select", "coproc")',
       "alias definitions are not unsure", T_SHELL),
    _m("P16", PARSE, 's.startswith("\\\\\\n", self.i)', 's.startswith("\\\\\\r\\n", self.i)',
       "backslash-newline continuation not joined", T_SHELL),
    _m("P21", PARSE, "self.scan_expansions(s[self.i + 3:max(self.i + 3, end - 1)])", "pass",
       "$((...)) not scanned for $(...)", T_SHELL),
    # ----- core/trust.py
    _m("T03", TRUST, "def _inside(path: Path, root: Path) -> bool:\n    return path == root or root in path.parents",
       "def _inside(path: Path, root: Path) -> bool:\n    return str(path).startswith(str(root))",
       "Home containment by string prefix", T_TRUST),
    # T05 and T10 first mutated core/trust.py's folder walk; since the closure hash moved to
    # core/trust_digest.py they are the same slips made there.
    _m("T05", DIGEST, "entries = sorted(files) + [", 'entries = sorted(f for f in files if not f.startswith(".")) + [',
       "hidden files of an exec set not hashed", T_TRUST),
    _m("T10", DIGEST, "dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]", "dirs[:] = []",
       "exec set subfolders not hashed", T_TRUST),
    # ----- host/grants.py
    _m("G01", GRANTS, "    if key is None or not isinstance(signature, str):\n        return False",
       "    if key is None or not isinstance(signature, str):\n        return signature is None",
       "an unsigned directory list is accepted", T_GRANTS),
    _m("G03", GRANTS, '{"id": session_id, "workspace"', '{"workspace"',
       "signature not bound to the session id", T_GRANTS),
    _m("G04", GRANTS, '"workspace": str(workspace), ', "", "signature not bound to the workspace", T_GRANTS),
    _m("G05", GRANTS, 'sorted((str(d.get("path")), str(d.get("mode", "rw"))) for d',
       'sorted(str(d.get("path")) for d', "the grant's mode is not signed", T_GRANTS),
    _m("G06", GRANTS, "os.O_NOFOLLOW, 0o600)", "os.O_NOFOLLOW, 0o644)", "session key created world-readable",
       T_GRANTS),
]


# ----- second pass (2026-12-02): the code landed for TRUST-5 and host/approval_flow.py -----

T_CLOSURE = "tests/security/test_mutants_trust_closure.py"
T_HOST3 = "tests/security/test_trust3_host_owned.py"
T_PERSON = "tests/approval/test_person_and_log.py"


def _n(id: str, file: str, old: str, new: str, what: str, *tests: str) -> Mutant:
    """A mutant caught by tests named by node id (written before it, or by others)."""
    return Mutant(id, file, old, new, what, tests)


SECOND_PASS: list[Mutant] = [
    # ----- core/trust_digest.py
    _m("D01", DIGEST, '    if os.path.islink(path):\n        return Digest("", f"{path} is a symbolic link; only',
       '    if False:\n        return Digest("", f"{path} is a symbolic link; only',
       "a linked mcp.json / review prompt / cassette is trusted", T_CLOSURE),
    _m("D02", DIGEST, "return path == root or path.startswith(root.rstrip(os.sep) + os.sep)",
       "return path == root or path.startswith(root)",
       "a link into a sibling folder sharing the set's name prefix counts as inside", T_CLOSURE),
    _m("D03", DIGEST, "for what in (folder, str(manifest)):", "for what in (str(manifest),):",
       "a linked set folder is trusted", T_CLOSURE),
    # A link leading out of the set is refused by the closure walk too (D05); only a link
    # inside the set tells the manifest check apart.
    _m("D04", DIGEST, "for what in (folder, str(manifest)):", "for what in (folder,):",
       "a tools.json that is a link inside the set is trusted", T_CLOSURE),
    _m("D05", DIGEST, "if not _inside(target, real_root):", "if not _inside(target, os.sep):",
       "a link leading outside the set is hashed, not refused", T_CLOSURE),
    _m("D06", DIGEST, 'digest.update(b"x" if st.st_mode & 0o111 else b"-")', "pass",
       "making a file of the set executable keeps it trusted", T_CLOSURE),
    _m("D07", DIGEST, "if count > MAX_HASHED_FILES:", "if count > MAX_HASHED_FILES + 1:",
       "the file bound lets one more file through", T_CLOSURE),
    _m("D08", DIGEST, "                    if total > MAX_HASHED_BYTES:", "                    if total > 2 * MAX_HASHED_BYTES:",
       "the byte bound is doubled", T_CLOSURE),
    _m("D09", DIGEST, "key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)",
       "key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)",
       "the hash cache ignores ctime: same-size content with the old mtime put back stays trusted", T_CLOSURE),
    _m("D10", DIGEST, "if hit is not None and hit[0] == key:", "if hit is not None:",
       "the hash cache never notices a change", T_CLOSURE),
    _m("D11", DIGEST, "    if problem is not None:\n        return Digest(\"\", problem)",
       "    if False:\n        return Digest(\"\", problem)",
       "a refused closure still gets a hash", T_CLOSURE),
    _m("D12", DIGEST, 'digest.update(b"entry\\0" + os.fsencode(rel) + b"\\0")', 'digest.update(b"entry\\0")',
       "renaming a file of the set keeps it trusted", T_CLOSURE),
    # ----- core/trust.py
    _m("U01", TRUST, 'for name in REVIEW_PROMPTS if index == 0 else ("review",):', 'for name in ("review",):',
       "review.user.md is not listed by trust and cannot be trusted", T_CLOSURE),
    _m("U02", TRUST, 'PROMPT_SUFFIXES = (".md", ".txt")', 'PROMPT_SUFFIXES = (".md",)',
       "review.txt is not listed by trust and cannot be trusted", T_CLOSURE),
    _m("U03", TRUST, "    return _inside(Path(os.path.realpath(path)), Path(os.path.realpath(workspace)))",
       "    return True", "a file the person named outside the workspace needs trust", T_CLOSURE),
    _m("U04", TRUST, "if workspace is None or not needs_trust(home, path):", "if workspace is None:",
       "Home's own files need trust when the workspace holds Home", T_CLOSURE),
    _n("U05", TRUST, 'ok = bool(digest) and entry.get("sha256") == digest and entry.get("kind") == kind',
       'ok = bool(digest) and entry.get("kind") == kind', "a file once trusted stays trusted whatever changes",
       f"{T_TRUST}::test_a_changed_file_in_a_subfolder_makes_the_set_untrusted__T10"),
    _m("U06", TRUST, 'data["files"][str(real)] = {"kind": kind', 'data["files"][str(named)] = {"kind": kind',
       "trust given through a linked workspace path never holds", T_CLOSURE),
    # ----- host/approval_flow.py
    _n("W01", FLOW, "    if c.host_owned:\n", '    if c.host_owned and session.approval != "full":\n',
       "TRUST-3 skipped in full", f"{T_HOST3}::test_file_tools_cannot_change_host_files_without_a_person"),
    _n("W02", FLOW, '    if mode == "audit":\n        # Audit classifies',
       '    if mode == "review":\n        # Audit classifies', "audit does not classify calls allowed for the session",
       f"{T_PERSON}::test_audit_reviews_even_calls_allowed_for_the_session"),
    _m("W03", FLOW, 'if verdict.outcome in ("allow", "deny"):', 'if verdict.outcome == "allow":',
       "a reviewer's deny goes to the person instead of denying", T_FLOW),
    _n("W04", FLOW, '        if scope == "tool":\n            session.allowances.allow(call.name, None)',
       '        if scope == "tool":\n            session.allowances.allow(call.name, c.pattern)',
       "allow the whole tool allows only this call", f"{T_PERSON}::test_allow_session_for_the_whole_tool_or_a_glob"),
    _n("W05", FLOW, "session.allowances.allow(call.name, scope, glob=True)",
       "session.allowances.allow(call.name, scope, glob=False)", "the person's glob is taken as an exact text",
       f"{T_PERSON}::test_allow_session_for_the_whole_tool_or_a_glob"),
    _n("W06", FLOW, "        else:\n            session.allowances.allow(call.name, c.pattern)",
       "        else:\n            session.allowances.allow(call.name, None)",
       "allow this call for the session allows the whole tool",
       f"{T_PERSON}::test_allow_session_exact_pattern_never_widens"),
    _n("W07", FLOW, '    if answer.outcome == "deny":\n        record("deny", "person", "; ".join(x for x in (via, '
       'answer.reason) if x) or None)\n        return Decision(False, "person", answer.reason)\n    # "Allow',
       '    if answer.outcome == "deny" and answer.reason:\n        record("deny", "person", "; ".join(x for x in '
       '(via, answer.reason) if x) or None)\n        return Decision(False, "person", answer.reason)\n    # "Allow',
       "a person's deny without a reason allows a host-owned change",
       f"{T_HOST3}::test_edit_of_the_review_prompt_asks_the_person_every_time_even_in_full"),
    _n("W08", FLOW, "    if unsure is not None:\n", '    if unsure is not None and session.approval != "full":\n',
       "an unparsable command passes the forbidden check in full",
       f"{T_APPROVAL}::test_unparsable_background_command_is_not_passed_by_the_forbidden_check__A23"),
    _m("W09", FLOW, "    return verdict_from(verdict.model_dump(), c)", "    return verdict",
       "a plugged-in reviewer's own outcome is trusted (no REV-1/REV-2 floor)", T_FLOW),
    _m("W10", FLOW, "    if not isinstance(verdict, ReviewVerdict):\n        return failed_verdict",
       "    if False:\n        return failed_verdict", "a reviewer returning no verdict breaks the turn", T_FLOW),
    _m("W11", FLOW, "del session.audit[: len(session.audit) - AUDIT_LIMIT]", "del session.audit[AUDIT_LIMIT:]",
       "a full audit log drops the newest decisions", T_FLOW),
    _m("W12", FLOW, "    if isinstance(value, str) and len(value) > AUDIT_VALUE_LIMIT:",
       "    if isinstance(value, str) and len(value) > AUDIT_VALUE_LIMIT * 100:",
       "the audit log keeps long arguments whole", T_FLOW),
    _n("W13", FLOW, "rule = forbidden_match(session.config.forbidden, call.name, call.arguments, session.workspace)",
       "rule = forbidden_match(session.config.forbidden, call.name, call.arguments, None)",
       "path rules no longer see the workspace-relative and resolved paths",
       f"{T_APPROVAL}::test_forbidden_path_rule_sees_through_a_symlink__A21"),
    _n("W14", FLOW, "    c = apply_floor(classification)", "    c = classification",
       "the flow does not apply the MODE-3 floor",
       f"{T_APPROVAL}::test_external_read_tool_is_shown_to_the_person_as_a_write__A01"),
]

MUTANTS += SECOND_PASS

# ----- second pass: the SANDBOX-1 code (jobs/sandbox.py, jobs/landlock.py, the supervisor,
# the approval and loop changes, the tools that start processes)

SANDBOX = "crystal_kernel/jobs/sandbox.py"
LANDLOCK = "crystal_kernel/jobs/landlock.py"
T_SBX = "tests/security/test_mutants_sandbox.py"
T_SBX1 = "tests/security/test_sandbox1_tool_processes.py"
BEYOND = f"{T_SBX1}::test_bash_in_full_cannot_write_beyond_the_workspace"
NO_LANDLOCK = f"{T_SBX1}::test_without_landlock_the_host_says_so_once_and_asks"
EXEC_DATA = f"{T_SBX1}::test_exec_set_is_confined_but_keeps_its_data_folders"

SANDBOX_PASS: list[Mutant] = [
    _n("S01", SANDBOX, "protected = [str(paths.host_dir(workspace)), str(config.home), *credential_folders()]",
       "protected = [str(config.home), *credential_folders()]", "the workspace's .crystal/ is writable", BEYOND),
    # S02 and S03 (the Crystal Home, the credential folders dropped from the write rules)
    # are equivalent since SANDBOX-2: both are also hidden (an empty read-only folder over
    # each), which keeps every write out on both mechanisms. Kept in docs/mutants.md.
    _n("S04", SANDBOX, "        if not self.network:\n", "        if self.network:\n",
       "no-network is applied exactly when the network is allowed",
       f"{T_SBX1}::test_bash_cannot_connect_to_a_loopback_port_unless_allowed"),
    _m("S05", SANDBOX, "[str(workspace)] + [str(p) for p in writable] if", "[str(workspace)] if",
       "folders the person opened rw (/access add) are not writable in the sandbox", T_SBX),
    _n("S06", SANDBOX, 'for p in writable] if config.sandbox == "workspace-write" else [])',
       'for p in writable] if config.sandbox != "off" else [])', "read-only mode writes the workspace",
       f"{T_SBX1}::test_read_only_mode_writes_nothing_in_the_workspace"),
    _n("S08", SANDBOX, '    if config.sandbox == "off":\n        return "off"',
       '    if config.sandbox == "off":\n        return "missing"', "sandbox off is treated as missing: full asks",
       f"{T_SBX1}::test_sandbox_off_is_the_persons_choice_in_full"),
    _n("S09", SANDBOX, "and landlock_abi() >= 1 and namespace_works():",
       "and landlock_abi() >= 0 and namespace_works():", "no Landlock is taken for a sandbox", NO_LANDLOCK),
    _m("S10", SANDBOX, "if sandbox is None or not failed:", "if sandbox is None:",
       "a command that succeeded gets the sandbox-refused line", T_SBX),
    _m("S11", SANDBOX, "if sandbox is None or not failed:", "if not failed:",
       "an unsandboxed refusal breaks the tool result", T_SBX),
    _m("S21", LANDLOCK, "    if abi >= 3:\n        fs |= TRUNCATE", "    if abi >= 99:\n        fs |= TRUNCATE",
       "truncate(2) is not refused anywhere", T_SBX),
    _m("S22", LANDLOCK, "    if abi >= 2:\n        fs |= REFER", "    if abi >= 99:\n        fs |= REFER",
       "moving or linking files between workspace folders fails", T_SBX),
    _m("S23", LANDLOCK, "MAKE_ALL = sum(1 << bit for bit in range(6, 13))",
       "MAKE_ALL = sum(1 << bit for bit in range(6, 12))", "symbolic links can be made anywhere", T_SBX),
    _m("S24", LANDLOCK, "fs = WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_ALL", "fs = WRITE_FILE | REMOVE_DIR | MAKE_ALL",
       "files outside the workspace can be removed", T_SBX),
    _m("S25", LANDLOCK, "fs = WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_ALL", "fs = WRITE_FILE | REMOVE_FILE | MAKE_ALL",
       "folders outside the workspace can be removed", T_SBX),
    _m("S26", LANDLOCK, "attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP",
       "attr.handled_access_net = NET_CONNECT_TCP", "a sandboxed command can listen on a TCP port", T_SBX),
    _m("S27", LANDLOCK, "attr.scoped = SCOPE_ABSTRACT_UNIX", "attr.scoped = 0",
       "abstract unix sockets made outside the sandbox are reachable", T_SBX),
    _n("S28", LANDLOCK, "beneath = _PathBeneath(fs if is_dir else fs & (WRITE_FILE | TRUNCATE), fd)",
       "beneath = _PathBeneath(fs, fd)", "a granted file gets folder rights: the sandbox cannot start",
       f"{T_SBX1}::test_bash_still_writes_the_workspace_and_temp"),
    _n("S32", LANDLOCK, "    if any(_inside(root, p) for p in protected):\n        return",
       "    if False:\n        return", "split mode grants the protected .crystal/",
       f"{T_SBX1}::test_split_mode_protects_crystal_without_a_namespace"),
    _n("S33", LANDLOCK, "[(p, MS_RDONLY) for p in read_only]", "[(p, 0) for p in read_only]",
       "the protected bind mounts are writable", BEYOND),
    _m("S34", LANDLOCK, 'return writable + allowed, "namespace"', 'return writable, "namespace"',
       "an exec set's data folders are not writable", T_SBX),
    _m("S50", FLOW, 'if outside_sandbox(c) and mode in ("full", "review"):', 'if outside_sandbox(c) and mode == "full":',
       "without Landlock, review lets the reviewer allow an unconfined command", T_SBX),
    _m("S51", FLOW, "        if session.allowances.allows(call.name, c.pattern):\n",
       "        if False:\n", "without Landlock, a session allowance is ignored", T_SBX),
    _n("S55", "crystal_kernel/host/loop.py", 'if tool.sandboxed and sandbox_state(session.config) == "missing":',
       'if tool.sandboxed and sandbox_state(session.config) == "off":', "without Landlock, full runs unconfined",
       f"{T_SBX1}::test_without_landlock_nobody_there_means_denied_in_full"),
    _n("S56", "crystal_kernel/host/loop.py", "session.note(MISSING_NOTE, once=True)",
       "session.note(MISSING_NOTE, once=False)", "the missing-sandbox note repeats", NO_LANDLOCK),
    _n("S60", "crystal_kernel/tools/exec_sets.py", "sandbox = sandbox.with_allowed(*data_dirs)", "sandbox = sandbox",
       "an exec set's data folders are not writable", EXEC_DATA),
    _n("S63", "crystal_kernel/tools/background.py", "cwd=ctx.workspace, sandbox=sandbox)",
       "cwd=ctx.workspace, sandbox=None)", "background jobs run unconfined",
       f"{T_SBX1}::test_background_job_is_confined_and_its_logs_say_so"),
    _m("S64", "crystal_kernel/tools/notebook_run.py", "workspace=ctx.workspace, sandbox=sandbox)",
       "workspace=ctx.workspace, sandbox=None)", "notebook_run's kernel runs unconfined", T_SBX),
    _n("S65", "crystal_kernel/tools/notebook_run.py",
       'ipc = ["--ipc"] if sandbox is not None and not sandbox.network else []', "ipc = []",
       "the sandboxed kernel talks TCP, which the sandbox refuses", f"{T_SBX}::test_notebook_run_cells_are_confined__S64"),
    _m("S67", "crystal_kernel/core/config.py", 'if key == "sandbox" and value not in SANDBOX_MODES:', "if False:",
       "a mistyped sandbox mode is accepted silently", T_SBX),
    _m("S68", "crystal_kernel/core/config.py", "sandbox_network: bool = False", "sandbox_network: bool = True",
       "the network is on by default", T_SBX),
    _n("S69", "crystal_kernel/core/config.py", 'sandbox: str = "workspace-write"', 'sandbox: str = "off"',
       "the sandbox is off by default", BEYOND),
    _n("S70", "crystal_kernel/jobs/supervisor.py", "    _confine(rules, env)\n", "    pass\n",
       "the supervisor never confines itself", BEYOND),
]

MUTANTS += SANDBOX_PASS

# ----- second pass of 2026-12-07 (main at c1a37a5): rows M4-.. in catalog_m4.py
from catalog_m4 import FOURTH_PASS, SANDBOX2_PASS  # noqa: E402

MUTANTS += FOURTH_PASS
MUTANTS += SANDBOX2_PASS
