"""host/shell_rules.py and host/shell_parse.py, second hand-mutation pass (``M4-..`` rows of docs/mutants.md), and the wrapper options that pass found open on
main (GUARD-1, GUARD-2, SANDBOX-2).

Each test asserts what a person who set the forbidden rule ``rm -rf *`` loses: a command
bash would run ``rm -rf`` with is not denied (``forbidden_match``, what every front's
approval flow calls), or a command the parser cannot read is not sent to the person
(``forbidden_unsure``). One test drives the real ``crystal run`` in ``full``, where
nothing but the rule stands between the model and the files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crystal_kernel.host.approval import forbidden_match, forbidden_unsure
from crystal_kernel.testing.llm_server import LLMServer

RM_RULE = [{"tool": "bash", "pattern": "rm -rf *"}]
CRYSTAL = str(Path(sys.executable).parent / "crystal")


def forbidden(command: str) -> bool:
    return forbidden_match(RM_RULE, "bash", {"command": command}) is not None


def unsure(command: str) -> str | None:
    return forbidden_unsure(RM_RULE, "bash", {"command": command})


# ----- wrapper options read as the program reads them (gaps found on main) ---------------

# Each runs `rm -rf victim` in bash (checked by hand: watch and script under a terminal,
# time, su, sudo and env as documented by their --help and getopt).
WRAPPED_RM = [
    "watch -d rm -rf victim",             # -d takes no separate value
    "watch -dn 1 rm -rf victim",          # combined short options, the last one takes "1"
    "watch -bn1 rm -rf victim",
    "watch --inter 1 rm -rf victim",      # an abbreviated long option (getopt_long)
    "watch -q 3 -n 1 rm -rf victim",
    "time -p rm -rf victim",              # bash's time keyword and its only option
    "time -p -- rm -rf victim",
    "time -v rm -rf victim",              # GNU time's options
    "command time -v rm -rf victim",
    "time -f %e -o log rm -rf victim",
    "script -qc 'rm -rf victim' log",     # -c among combined short options
    "script -q -c 'rm -rf victim' log",
    "script --command='rm -rf victim' log",
    "script --command 'rm -rf victim' log",
    "script -c'rm -rf victim' log",       # the value attached to -c
    "su -lc 'rm -rf victim'",
    "su --command 'rm -rf victim' bob",
    "runuser --session-command='rm -rf victim' bob",
    "flock -xc 'rm -rf victim' lockfile",
    "sudo -Eu root rm -rf victim",        # -u's value is the next word, not the command
    "sudo -iu root rm -rf victim",
    "xargs -0n 1 rm -rf",
    "timeout -vs KILL 5 rm -rf victim",
    "strace -fo trace.log rm -rf victim",
    "env -iu HOME rm -rf victim",
    "env -iS 'rm -rf victim'",
    "bash -ceo pipefail 'rm -rf victim'",  # -o in a cluster takes the next word
    "bash -oc pipefail 'rm -rf victim'",
]


@pytest.mark.parametrize("command", WRAPPED_RM)
def test_wrapper_options_do_not_hide_the_command_they_run(command):
    """On main each of these passed the rule with no ask: an option table listed a flag
    as taking a value (`watch -d`), `time` was dropped as a keyword and its `-p` became
    the command, and combined short options (`-qc`, `-dn 1`, `-Eu root`), abbreviated
    long options and `--command VALUE` were not read."""
    assert forbidden(command), command


@pytest.mark.parametrize("command", ["watch -n 1 ls", "time -p make", "script -qc 'make test' log",
                                     "sudo -u root ls", "su -lc 'ls -l'", "env -i HOME=/x ls"])
def test_wrapped_commands_that_remove_nothing_still_pass(command):
    assert not forbidden(command) and unsure(command) is None


def test_full_mode_denies_a_wrapped_rm_the_rule_forbids(workspace, private_home):
    """The real `crystal run` in full: the model's `time -p rm -rf victim` is denied by
    the rule and the folder is still there (on main the folder was removed)."""
    (private_home / "config.json").write_text(json.dumps({"forbidden": RM_RULE}))
    (workspace / "victim").mkdir()
    (workspace / "victim" / "keep.txt").write_text("precious\n")
    replies = [{"tool_calls": [{"name": "bash", "arguments": {"command": "time -p rm -rf victim"}}]},
               {"text": "Done."}]
    with LLMServer(replies) as server:
        env = {**os.environ, "CRYSTAL_PROVIDER": "openai", "CRYSTAL_MODEL": "gpt-test",
               "CRYSTAL_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-test-0000"}
        out = subprocess.run([CRYSTAL, "run", "clean up", "--workspace", str(workspace), "--approval", "full"],
                             capture_output=True, text=True, env=env, timeout=60)
        bodies = server.bodies("chat")
    assert out.returncode == 0, out.stderr
    assert (workspace / "victim" / "keep.txt").read_text() == "precious\n"
    told = [m["content"] for m in bodies[1]["messages"] if m["role"] == "tool"][-1]
    assert "denied by a forbidden rule" in told, told


# ----- shell_rules: the survivors of the second pass ---------------------------------------

def test_a_negated_command_still_runs__M4_55():
    """`!` only inverts the exit status: the `rm` behind it runs."""
    assert forbidden("! rm -rf victim")
    assert forbidden("true && ! rm -rf victim")


@pytest.mark.parametrize("wrapper", ["sudo --", "nice --", "nohup --", "sudo -u root --", "timeout -- 5"])
def test_double_dash_ends_a_wrappers_options__M4_57(wrapper):
    assert forbidden(f"{wrapper} rm -rf victim")


@pytest.mark.parametrize("options", ["-o pipefail", "+o histexpand", "-O extglob", "--rcfile x", "--init-file x"])
def test_shell_options_with_a_value_before_c__M4_60(options):
    assert forbidden(f"bash {options} -c 'rm -rf victim'")


@pytest.mark.parametrize("command", ["su --command='rm -rf victim'", "runuser --command='rm -rf victim' bob",
                                     "script --command='rm -rf victim'", "flock --command='rm -rf victim' lock"])
def test_a_long_option_with_its_value_after_equals__M4_62(command):
    assert forbidden(command)


@pytest.mark.parametrize("line", ["case x in x) rm -rf victim;; esac", "f() { rm -rf victim; }; f"])
def test_what_a_shell_c_runs_that_cannot_be_read_goes_to_the_person__M4_65(line):
    """The nested line cannot be checked: the call is not passed silently, the flow asks
    the person (GUARD-1), and with nobody there it is denied."""
    command = f"bash -c '{line}'"
    assert not forbidden(command)
    reason = unsure(command)
    assert reason is not None and "could not be parsed confidently" in reason
    assert unsure(f"sh -c '{line}'") is not None


@pytest.mark.parametrize("options", ["-n 1", "-n1", "--interval 2", "-q 3", "-n 1 -d"])
def test_watch_options_do_not_hide_rm__M4_68(options):
    assert forbidden(f"watch {options} rm -rf victim")


# ----- shell_parse ----------------------------------------------------------------------------

def test_a_word_glued_to_a_redirection_is_the_command__M4_46():
    """`rm>/dev/null -rf victim` runs `rm -rf victim` with its output redirected: only
    digits before `>` name a file descriptor."""
    assert forbidden("rm>/dev/null -rf victim")
    assert forbidden("rm 2>/dev/null -rf victim")
    assert forbidden("sudo>log rm -rf victim")


def test_ansi_c_hex_escapes_are_decoded__M4_52():
    assert forbidden("$'\\x72m' -rf victim")
    assert forbidden("$'\\x72\\x6d' -rf victim")
    assert forbidden("$'\\x72\\x6D' -$'\\x72'f victim")
