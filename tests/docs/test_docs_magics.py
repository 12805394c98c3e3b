"""The notebook examples of the docs: every ``%crystal`` / ``%%crystal`` line shown (in
``ipython`` blocks and in the prose) is read by the magics' own argument parser
(crystal_kernel/jupyter/magics_args.py), and magics.md's examples run, in page order, in a
real IPython shell against the loopback model server.

Lines with placeholders (``PROMPT``, ``JOB``, ``[options]``, ``…``) are parsed but not
run. The IPython shell is a terminal-style InteractiveShell in a child process, not a
kernel: widgets are out of reach there (magics.md says so), which these examples do not
need; tests/magics/ drives the same magics in real kernels.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import docpages  # noqa: E402
from docpages import PAGES, ROOT, blocks  # noqa: E402

from crystal_kernel.testing.llm_server import LLMServer  # noqa: E402

MAGIC = re.compile(r"^(?:\w+ = )?%%?(?:crystal|load_ext|unload_ext)\b")
ANSWER = "NaN rows come from the join on sku: 3 skus have no price."

# The notebook variables the examples name, as a reader's notebook would hold them.
NOTEBOOK_VARIABLES = """
df = {"sku": ["a1", "b2", "c3"], "price": [1.5, float("nan"), 2.0]}
limit = 0.5
report = "Sales rose 4% in May; returns fell."
"""

RUNNER = r"""
import json, sys
from IPython.core.interactiveshell import InteractiveShell

shell = InteractiveShell.instance()
results = []
for cell in json.load(open(sys.argv[1])):
    r = shell.run_cell(cell)
    error = r.error_in_exec or r.error_before_exec
    results.append({"cell": cell, "ok": r.success, "error": f"{type(error).__name__}: {error}" if error else None})
summary = shell.user_ns.get("summary")
json.dump({"results": results, "summary": summary}, open(sys.argv[2], "w"))
"""


def magic_lines() -> list[tuple[str, str]]:
    """(page, line) for every magic shown: ipython blocks' first lines and code spans."""
    found = []
    for page in PAGES:
        for block in blocks(page):
            if block.lang == "ipython":
                found += [(page.name, line) for line in block.text.splitlines() if MAGIC.match(line)]
        for m in docpages.SPAN.finditer(docpages.prose(page)):
            span = " ".join(m.group(1).split())
            if MAGIC.match(span):
                found.append((page.name, span))
    return found


def has_placeholder(line: str) -> bool:
    return bool(re.search(r"\b[A-Z]{2,}\b|\[|…|/command|%crystal\?$", line)) or line.strip() in ("%crystal", "%%crystal")


def check_magic(line: str) -> None:
    """Raise UserError (or fail) when the magics would refuse the line."""
    from crystal_kernel.host.commands import command_names
    from crystal_kernel.jupyter.magics_args import cell_options, interpolate, split_options

    text = re.sub(r"^\w+ = ", "", line)
    if text.startswith(("%load_ext", "%unload_ext")):
        return  # which extension: run below for crystal_kernel; others are other projects'
    if text.startswith("%%crystal"):
        if "[options]" not in text:
            cell_options(text[len("%%crystal"):])
        return
    rest = re.sub(r"\[options\]|PROMPT|…", "", text[len("%crystal"):])
    if rest.strip() == "?":
        return  # the magic's own help
    _, prompt = split_options(rest)
    if prompt.startswith("/"):
        name = prompt[1:].split()[0] if prompt[1:].split() else ""
        # "/command" and "/…" stand for any command
        assert name in ("", "command") or name in command_names(), f"{line}: no slash command /{name}"
    names = re.findall(r"\{(\w+)\}", prompt)
    bound, _ = interpolate(prompt, {n: f"<{n}>" for n in names})
    assert not re.search(r"\{\w+\}", bound), line


def test_every_magic_line_the_docs_show_parses():
    lines = magic_lines()
    for page, line in lines:
        try:
            check_magic(line)
        except Exception as exc:  # a UserError names what the magic would say
            raise AssertionError(f"{page}: {line!r}: {exc}") from exc
    assert sum(page == "magics.md" for page, _ in lines) >= 15


def test_magic_checker_refuses_what_the_magic_refuses():
    from crystal_kernel.core.errors import UserError

    for bad in ("%crystal --mood plan hi", "%%crystal do it now", "%crystal --mode later hi"):
        try:
            check_magic(bad)
        except UserError:
            continue
        raise AssertionError(f"{bad!r} was accepted")


def magics_page_cells() -> list[str]:
    """magics.md's runnable examples in page order: blocks whole, code spans as lines."""
    page = ROOT / "docs" / "magics.md"
    cells: list[tuple[int, str]] = []
    for block in blocks(page):
        if block.lang == "ipython":
            cells.append((block.line, block.text))
    body = docpages.prose(page)
    for m in docpages.SPAN.finditer(body):
        span = " ".join(m.group(1).split())
        if MAGIC.match(span) and not has_placeholder(span):
            cells.append((body[:m.start()].count("\n") + 1, span))
    return [cell for _, cell in sorted(cells, key=lambda c: c[0])]


# Slash commands the prose names bare that need an argument to run (their forms with
# placeholders, e.g. `/logs JOB`, are shown beside them), and a completion example.
SLASH_NOT_RUN = {"/logs": "needs a job id", "/stop": "needs a job id", "/cd": "needs a folder",
                 "/access add": "needs a folder", "/logs --follow": "needs a job id",
                 "/logs j1 --follow": "deploy.md names what the gateway browser test runs after starting job j1",
                 "/mode p": "kernel.md's tab-completion example, a command being typed",
                 "/cd {folder}": "kernel.md's papermill parameter example; tests/jupyter/test_papermill.py runs one",
                 "/model antropic:claude-sonnet-4-6": "commands.md's mistyped provider, refused by design; "
                                                      "tests/cli/test_interactive_forms.py runs it",
                 "/resume B-id": "deploy.md's attack of one person on another's session; tests/hub runs it"}


# Slash commands of one front, not of the host: the magics refuse them by design.
FRONT_ONLY = {"parameter": "a Crystal-kernel cell command (papermill's parameters); tests/jupyter/test_papermill.py runs it",
              "expand": "the terminal's (crystal); tests/cli/test_interactive.py runs it"}


def slash_commands() -> list[tuple[str, str]]:
    """(page, text) of every slash command in a code span of the prose."""
    found = []
    for page in PAGES:
        for m in docpages.SPAN.finditer(docpages.prose(page)):
            span = " ".join(m.group(1).split())
            if re.match(r"^/[a-z]+(?: |$)", span) and not re.match(r"^/(?:dev|usr|proc|tmp|opt|bin|sbin|lib|lib32|lib64|libx32|etc|var|sys|run|mnt|media|srv|root|home|work)\b", span):
                found.append((page.name, span))
    return found


def test_every_slash_command_shown_is_a_command():
    from crystal_kernel.host.commands import command_names

    shown = slash_commands()
    for page, text in shown:
        assert text.split()[0][1:] in [*command_names(), *FRONT_ONLY], f"{page}: {text}"
    assert {t for _, t in shown} >= set(SLASH_NOT_RUN)


def runnable_slash_commands() -> list[str]:
    out: list[str] = []
    for _, text in slash_commands():
        if (text not in SLASH_NOT_RUN and text.split()[0][1:] not in FRONT_ONLY and not has_placeholder(text)
                and text not in out):
            out.append(text)
    return out


def test_the_magics_page_examples_run_in_ipython(tmp_path: Path):
    workspace = tmp_path / "project"
    shutil.copytree(ROOT / "examples" / "sample-project", workspace)
    (tmp_path / "home").mkdir()
    cells = magics_page_cells()
    first_magic = next(i for i, c in enumerate(cells) if "%crystal" in c)
    cells.insert(first_magic, NOTEBOOK_VARIABLES)
    # Then every slash command the docs show that runs as written, through %crystal.
    slash = runnable_slash_commands()
    cells += [f"%crystal {text}" for text in slash]
    (tmp_path / "cells.json").write_text(json.dumps(cells), encoding="utf-8")
    (tmp_path / "runner.py").write_text(RUNNER, encoding="utf-8")
    with LLMServer(router=lambda body, path: {"text": ANSWER}) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CRYSTAL_", "OPENAI", "JPY_", "JUPYTER"))}
        env.update(HOME=str(tmp_path / "home"), CRYSTAL_PROVIDER="openai", CRYSTAL_BASE_URL=server.base_url,
                   OPENAI_API_KEY="sk-test", ANTHROPIC_API_KEY="sk-ant-test", CRYSTAL_TOPIC_NAMING="off")
        out = subprocess.run([sys.executable, str(tmp_path / "runner.py"), str(tmp_path / "cells.json"),
                              str(tmp_path / "results.json")], cwd=workspace, env=env, capture_output=True,
                             text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        prompts = [m["content"] for body in server.bodies() for m in body["messages"]
                   if m["role"] == "user" and isinstance(m["content"], str)]
    done = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    failed = [r for r in done["results"] if not r["ok"]]
    assert failed == [], failed
    ran = [r["cell"] for r in done["results"]]
    assert "%crystal Which file?" in ran and "%unload_ext crystal_kernel" in ran
    assert len(slash) >= 20 and "%crystal /model anthropic:claude-sonnet-4-6" in ran
    # What the page promises: a prompt ending in ? is a prompt, {name} is the variable's
    # text, and the synchronous form returns the final answer.
    assert any(p.endswith("Which file?") for p in prompts), prompts
    # (a value on one short line goes inline in backticks; magics.md shows a DataFrame's block)
    assert any("Why are there NaNs in `{'sku': ['a1', 'b2', 'c3'], 'price': [1.5, nan, 2.0]}`? "
               "The threshold is `0.5`." in p for p in prompts), prompts
    assert any("Summarise `Sales rose 4% in May; returns fell.` in one sentence." in p for p in prompts), prompts
    assert done["summary"] == ANSWER
