"""The docs cannot rot: every command shown in README.md and docs/*.md runs here (or is
listed in NOT_RUN with the reason and a check that it is well formed), every transcript's
output is the output the command really prints, every ``json`` block parses (and config
examples load), and the reference pages name every config key, every flag and every
slash command. How blocks are read: tests/docs/docpages.py.

Each page's ``sh`` and ``console`` blocks run in order in one shell, as one person would
type them, in a sandbox laid out like a checkout (``.venv`` linked, ``examples/`` and
``notebooks/`` copied) with a private HOME; labelled blocks are written as the files
they name just where they stand. Model requests go to the loopback model server: a
``http://localhost:PORT`` in a command is rewritten to it, and ``crystal run`` without
``--base-url`` gets the server's URL added (nothing else about a command changes).
SETUP gives a page what its reader is assumed to have already (said there, in words).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import docpages  # noqa: E402
from docpages import PAGES, ROOT, blocks  # noqa: E402

from crystal_kernel.testing.llm_server import LLMServer  # noqa: E402

PRELUDE = """set -e
# Every make target the docs show is in NOT_RUN; nothing here runs make for real.
make() { echo "make $* is not in NOT_RUN (tests/docs/test_docs_commands.py)" >&2; return 1; }
# A model request goes to the loopback server: `crystal run` without --base-url gets its URL.
crystal() {
  if [ "$1" = run ] && ! printf '%s\\n' "$@" | grep -q -- '--base-url'; then
    if printf '%s\\n' "$@" | grep -qx anthropic; then url="$LOOPBACK"; else url="$LOOPBACK/v1"; fi
    command crystal "$@" --base-url "$url"
  else
    command crystal "$@"
  fi
}
# A crystal command line that must parse (exit 2 and one line when it does not).
crystal_parses() { python -c 'import sys; from crystal_kernel.cli import build_parser; build_parser().parse_args(sys.argv[1:])' "$@"; }
"""

DRY_MAKE = 'command make -C "$CRYSTAL_REPO" --dry-run {} >/dev/null'

# Commands shown in sh blocks that cannot run here: (why, the check that runs instead).
# Each check proves the command is well formed without doing what it does.
NOT_RUN: dict[str, tuple[str, str]] = {
    "make demo": ("tests/demo/test_demo.py runs what it runs, for real; here its recipe is expanded",
                  DRY_MAKE.format("demo")),
    "make test": ("it is the whole suite, this test included; here its recipe is expanded",
                  DRY_MAKE.format("test")),
    "make interop": ("it builds llama-server (tens of minutes) and runs the interop suite; here its recipe "
                     "is expanded", DRY_MAKE.format("interop")),
    "make lab": ("it starts JupyterLab, which serves until stopped; here its recipe is expanded",
                 DRY_MAKE.format("lab")),
    "crystal kernel install --sys-prefix": (
        "it writes into this Python's prefix, the .venv the checkout shares (the sandbox links it); "
        "it must parse, and with a flag that fails its check it must refuse and install nothing",
        "crystal_parses kernel install --sys-prefix && "
        "! command crystal kernel install --sys-prefix --disable-tool no_such_tool 2>/dev/null"),
    "pip install -e .": (
        "it would install into the .venv the checkout shares; the same folder is built and installed "
        "into a private target folder put on PYTHONPATH instead, as pip leaves it",
        'pip install --quiet --no-deps --no-build-isolation --no-index --target "$HOME/site" . '
        '&& export PYTHONPATH="$HOME/site"'),
    "pip install 'crystal-kernel[jupyter-ai]'": (
        "it downloads from PyPI (no network here); the test extra installs the same jupyter-ai and "
        "tests/testing/test_environment.py checks the result; here the extra must be declared",
        'python -c "import sys, tomllib; sys.exit(\'jupyter-ai\' not in '
        'tomllib.load(open(sys.argv[1], \'rb\'))[\'project\'][\'optional-dependencies\'])" '
        '"$CRYSTAL_REPO/pyproject.toml"'),
    "jupyter lab": (
        "it serves until stopped (tests/e2e starts JupyterLab for real); here it must be installed",
        "jupyter lab --version >/dev/null"),
    "cd labextension && jlpm build": (
        "it rebuilds the extension inside the checkout the other tests use (and the sandbox has no "
        "labextension/); the build script must exist",
        'test -n "$(python -c \'import json,sys; print(json.load(open(sys.argv[1]))["scripts"].get("build", ""))\' '
        '"$CRYSTAL_REPO/labextension/package.json")"'),
    # deploy.md: a Kernel Gateway and a JupyterLab that reaches it; tests/e2e/test_gateway.py runs both for real.
    "jupyter kernelgateway --ip=0.0.0.0 --port=8889 --KernelGatewayApp.auth_token=CHANGE-ME "
    "--JupyterWebsocketPersonality.list_kernels=True --KernelGatewayApp.env_process_whitelist=CRYSTAL_HOME "
    "--KernelGatewayApp.env_process_whitelist=CRYSTAL_PROVIDER --KernelGatewayApp.env_process_whitelist=CRYSTAL_MODEL "
    "--KernelGatewayApp.env_process_whitelist=CRYSTAL_API_KEY_ENV "
    "--JupyterWebsocketPersonality.env_whitelist=OPENAI_API_KEY": (
        "it serves until stopped (tests/e2e/test_gateway.py starts one with these settings); here the "
        "gateway must be installed and know every option shown",
        "jupyter kernelgateway --help-all > gw-help.txt && grep -q -- --KernelGatewayApp.env_process_whitelist "
        "gw-help.txt && grep -q -- --JupyterWebsocketPersonality.env_whitelist gw-help.txt "
        "&& grep -q -- --JupyterWebsocketPersonality.list_kernels gw-help.txt"),
    "OPENAI_API_KEY=sk-your-key jupyter lab --gateway-url=http://gateway-host:8889 --GatewayClient.auth_token=CHANGE-ME "
    "--GatewayClient.allowed_envs=OPENAI_API_KEY": (
        "it serves until stopped and needs a gateway (tests/e2e/test_gateway.py runs both); here the "
        "server must know every option shown",
        "jupyter server --help-all > server-help.txt && grep -q -- --gateway-url server-help.txt "
        "&& grep -q -- --GatewayClient.allowed_envs server-help.txt && grep -q -- --GatewayClient.auth_token "
        "server-help.txt && jupyter lab --help >/dev/null"),
    # deploy.md: an Enterprise Gateway; tests/e2e/test_gateway.py runs one (build/eg) with the page's config.
    "EG_AUTH_TOKEN=CHANGE-ME EG_SENSITIVE_ENV_KEYS=api_key CRYSTAL_PROVIDER=openai CRYSTAL_MODEL=gpt-4.1 "
    "CRYSTAL_API_KEY_ENV=KERNEL_OPENAI_API_KEY jupyter enterprisegateway --ip=0.0.0.0 --port=8888": (
        "it serves until stopped (tests/e2e/test_gateway.py starts one from build/eg, `make eg-deps`); here "
        "the gateway of build/eg must know the options of the page's config and the two variables shown",
        'eg="$CRYSTAL_REPO/build/eg" && "$eg/bin/jupyter-enterprisegateway" --help-all > eg-help.txt '
        "&& grep -q -- --EnterpriseGatewayApp.inherited_envs eg-help.txt && grep -q -- --EnterpriseGatewayApp.client_envs "
        "eg-help.txt && grep -q -- --EnterpriseGatewayApp.list_kernels eg-help.txt "
        '&& grep -rqs EG_AUTH_TOKEN "$eg"/lib/python3*/site-packages/enterprise_gateway '
        '&& grep -rqs EG_SENSITIVE_ENV_KEYS "$eg"/lib/python3*/site-packages/enterprise_gateway'),
    "apt-get update && apt-get install -y chromium": (
        "it changes the machine's packages and needs the network; the install is simulated",
        "apt-get --simulate install -y chromium >/dev/null"),
}

# What a page's reader already has, set up before the page runs (the page says so).
SETUP: dict[str, str] = {
    # install.md runs a tour unattended "after make demo" in a checkout, where the demo
    # writes build/demo/ beside the package; here the package is the shared checkout's, so
    # its output is pointed at the sandbox.
    "install.md": 'export CRYSTAL_DEMO_BUILD="$PWD/build/demo"',
    # "crystal kernel install ... --prompt-set strict": a set named strict (prompts.md).
    "kernel.md": "mkdir -p ~/.crystal/promptsets/strict && "
                 "echo '{\"name\": \"Strict\", \"enabled\": false}' > ~/.crystal/promptsets/strict/prompt.json",
}


def pages_with(*langs: str) -> list[Path]:
    return [p for p in PAGES if any(b.lang in langs for b in blocks(p))]


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
           if not k.startswith(("CRYSTAL_", "OPENAI", "ANTHROPIC", "JUPYTER", "JPY_", "VIRTUAL_ENV", "PYTHONPATH"))}
    env.update(HOME=str(tmp / "home"), CRYSTAL_REPO=str(ROOT), CRYSTAL_TOPIC_NAMING="off",
               OPENAI_BASE_URL=server.base_url, ANTHROPIC_BASE_URL=server.url,
               PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    return env


def write_file(label: str, text: str) -> str:
    """Shell lines that write a labelled block to the file it names."""
    path = '"$HOME"/' + shlex.quote(label[2:]) if label.startswith("~/") else shlex.quote(label)
    return f'mkdir -p "$(dirname {path})" && cat > {path} <<\'CRYSTAL_DOC_EOF\'\n{text}\nCRYSTAL_DOC_EOF\n'


def shell_line(line: str, server: LLMServer) -> str:
    command = docpages.without_comment(line)
    if command in NOT_RUN:
        return f"echo '@@ not run: {command}' >&2\n{NOT_RUN[command][1]}\n"
    return re.sub(r"http://localhost:\d+", server.url, line) + "\n"


def page_script(page: Path, server: LLMServer, outdir: Path) -> tuple[str, list[tuple[int, str, str, Path]]]:
    """The page as one shell script, and the transcript outputs it must produce."""
    script = PRELUDE + SETUP.get(page.name, "") + "\n"
    shown: list[tuple[int, str, str, Path]] = []
    for block in blocks(page):
        # Each block says where it starts, so a failure names the page and line.
        marker = f"echo '@@ {page.name}:{block.line}' >&2\n"
        if block.label and block.lang not in ("sh", "console"):
            script += marker + write_file(block.label, block.text)
        elif block.lang == "sh":
            script += marker + "".join(shell_line(line, server) for line in docpages.logical_lines(block.text))
        elif block.lang == "console":
            script += marker
            for command, output in docpages.transcript(block.text):
                out = outdir / f"{len(shown)}.out"
                shown.append((block.line, command, output, out))
                # stdout is a pipe, as in a terminal session; the exit code shows in the output.
                script += (f"{{ {re.sub(r'http://localhost:[0-9]+', server.url, command)}\n}} "
                           f"> >(cat > {shlex.quote(str(out))}) 2>&1 || true; wait $!\n")
    return script, shown


# recording.md re-records every tour (real kernels, notebook_run): minutes, not seconds.
@pytest.mark.timeout(600)
@pytest.mark.parametrize("page", pages_with("sh", "console"), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shell_command_in_the_page_runs(page: Path, tmp_path: Path, server: LLMServer):
    checkout = sandbox(tmp_path)
    env = dict(sandbox_env(tmp_path, server), LOOPBACK=server.url)
    outdir = tmp_path / "transcripts"
    outdir.mkdir()
    script, shown = page_script(page, server, outdir)
    out = subprocess.run(["bash", "-c", script], cwd=checkout, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, f"failed ({out.returncode}); stdout:\n{out.stdout[-2000:]}\nstderr:\n{out.stderr[-3000:]}"
    assert "Error" not in out.stderr, out.stderr[-3000:]
    for line, command, expected, path in shown:
        # What a terminal shows: colours are not text, and the home folder reads as ~.
        actual = re.sub(r"\x1b\[[0-9;]*m", "", path.read_text(encoding="utf-8")).replace(env["HOME"], "~")
        assert docpages.output_matches(expected, actual), (
            f"{page.name}:{line}: $ {command}\nthe page shows:\n{expected}\nit prints:\n{actual}")


def test_not_run_commands_are_shown_somewhere():
    shown = {docpages.without_comment(line) for page in PAGES for b in blocks(page) if b.lang == "sh"
             for line in docpages.logical_lines(b.text)}
    assert set(NOT_RUN) <= shown, set(NOT_RUN) - shown


def test_every_block_names_its_language():
    for page in PAGES:
        for block in blocks(page):
            assert block.lang in docpages.LANGUAGES, f"{page.name}:{block.line}: fence language {block.lang!r}"


def test_every_json_block_parses_and_config_examples_load(tmp_path: Path):
    """Every json block is JSON, or a fragment of a config.json (``"key": value`` lines),
    or says it is abbreviated (``…``). Whole config files and fragments load with the real
    config loader; an mcp.json loads every server with the real MCP config reader."""
    from crystal_kernel.core.config import known_keys, load_config
    from crystal_kernel.mcp.config import read_file

    config_keys = set(known_keys()) | {"cassette", "reviewTimeoutSeconds"}
    configs = mcp_files = 0
    for page in PAGES:
        for block in blocks(page):
            if block.lang != "json":
                continue
            where = f"{page.name}:{block.line}"
            try:
                value = json.loads(block.text)
            except json.JSONDecodeError:
                if "…" in block.text:
                    continue  # an abbreviated example, and it says so
                value = json.loads("{" + block.text + "}")  # a fragment; a broken one fails here
                assert set(value) <= config_keys, f"{where}: a fragment of no config.json: {sorted(value)}"
            if isinstance(value, dict) and value and set(value) <= config_keys:
                home = tmp_path / f"{page.stem}-{block.line}"
                home.mkdir()
                (home / "config.json").write_text(json.dumps(value), encoding="utf-8")
                load_config(home, environ={})
                configs += 1
            elif isinstance(value, dict) and "mcpServers" in value:
                path = tmp_path / f"{page.stem}-{block.line}.json"
                path.write_text(block.text, encoding="utf-8")
                notes: list[str] = []
                servers = read_file(path, notes, environ={"HOME": "/home/you", "TRACKER_TOKEN": "t"})
                assert notes == [] and len(servers) == len(value["mcpServers"]), f"{where}: {notes}"
                mcp_files += 1
    assert configs >= 5 and mcp_files >= 2


def flags_of(parser) -> set[str]:
    return {opt for action in parser._actions for opt in action.option_strings
            if opt.startswith("--") and opt != "--help"}


def test_configuration_names_every_key_and_flag():
    from crystal_kernel.cli import build_parser
    from crystal_kernel.core.config import known_keys
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
    first = blocks(ROOT / "README.md")[0].text.splitlines()
    assert [line.split("#")[0].strip() for line in first] == ["make demo", "make test"]
    assert "docs/README.md" in readme
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    for page in (ROOT / "docs").glob("*.md"):
        if page.name != "README.md":
            assert f"]({page.name})" in index, page.name
