"""host/shell_parse.py and host/shell_rules.py: what the parser reports and what a
forbidden rule or a session allowance decides for real command lines (GUARD-1, GUARD-2;
``R..`` and ``P..`` rows of docs/mutants.md)."""

from __future__ import annotations

import pytest

from crystal_kernel.host.approval import SessionAllowances, forbidden_match, forbidden_unsure
from crystal_kernel.host.shell_parse import parse_shell
from crystal_kernel.host.shell_rules import allowance_covers

RM_RULE = [{"tool": "bash", "pattern": "rm -rf *"}]


def forbidden(command: str, rules=RM_RULE) -> bool:
    return forbidden_match(rules, "bash", {"command": command}) is not None


def session_glob_allows(glob: str, command: str) -> bool:
    allowances = SessionAllowances()
    allowances.allow("bash", glob, glob=True)
    return allowances.allows("bash", command)


# ----- shell_rules: unwrapping (R06, R07, R22) ---------------------------------------------

@pytest.mark.parametrize("flag", ["-execdir", "-ok", "-okdir"])
def test_find_runs_its_command_behind_execdir_and_ok__R06(flag):
    assert forbidden(f"find . -name '*.tmp' {flag} rm -rf {{}} ;")
    assert forbidden(f"find / {flag} rm -rf {{}} +")


@pytest.mark.parametrize("wrapper", ["su -c", "su root -c", "runuser -u bob -- -c", "flock /tmp/l -c"])
def test_su_c_as_the_last_words_is_unwrapped__R07(wrapper):
    assert forbidden(f"{wrapper} 'rm -rf /'")


@pytest.mark.parametrize("shell", ["zsh", "dash", "ksh", "mksh", "fish", "rbash", "/usr/bin/zsh"])
def test_every_shell_c_is_unwrapped__R22(shell):
    assert forbidden(f"{shell} -c 'rm -rf ~'")
    assert forbidden(f"{shell} -lc 'cd /; rm -rf .'")


# ----- shell_rules: session globs (R15, R16) -----------------------------------------------

def test_a_session_glob_never_covers_a_command_the_parser_is_unsure_of__R15():
    assert session_glob_allows("pytest *", "pytest tests")
    assert not session_glob_allows("pytest *", "pytest tests; alias ls='rm -rf ~'")
    assert not session_glob_allows("pytest *", "pytest x; case $1 in a) rm -rf ~;; esac")
    assert not allowance_covers("echo *", "echo hi; coproc rm -rf ~")


@pytest.mark.parametrize("glob, command", [
    ("sudo *", "sudo rm -rf ~"),
    ("env *", "env FOO=1 rm -rf ~"),
    ("timeout *", "timeout 5 rm -rf ~"),
    ("xargs *", "xargs rm -rf"),
    ("nice *", "nice -n 5 rm -rf ~"),
])
def test_a_session_glob_must_also_match_the_wrapped_command__R16(glob, command):
    """`sudo *` allowed for `sudo make install` does not cover `sudo rm -rf ~`: the
    command behind the wrapper must match the glob too."""
    assert not session_glob_allows(glob, command)


def test_a_glob_covers_a_wrapped_command_only_when_both_match__R16():
    assert session_glob_allows("*pytest*", "timeout 60 pytest -q")
    assert not session_glob_allows("timeout *", "timeout 60 pytest -q")


# ----- shell_parse (P04, P05, P09, P16, P21) -----------------------------------------------

def test_tab_separates_words__P04():
    assert parse_shell("rm\t-rf\t/").commands[0].argv == ["rm", "-rf", "/"]
    assert forbidden("rm\t-rf\t/")
    assert forbidden("ls;\trm\t-r\t-f ~")


def test_a_hash_inside_a_word_is_not_a_comment__P05():
    parsed = parse_shell("echo a#b; rm -rf x")
    assert [c.argv for c in parsed.commands] == [["echo", "a#b"], ["rm", "-rf", "x"]]
    assert forbidden("curl http://h/#frag; rm -rf ~")
    assert [c.argv for c in parse_shell("echo a # rm -rf x").commands] == [["echo", "a"]]


def test_alias_definitions_are_unsure__P09():
    parsed = parse_shell("alias ls='rm -rf ~'")
    assert parsed.unsure and "alias" in parsed.unsure
    reason = forbidden_unsure(RM_RULE, "bash", {"command": "alias ls='rm -rf ~'; ls"})
    assert reason is not None and "alias" in reason
    assert not session_glob_allows("alias *", "alias ls='rm -rf ~'")


def test_backslash_newline_joins_words__P16():
    assert parse_shell("rm -rf \\\n/").commands[0].argv == ["rm", "-rf", "/"]
    assert parse_shell("r\\\nm -rf /").commands[0].argv == ["rm", "-rf", "/"]
    assert forbidden("r\\\nm -rf /", [{"tool": "bash", "pattern": "rm -rf /"}])


def test_arithmetic_expansion_is_scanned_for_command_substitutions__P21():
    parsed = parse_shell("echo $(( $(rm -rf ~) + 1 ))")
    assert ["rm", "-rf", "~"] in [c.argv for c in parsed.commands]
    assert forbidden("echo $(( $(rm -rf ~) + 1 ))")
    assert forbidden("x=$(( `rm -rf /` ))")
