"""Forbidden rules and session allowances for shell commands, matched on the parsed
command (GUARD-1, GUARD-2; docs/approval.md "Forbidden rules").

- :func:`effective_commands` finds every simple command that would run: nested ones,
  the command behind wrappers (``sudo``, ``env``, ``command``, ``xargs``, ``timeout``,
  ``nice``, ``time``, ``find -exec`` …), and the text run by ``bash -c``/``sh -c``/
  ``eval``/``su -c``/``env -S``/``watch``, parsed again. The command name is its base
  name (``/bin/rm`` is ``rm``). A wrapper's options are read as getopt reads them
  (:func:`_option_at`): combined short options (``-dn 1``, ``-qc CMD``), values
  attached (``-n1``, ``--interval=1``), long options abbreviated (``--inter 1``).
- :func:`rule_matches_command` matches a rule's glob against the whole line (as before)
  and against each effective command, by structure: the name, then each flag the
  pattern names (``-rf`` needs ``-r`` and ``-f`` in any spelling: ``-fr``, ``-r -f``,
  ``-R``, ``--recursive``), then the pattern's remaining words against the command's.
- :func:`allowance_covers` is stricter: every simple command, nested ones included,
  must match the person's glob as written; an unparsable command is never covered.
"""

from __future__ import annotations

import fnmatch
import os
import shlex
from dataclasses import dataclass

from crystal_kernel.host.shell_parse import SimpleCommand, Word, parse_shell

# Tools whose ``command`` argument is run by a shell: a forbidden rule naming one of
# them covers all of them.
SHELL_TOOLS: frozenset[str] = frozenset({"bash", "bash_start"})

_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh", "fish", "rbash"})
# Reserved words that may start a simple command as we split it; they run nothing.
# (``time`` is a wrapper below: bash's keyword takes ``-p``, /usr/bin/time more.)
_KEYWORDS = frozenset({"{", "}", "!", "if", "then", "else", "elif", "fi", "do", "done", "while", "until",
                       "[[", "]]"})
# Wrappers that run the rest of their words as a command, and their options that take
# a value (so the value is not mistaken for the command). An option listed here that
# does not take one hides the command (``watch -d rm …``); one missing makes its value
# the command (``sudo -u root rm …``).
_WRAPPERS: dict[str, frozenset[str]] = {
    "sudo": frozenset({"-u", "-g", "-h", "-p", "-r", "-t", "-C", "-D", "-U", "-T", "-R", "--user", "--group",
                       "--host", "--prompt", "--role", "--type", "--close-from", "--chdir", "--other-user",
                       "--command-timeout", "--chroot"}),
    "doas": frozenset({"-u", "-C"}),
    "command": frozenset(), "builtin": frozenset(), "exec": frozenset({"-a"}), "nohup": frozenset(),
    "nice": frozenset({"-n", "--adjustment"}), "time": frozenset({"-f", "-o", "--format", "--output"}),
    "stdbuf": frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}), "setsid": frozenset(),
    "ionice": frozenset({"-c", "-n", "--class", "--classdata"}), "unbuffer": frozenset(),
    "xargs": frozenset({"-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s", "--arg-file", "--delimiter",
                        "--max-args", "--max-procs", "--max-chars", "--max-lines", "--process-slot-var"}),
    "strace": frozenset({"-e", "-o", "-p", "-s", "-u", "-E", "-P", "-b", "-I", "-O", "-S", "-X"}),
    "ltrace": frozenset({"-e", "-o", "-p", "-s", "-u", "-n"}),
    "busybox": frozenset(), "catchsegv": frozenset(), "chronic": frozenset(), "proxychains": frozenset({"-f"}),
    "torsocks": frozenset(), "firejail": frozenset(), "ssh-agent": frozenset(),
}
# Wrappers with one positional value before the command.
_ONE_POSITIONAL = {"timeout": frozenset({"-s", "-k", "--signal", "--kill-after"}),
                   "chroot": frozenset({"--userspec", "--groups"}),
                   "flock": frozenset({"-w", "-E", "--timeout", "--conflict-exit-code"})}
# Commands whose option's value is a shell command line.
_STRING_OPTIONS: dict[str, frozenset[str]] = {
    "su": frozenset({"-c", "--command", "--session-command"}),
    "runuser": frozenset({"-c", "--command", "--session-command"}),
    "script": frozenset({"-c", "--command"}), "flock": frozenset({"-c", "--command"}),
}
# watch's options that take a value; -d takes one only attached (--differences=permanent).
_WATCH_VALUES = frozenset({"-n", "--interval", "-q", "--equexit"})
# env's options that take a value (-S/--split-string's value is a command line).
_ENV_VALUES = frozenset({"-u", "--unset", "-C", "--chdir", "-a", "--argv0", "-S", "--split-string"})
# Spellings of the same flag, per command: long forms and upper case map to a letter.
_FLAG_ALIASES: dict[str, dict[str, str]] = {
    "rm": {"R": "r", "--recursive": "r", "--force": "f", "--dir": "d", "--interactive": "i",
           "--verbose": "v"},
    "cp": {"R": "r", "--recursive": "r", "--force": "f"},
    "mv": {"--force": "f"},
    "chmod": {"--recursive": "R"}, "chown": {"--recursive": "R"}, "chgrp": {"--recursive": "R"},
    "git": {"--force": "f"}, "shred": {"--remove": "u", "--zero": "z", "--force": "f"},
}
_MAX_EXPANSIONS = 200


@dataclass
class Effective:
    """One command that would run: its argv (name as base name) and how it was written."""

    argv: list[str]
    source: str
    dynamic_name: bool = False
    # Found behind a wrapper (sudo, env, xargs, bash -c …) rather than written as is.
    wrapped: bool = False


@dataclass
class ShellView:
    """What the rules see of one command line."""

    effective: list[Effective]
    literal: list[SimpleCommand]
    unsure: str | None


def shell_view(command: str) -> ShellView:
    """Parse ``command`` and unwrap every simple command in it (see module docstring)."""
    parsed = parse_shell(command)
    view = ShellView([], list(parsed.commands), parsed.unsure)
    budget = [_MAX_EXPANSIONS]
    for simple in parsed.commands:
        _unwrap(simple, view, budget, 0)
    return view


def _unwrap(simple: SimpleCommand, view: ShellView, budget: list[int], depth: int) -> None:
    words = list(simple.words)
    # Leading assignments (X=1 cmd) and reserved words run nothing themselves.
    while words and (_is_assignment(words[0].text) and not words[0].dynamic or words[0].text in _KEYWORDS):
        words = words[1:]
    if not words:
        return
    if words[0].text in ("for", "in"):
        return  # "for x in a b": the words are data; nested substitutions were parsed.
    if any(w.brace for w in words[:1]) or any(w.brace and w.text.startswith("-") for w in words):
        _set_unsure(view, "a brace expansion in a command name or option is not checked")
    argv = [w.text for w in words]
    name = os.path.basename(argv[0]) if "/" in argv[0] else argv[0]
    argv[0] = name
    view.effective.append(Effective(argv, simple.source, words[0].dynamic, depth > 0))
    if words[0].dynamic:
        _set_unsure(view, "the command name comes from an expansion")
        return
    budget[0] -= 1
    if budget[0] <= 0 or depth > 12:
        _set_unsure(view, "the command wraps other commands too deeply")
        return
    for inner in _inner_commands(name, words):
        if isinstance(inner, _Line):
            if inner.dynamic:
                _set_unsure(view, f"'{name}' runs a command line that comes from an expansion")
                continue
            nested = parse_shell(inner.text)
            if nested.unsure:
                _set_unsure(view, nested.unsure)
            view.literal.extend(nested.commands)
            for sub in nested.commands:
                _unwrap(sub, view, budget, depth + 1)
        elif inner:
            _unwrap(SimpleCommand(inner, simple.source), view, budget, depth + 1)


@dataclass(frozen=True)
class _Line:
    """A command line a wrapper runs as text (``bash -c TEXT``, ``eval``); ``dynamic``
    when it comes from an expansion, so it cannot be read."""

    text: str
    dynamic: bool


def _inner_commands(name: str, words: list[Word]) -> list[list[Word] | _Line]:
    """The commands a wrapper runs: the words of one (``sudo rm …``) or a line to parse."""
    rest = words[1:]
    if name in _SHELLS or (name == "busybox" and rest and rest[0].text in _SHELLS):
        if name == "busybox":
            rest = rest[1:]
        return _shell_c(rest)
    if name == "eval":
        return [_Line(" ".join(w.text for w in rest), any(w.dynamic for w in rest))] if rest else []
    if name == "env":
        return _env(rest)
    if name == "watch":
        i = _skip_options(rest, _WATCH_VALUES)
        tail = rest[i:]
        return [_Line(" ".join(w.text for w in tail), any(w.dynamic for w in tail))] if tail else []
    if name == "find":
        found: list[list[Word] | _Line] = []
        i = 0
        while i < len(rest):
            if rest[i].text in ("-exec", "-execdir", "-ok", "-okdir"):
                j = i + 1
                while j < len(rest) and rest[j].text not in (";", "+"):
                    j += 1
                found.append(rest[i + 1:j])
                i = j
            i += 1
        return found
    out: list[list[Word] | _Line] = []
    if name in _STRING_OPTIONS:
        # Every word is looked at: options may follow operands (su root -c CMD), and su
        # hands what follows "--" to the shell (runuser -u bob -- -c CMD).
        for k, w in enumerate(rest):
            if w.text.startswith("-") and w.text not in ("-", "--"):
                option, value, _ = _option_at(rest, k, _STRING_OPTIONS[name])
                if option is not None and value is not None:
                    out.append(_Line(value.text, value.dynamic))
    if name in _WRAPPERS:
        i = _skip_options(rest, _WRAPPERS[name])
        out.append(rest[i:])
    elif name in _ONE_POSITIONAL:
        i = _skip_options(rest, _ONE_POSITIONAL[name]) + 1
        out.append(rest[i:])
    return out


def _shell_c(rest: list[Word]) -> list[list[Word] | _Line]:
    has_c = False
    i = 0
    while i < len(rest):
        t = rest[i].text
        if t == "--":
            i += 1
            break
        if t in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            i += 2
            continue
        if t.startswith("--"):
            i += 1
            continue
        if len(t) > 1 and t[0] in "-+":
            has_c = has_c or "c" in t[1:]
            # Each -o/-O in a cluster takes the next word (bash -ceo pipefail 'CMD').
            i += 1 + sum(ch in "oO" for ch in t[1:])
            continue
        break
    if has_c and i < len(rest):
        return [_Line(rest[i].text, rest[i].dynamic)]
    return []


def _env(rest: list[Word]) -> list[list[Word] | _Line]:
    i = 0
    while i < len(rest):
        t = rest[i].text
        if t == "--":
            i += 1
            break
        if t == "-" or _is_assignment(t):  # "env -" is "env -i"
            i += 1
            continue
        if not t.startswith("-"):
            break
        option, value, after = _option_at(rest, i, _ENV_VALUES)
        if option in ("-S", "--split-string"):
            # env -S STRING: the string is split into words like a command line.
            if value is None:
                return []
            tail = " ".join(shlex.quote(w.text) for w in rest[after:])
            return [_Line(value.text + " " + tail, value.dynamic)]
        i = after
    return [rest[i:]]


def _option_at(words: list[Word], i: int, with_value: frozenset[str]) -> tuple[str | None, Word | None, int]:
    """Read the option word ``words[i]`` as getopt does: (the option in it that takes a
    value, or None; that value; the index after the option and its value).

    Short options combine (``-dn 1``, ``-qc CMD``): the first letter that takes a value
    takes the rest of the word (``-n1``, ``-c'CMD'``) or else the next word. A long
    option takes its value after ``=`` or as the next word, and may be abbreviated
    (``--inter 1``; an abbreviation that is ambiguous makes the program refuse to run)."""
    word = words[i]
    text = word.text
    option: str | None = None
    if text.startswith("--"):
        key, eq, attached = text.partition("=")
        if key in with_value:
            option = key
        elif len(key) > 2:
            option = next((v for v in sorted(with_value) if v.startswith(key)), None)
        if option is None:
            return None, None, i + 1
        if eq:
            return option, Word(attached, word.dynamic), i + 1
    else:
        for k, letter in enumerate(text[1:], start=1):
            if "-" + letter in with_value:
                option = "-" + letter
                if k + 1 < len(text):
                    return option, Word(text[k + 1:], word.dynamic), i + 1
                break
        if option is None:
            return None, None, i + 1
    if i + 1 < len(words):
        return option, words[i + 1], i + 2
    return option, None, i + 1


def _skip_options(words: list[Word], with_value: frozenset[str]) -> int:
    """The index of the first word after a wrapper's options (see :func:`_option_at`)."""
    i = 0
    while i < len(words):
        t = words[i].text
        if t == "--":
            return i + 1
        if not t.startswith("-") or t == "-":
            return i
        i = _option_at(words, i, with_value)[2]
    return i


def _is_assignment(text: str) -> bool:
    name, eq, _ = text.partition("=")
    return bool(eq) and name.replace("_", "a").isalnum() and not name[0].isdigit()


def _set_unsure(view: ShellView, why: str) -> None:
    if view.unsure is None:
        view.unsure = why


# ----- matching -----------------------------------------------------------------------

def _flags(name: str, args: list[str]) -> tuple[set[str], list[str], list[str]]:
    """(short flag letters, long flags, operands) of a command's arguments."""
    aliases = _FLAG_ALIASES.get(name, {})
    short: set[str] = set()
    long: list[str] = []
    operands: list[str] = []
    ended = False
    for a in args:
        if ended or a == "-" or not a.startswith("-"):
            operands.append(a)
        elif a == "--":
            ended = True
        elif a.startswith("--"):
            key = a.split("=", 1)[0]
            if key in aliases:
                short.add(aliases[key])
            long.append(a)
        else:
            for ch in a[1:]:
                if not ch.isalnum():
                    break
                short.add(aliases.get(ch, ch))
    return short, long, operands


def _structural_match(pattern_argv: list[str], argv: list[str]) -> bool:
    if not argv or not pattern_argv:
        return False
    pname = pattern_argv[0]
    if not (fnmatch.fnmatchcase(argv[0], pname) or fnmatch.fnmatchcase(argv[0], os.path.basename(pname))):
        return False
    name = argv[0]
    aliases = _FLAG_ALIASES.get(name, {})
    have_short, have_long, operands = _flags(name, argv[1:])
    want_operands: list[str] = []
    for p in pattern_argv[1:]:
        if p.startswith("--") and len(p) > 2:
            key = p.split("=", 1)[0]
            if key in aliases:
                if aliases[key] not in have_short:
                    return False
            elif not any(fnmatch.fnmatchcase(h, p) for h in have_long):
                return False
        elif p.startswith("-") and len(p) > 1 and p[1] not in "*?[":
            letters = p[1:].rstrip("*")
            if not letters.isalnum():
                want_operands.append(p)
                continue
            if not all(aliases.get(ch, ch) in have_short for ch in letters):
                return False
        else:
            want_operands.append(p)
    if not want_operands:
        return True
    return fnmatch.fnmatchcase(" ".join(operands), " ".join(want_operands))


def _pattern_argv(pattern: str) -> list[str] | None:
    parsed = parse_shell(pattern)
    if parsed.unsure or len(parsed.commands) != 1:
        return None
    argv = parsed.commands[0].argv
    if argv and "/" in argv[0] and not any(ch in argv[0] for ch in "*?["):
        argv[0] = os.path.basename(argv[0])
    return argv


def rule_matches_command(pattern: str, command: str, view: ShellView | None = None) -> bool:
    """Whether a forbidden rule's glob matches a shell command line (module docstring)."""
    if fnmatch.fnmatchcase(command, pattern) or fnmatch.fnmatchcase(command.strip(), pattern):
        return True
    view = view if view is not None else shell_view(command)
    pattern_argv = _pattern_argv(pattern)
    for simple in view.literal:
        if fnmatch.fnmatchcase(simple.source, pattern):
            return True
    for eff in view.effective:
        if fnmatch.fnmatchcase(" ".join(eff.argv), pattern) or fnmatch.fnmatchcase(eff.source, pattern):
            return True
        if pattern_argv is not None and _structural_match(pattern_argv, eff.argv):
            return True
    return False


def allowance_covers(glob: str, command: str) -> bool:
    """Whether a person's "allow for the session" glob covers a whole command line: every
    simple command in it, nested and wrapped ones included, must match the glob as
    written. A command that cannot be parsed confidently is not covered."""
    view = shell_view(command)
    if view.unsure or not view.literal:
        return False
    return all(fnmatch.fnmatchcase(s.source, glob) for s in view.literal) and \
        all(fnmatch.fnmatchcase(" ".join(e.argv), glob) for e in view.effective if e.wrapped)
