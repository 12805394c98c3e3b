"""Commands the docs show but that a sandbox cannot run as written are still checked:

- a ``text`` block that starts with ``crystal`` is a synopsis: its subcommands exist, its
  flags are the parser's flags (all of them, so a new flag cannot go unmentioned) and
  the values it lists for a flag with fixed choices are those choices;
- a command in a code span of the prose (``crystal …``, ``make …``, ``python -m …``,
  ``jupyter …``) names real subcommands, flags, make targets and modules; the few
  others are listed in INLINE_UNCHECKED with the reason;
- no ``text`` block holds a command (commands go in ``sh`` or ``console`` blocks, which
  test_docs_commands.py runs), and every ``python`` block is a labelled file that a
  page's commands use.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import re
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import docpages  # noqa: E402
from docpages import PAGES, ROOT, blocks  # noqa: E402

# Code spans that look like commands but are not checked here, and why.
INLINE_UNCHECKED: dict[str, str] = {
    'python -c "import asyncio"': "a measured process in a benchmark's explanation, not a step to run",
    "python -c pass": "a measured process (Python's bare start) in a benchmark's explanation",
    "python -S": "an interpreter option a benchmark section weighs, not a step to run",
    "python -v": "an interpreter option a benchmark section names (what it shows), not a step to run",
    "pip install": "the words of a case (a kernelspec missing after a bare install), not a command to run",
    "cd x && rm -rf .": "an example of a bash call a forbidden rule matches, not a command to run",
    "sudo -Eu root": "how a wrapper's combined short options are read, not a command to run",
    "sudo -- rm -rf x": "a bash call a forbidden rule matches (M4-57), not a command to run",
    "echo INJECTED > .crystal/prompts/work.md": "an attack the sandbox refuses (SANDBOX-1), not a command to run",
    "python -u": "advice for a job's command (unbuffered Python output)",
    "python -I -S": "how the host starts the job supervisor, not a command for a person",
    "python {code}": "the python tool's arguments, not a command",
    "pip install crystal-kernel": "the package is not on PyPI from this checkout; `pip install -e .` is the same "
                                  "install (plugins.md runs one)",
    "pip install notebook": "installs Jupyter Notebook 7 from PyPI; the test extra has it and tests/e2e/test_notebook7.py uses it",
    "pip check": "named as what a test does (acp.md); tests/testing/test_environment.py runs it on the venv",
    "pip install -e .": "run by plugins.md's sh block (see NOT_RUN in test_docs_commands.py)",
    "sudo apt-get install -y chromium": "changes the machine's packages; jupyterlab.md's sh block simulates it",
    "apt-get install -y nodejs npm": "changes the machine's packages and needs the network",
    "jlpm install": "part of the extension build (jupyterlab.md), which rebuilds the checkout",
    "jlpm build:prod": "part of the extension build (jupyterlab.md), which rebuilds the checkout",
    "jlpm build": "part of the extension build (jupyterlab.md), which rebuilds the checkout",
    "jupyter-builder build .": "part of the extension build (jupyterlab.md), which rebuilds the checkout",
    "CRYSTAL_UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest tests/tools/test_schemas.py":
        "rewrites another suite's snapshot file; the module path is checked to exist",
    'python -X importtime -c "import openai"': "a measurement shown in benchmarks.md, not a Crystal command",
    "python -I -S -c pass": "a measurement shown in benchmarks.md (the bare interpreter start a job's supervisor "
                            "costs), not a Crystal command",
    "echo hi": "what an agent runs in a benchmark task, not a command for a person",
    "python3 ~/.crystal/tools/imagetools/imagetools.py plot --width 100":
        "the argv Crystal starts; the console block right after it runs the same command",
    "export OPENAI_API_KEY=…": "the fix a message asks for; models.md's sh blocks run it with a value",
    # approval.md / security.md: shell commands a forbidden rule or allowance is judged on.
    'python -c "import os; os.system(\'rm -rf /\')"': "an example of what forbidden rules only match textually",
    "echo 'rm -rf /' | sh": "an example of what forbidden rules only match textually",
    "sudo pytest": "an example of a command a `pytest *` session allowance does not cover",
    "python -c": "names code a forbidden rule only matches textually, not a command to run",
}


def build_cli() -> argparse.ArgumentParser:
    from crystal_kernel.cli import build_parser

    return build_parser()


def choices_of(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser] | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return None


def options_of(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {opt: a for a in parser._actions for opt in a.option_strings if opt not in ("-h", "--help")}


def helps_of(parsers: list[argparse.ArgumentParser]) -> set[str]:
    """The flags of argparse's own help action (``-h``, ``--help``) of these parsers."""
    return {opt for p in parsers for a in p._actions if isinstance(a, argparse._HelpAction) for opt in a.option_strings}


def tokens_of(text: str) -> list[str]:
    cleaned = re.sub(r"[\[\]]|\.\.\.|…", " ", text)
    return re.findall(r"\||\"[^\"]*\"|'[^']*'|[^\s|]+", cleaned)


def is_word(token: str) -> bool:
    """A literal word (a subcommand or a choice), not a placeholder like NAME or DIR."""
    return re.fullmatch(r"[a-z][a-z0-9_.:-]*", token) is not None


def check_crystal(text: str, complete: bool) -> list[str]:
    """What is wrong with a ``crystal …`` command line or synopsis ([] when nothing)."""
    tokens = tokens_of(text)
    assert tokens and tokens[0].endswith("crystal"), text
    from crystal_kernel.cli import build_interactive_parser, starts_interactive

    # `crystal` alone or with only flags is the interactive front, with its own flags.
    top = build_interactive_parser() if starts_interactive(tokens[1:]) else build_cli()
    level, i, problems = [top], 1, []
    while i < len(tokens) and all(choices_of(p) for p in level):
        words = []
        while i < len(tokens) and is_word(tokens[i]):
            words.append(tokens[i])
            i += 1
            while i < len(tokens) and not tokens[i].startswith("-") and tokens[i] != "|" and not is_word(tokens[i]):
                i += 1  # a placeholder after an alternative: show NAME | enable NAME
            if i < len(tokens) and tokens[i] == "|":
                i += 1
            else:
                break
        if not words:
            break
        choices = {k: v for p in level for k, v in choices_of(p).items()}
        unknown = [w for w in words if w not in choices]
        if unknown:
            return [f"{text!r}: no subcommand {unknown} (there are {sorted(choices)})"]
        level = [choices[w] for w in words]
    options = {k: v for p in level for k, v in options_of(p).items()}
    shown = set()
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if token == "--":
            break  # what follows a bare -- is passed on (crystal space -- JUPYTER_OPTION...)
        if not token.startswith("--"):
            continue
        flag = token.split("=")[0]
        if flag in helps_of(level):
            continue  # argparse's own --help, on every parser: a complete synopsis leaves it out
        if flag not in options:
            problems.append(f"{text!r}: {flag} is not a flag of it")
            continue
        shown.add(flag)
        action = options[flag]
        if action.nargs == 0 or "=" in token:
            continue
        values = []
        if i < len(tokens) and not tokens[i].startswith("--"):
            values.append(tokens[i])
            i += 1
            while i + 1 < len(tokens) and tokens[i] == "|":  # text|json: alternatives
                values.append(tokens[i + 1])
                i += 2
        if action.choices:
            bad = [v for v in values if is_word(v) and v not in action.choices]
            if bad:
                problems.append(f"{text!r}: {flag} takes {sorted(action.choices)}, not {bad}")
    if complete:
        missing = sorted(set(options) - shown - {"-h"})
        missing = [m for m in missing if m.startswith("--")]
        if missing:
            problems.append(f"{text!r}: the synopsis leaves out {missing}")
    return problems


def synopses(block: docpages.Block) -> list[str]:
    """The synopses of a text block: each starts with ``crystal``; indented lines continue it."""
    found: list[str] = []
    for line in block.text.splitlines():
        if line.startswith("crystal "):
            found.append(line)
        elif line.startswith((" ", "\t")) and found:
            found[-1] += " " + line.strip()
    return found


def test_synopsis_checker_catches_what_it_should():
    # The checker itself: a made-up flag, a made-up subcommand, a wrong choice, a missing flag.
    assert check_crystal("crystal run --workspace DIR --format text|jsonl", complete=False) == []
    assert check_crystal("crystal run --frobnicate", complete=False)
    assert check_crystal("crystal tools lisst", complete=False)
    assert check_crystal("crystal run --format text|yaml", complete=False)
    assert check_crystal("crystal plugins list", complete=True)  # --format is left out
    assert check_crystal("crystal --help", complete=False) == []
    assert check_crystal("crystal SUBCOMMAND --help", complete=False) == []
    assert check_crystal("crystal run --help", complete=False) == []
    assert check_crystal("crystal run --helpp", complete=False)
    assert check_crystal("crystal promptsets list | show NAME | enable NAME | disable [NAME] "
                         "[--home DIR] [--format text|json]", complete=True) == []


def test_every_synopsis_matches_the_parser():
    found = 0
    for page in PAGES:
        for block in blocks(page):
            if block.lang == "text":
                for synopsis in synopses(block):
                    found += 1
                    assert check_crystal(synopsis, complete=True) == [], f"{page.name}:{block.line}"
    assert found >= 8


def makefile_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([a-z][\w-]*):", text, flags=re.M))


def check_inline(command: str) -> list[str]:
    words = command.split()
    while words and re.fullmatch(r"[A-Z_]+=\S+", words[0]):
        words = words[1:]
    first = words[0]
    if first.endswith("crystal") and (first == "crystal" or "/" in first):
        return check_crystal(" ".join(words), complete=False)
    if first == "make":
        return [f"{command!r}: no make target {t}" for t in words[1:] if t not in makefile_targets()]
    if first in ("python", "python3") or first.endswith("/python"):
        if "-m" in words:
            module = words[words.index("-m") + 1]
            spec = importlib.util.find_spec(module.split(".")[0])
            if spec is None and not (ROOT / module.split(".")[0]).exists():
                return [f"{command!r}: no module {module}"]
            return []
    if first == "jupyter" and len(words) > 1:
        return [] if shutil.which(f"jupyter-{words[1]}", path=str(Path(sys.executable).parent)) else \
            [f"{command!r}: jupyter has no subcommand {words[1]}"]
    return [f"{command!r}: not checked here; list it in INLINE_UNCHECKED with the reason"]


def test_every_inline_command_is_well_formed():
    problems, seen = [], set()
    for page in PAGES:
        for command in docpages.inline_commands(page):
            seen.add(command)
            if command in INLINE_UNCHECKED:
                continue
            problems += [f"{page.name}: {p}" for p in check_inline(command)]
    assert problems == []
    assert set(INLINE_UNCHECKED) <= seen, set(INLINE_UNCHECKED) - seen  # no stale entries
    assert (ROOT / "tests/tools/test_schemas.py").exists()


def test_no_text_block_holds_a_command():
    for page in PAGES:
        for block in blocks(page):
            if block.lang != "text" or block.label:
                continue
            for line in block.text.splitlines():
                if docpages.COMMAND.match(line.strip()) and not line.startswith(("crystal ", " ")):
                    pytest.fail(f"{page.name}:{block.line}: a command in a text block: {line!r} "
                                "(use an sh or console block)")


def test_every_python_block_is_a_file_the_page_runs():
    found = 0
    for page in PAGES:
        for block in blocks(page):
            if block.lang == "python":
                found += 1
                ast.parse(block.text)
                assert block.label, f"{page.name}:{block.line}: a python block that nothing runs; label it " \
                                    "with its file name and use it in the page's commands"
                assert block.label.endswith(".py")
    assert found >= 2
