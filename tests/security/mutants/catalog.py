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
    return Mutant(id, file, old, new, what, (test_file, "-k", f"__{id}"))


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
    _m("R07", RULES, "if w.text == short and k + 1 < len(rest):", "if w.text == short and k + 2 < len(rest):",
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
