"""The docs cannot rot: every command shown in a ``sh`` block of README.md and docs/*.md
runs here, every ``json`` block parses (and config examples load), and the reference
pages name every config key, every flag and every slash command.

Each page's ``sh`` blocks run in order in one shell, as one person would type them, in a
sandbox laid out like a checkout (``.venv`` linked, ``examples/`` and ``notebooks/``
copied) with a private HOME. Model requests go to the loopback model server: a
``http://localhost:PORT`` in a command is rewritten to it, and ``crystal run`` without
``--base-url`` gets the server's URL added (nothing else about a command changes).
``make`` runs as ``make --dry-run`` against the real Makefile (the targets must exist and
expand): what ``make demo`` runs is executed for real by tests/demo/test_demo.py, and
``make test`` is this suite.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from crystal_kernel.testing.llm_server import LLMServer

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\S*)")

PRELUDE = """set -e
make() { command make -C "$CRYSTAL_REPO" --dry-run "$@" >/dev/null; }
# A model request goes to the loopback server: `crystal run` without --base-url gets its URL.
crystal() {
  if [ "$1" = run ] && ! printf '%s\\n' "$@" | grep -q -- '--base-url'; then
    if printf '%s\\n' "$@" | grep -qx anthropic; then url="$LOOPBACK"; else url="$LOOPBACK/v1"; fi
    command crystal "$@" --base-url "$url"
  else
    command crystal "$@"
  fi
}
"""


def blocks(path: Path) -> list[tuple[str, int, str]]:
    """(language, first line number, text) of every fenced block in a Markdown page."""
    found, lang, start, body = [], None, 0, []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        m = FENCE.match(line)
        if m and lang is None:
            lang, start, body = m.group(1) or "", n + 1, []
        elif line.startswith("```") and lang is not None:
            found.append((lang, start, "\n".join(body)))
            lang = None
        elif lang is not None:
            body.append(line)
    return found


def pages_with(lang: str) -> list[Path]:
    return [p for p in PAGES if any(b[0] == lang for b in blocks(p))]


def reply(body: dict, path: str) -> dict:
    return {"text": "The project holds inventory.py, test_inventory.py and README.md.",
            "usage": {"input_tokens": 1200, "output_tokens": 20}}


@pytest.fixture(scope="module")
def server():
    with LLMServer(router=reply) as s:
        yield s


def sandbox(tmp: Path) -> Path:
    checkout = tmp / "checkout"
    checkout.mkdir()
    (checkout / ".venv").symlink_to(ROOT / ".venv")
    shutil.copytree(ROOT / "examples", checkout / "examples", ignore=shutil.ignore_patterns(".crystal"))
    shutil.copytree(ROOT / "notebooks", checkout / "notebooks")
    (tmp / "home").mkdir()
    return checkout


def sandbox_env(tmp: Path, server: LLMServer) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CRYSTAL_", "OPENAI", "ANTHROPIC", "JUPYTER", "JPY_", "VIRTUAL_ENV"))}
    env.update(HOME=str(tmp / "home"), CRYSTAL_REPO=str(ROOT), CRYSTAL_TOPIC_NAMING="off",
               OPENAI_BASE_URL=server.base_url, ANTHROPIC_BASE_URL=server.url,
               PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    return env


@pytest.mark.parametrize("page", pages_with("sh"), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shell_command_in_the_page_runs(page: Path, tmp_path: Path, server: LLMServer):
    checkout = sandbox(tmp_path)
    env = dict(sandbox_env(tmp_path, server), LOOPBACK=server.url)
    script = PRELUDE
    for lang, line, text in blocks(page):
        if lang == "sh":
            # Each block says where it starts, so a failure names the page and line.
            script += f"echo '@@ {page.name}:{line}' >&2\n" + re.sub(r"http://localhost:\d+", server.url, text) + "\n"
    out = subprocess.run(["bash", "-c", script], cwd=checkout, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, f"failed ({out.returncode}); stdout:\n{out.stdout[-2000:]}\nstderr:\n{out.stderr[-3000:]}"
    assert "Error" not in out.stderr, out.stderr[-3000:]


def test_every_json_block_parses_and_config_examples_load(tmp_path: Path):
    from crystal_kernel.host.config import known_keys, load_config

    config_keys = set(known_keys()) | {"cassette", "reviewTimeoutSeconds"}
    checked = 0
    # The pages that show whole JSON documents (others show fragments of a manifest).
    for page in [ROOT / "docs" / f"{name}.md" for name in ("models", "configuration", "recording")]:
        for lang, line, text in blocks(page):
            if lang != "json":
                continue
            value = json.loads(text)  # a broken example fails here, naming the line
            if isinstance(value, dict) and value and set(value) <= config_keys:
                home = tmp_path / f"{page.stem}-{line}"
                home.mkdir()
                (home / "config.json").write_text(text, encoding="utf-8")
                load_config(home, environ={})
                checked += 1
    assert checked >= 3


def flags_of(parser) -> set[str]:
    return {opt for action in parser._actions for opt in action.option_strings
            if opt.startswith("--") and opt != "--help"}


def test_configuration_names_every_key_and_flag():
    from crystal_kernel.cli import build_parser
    from crystal_kernel.host.config import known_keys
    from crystal_kernel.jupyter.options import parser as kernel_parser

    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    for key in (*known_keys(), "cassette", "reviewTimeoutSeconds"):
        assert f"`{key}`" in text, key
    cli = build_parser()
    subparsers = next(a for a in cli._actions if a.choices and "run" in a.choices).choices
    install = next(a for a in subparsers["kernel"]._actions if a.choices and "install" in a.choices).choices["install"]
    for flag in flags_of(subparsers["run"]) | flags_of(kernel_parser()) | flags_of(install):
        assert f"`{flag}" in text, flag


def test_commands_page_names_every_slash_command():
    from crystal_kernel.host.commands import command_names

    text = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    for name in command_names():
        assert f"`/{name}" in text, name


def test_readme_starts_with_the_two_commands_and_links_every_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first = blocks(ROOT / "README.md")[0][2].splitlines()
    assert [line.split("#")[0].strip() for line in first] == ["make demo", "make test"]
    assert "docs/README.md" in readme
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    for page in (ROOT / "docs").glob("*.md"):
        if page.name != "README.md":
            assert f"]({page.name})" in index, page.name
