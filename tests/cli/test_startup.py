"""What `crystal run` loads before its first model request (the target: start to first
request). A real `crystal run` process against the loopback server, for each SDK: the
answer arrives, and the process never imported what the run does not use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crystal_kernel.testing.llm_server import LLMServer

# Runs `crystal run ...` exactly as the console script does (main() reading sys.argv),
# then reports which modules the process had loaded by the time it exited.
WRAPPER = """
import atexit, json, sys
def report():
    loaded = [m for m, module in sys.modules.items() if module is not None]  # None: an import blocked on purpose
    names = sorted({m.split('.')[0] for m in loaded} | {m for m in loaded if m.startswith('openai.resources')})
    sys.stderr.write('MODULES ' + json.dumps(names) + '\\n')
atexit.register(report)
from crystal_kernel.cli import main
sys.argv = ['crystal', *sys.argv[1:]]
sys.exit(main())
"""

# h2: the HTTP clients' HTTP/2 support, which no client of Crystal's asks for (start to the first request, docs/benchmarks.md).
NEVER = {"IPython", "ipykernel", "ipywidgets", "jupyter_client", "jupyter_core", "nbformat", "mcp", "aiohttp", "h2"}


def run_crystal(workspace: Path, env_extra: dict[str, str]) -> tuple[subprocess.CompletedProcess, set[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRYSTAL_")}
    env.update(env_extra)
    out = subprocess.run([sys.executable, "-c", WRAPPER, "run", "hello", "--workspace", str(workspace)],
                         capture_output=True, text=True, env=env, timeout=60)
    lines = [line for line in out.stderr.splitlines() if line.startswith("MODULES ")]
    return out, set(json.loads(lines[-1][len("MODULES "):])) if lines else set()


@pytest.mark.parametrize("provider", ["openai", "openai-responses", "anthropic"])
def test_run_answers_without_loading_unused_modules(provider: str, workspace: Path, tmp_path: Path):
    with LLMServer([{"text": "Hello back."}]) as server:
        url = server.url if provider == "anthropic" else server.base_url
        out, modules = run_crystal(workspace, {
            "CRYSTAL_HOME": str(tmp_path / "home"), "CRYSTAL_PROVIDER": provider, "CRYSTAL_BASE_URL": url,
            "CRYSTAL_MODEL": "claude-sonnet-4-6" if provider == "anthropic" else "gpt-4.1",
            "CRYSTAL_API_KEY_ENV": "TEST_KEY", "TEST_KEY": "sk-test"})
        requests = server.requests
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Hello back."
    assert requests and requests[0]["headers"].get("authorization", requests[0]["headers"].get("x-api-key"))
    assert modules, out.stderr
    assert not modules & NEVER, f"crystal run imported {sorted(modules & NEVER)}"
    # The request goes through the client's own post(), not the SDK's resource classes.
    assert not any(m.startswith("openai.resources") for m in modules if m != "openai.resources")


TYPES_WRAPPER = WRAPPER.replace(
    "names = sorted({m.split('.')[0] for m in loaded} | {m for m in loaded if m.startswith('openai.resources')})",
    "names = sorted(m for m in loaded if m.startswith('openai.types'))")


def test_run_loads_only_the_openai_types_it_uses(workspace: Path, tmp_path: Path):
    """`import openai` loads every model of the whole API (``openai.types``); `crystal run`
    defers those package inits (providers/deferred_init.py), and reads the streamed reply
    as JSON: not even the chat completion model is loaded before or after its request."""
    with LLMServer([{"text": "Hello back."}]) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CRYSTAL_")}
        env.update({"CRYSTAL_HOME": str(tmp_path / "home"), "CRYSTAL_PROVIDER": "openai", "CRYSTAL_BASE_URL": server.base_url,
                    "CRYSTAL_MODEL": "gpt-4.1", "CRYSTAL_API_KEY_ENV": "TEST_KEY", "TEST_KEY": "sk-test"})
        out = subprocess.run([sys.executable, "-c", TYPES_WRAPPER, "run", "hello", "--workspace", str(workspace)],
                             capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Hello back."
    line = next(x for x in out.stderr.splitlines() if x.startswith("MODULES "))
    loaded = set(json.loads(line[len("MODULES "):]))
    for unused in ("openai.types.chat.chat_completion", "openai.types.chat.chat_completion_message",
                   "openai.types.batch", "openai.types.eval_create_params", "openai.types.responses.response"):
        assert unused not in loaded, f"crystal run imported {unused}"


def acp_requests(workspace: Path) -> str:
    lines = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
             {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": str(workspace), "mcpServers": []}}]
    return "".join(json.dumps(line) + "\n" for line in lines)


@pytest.mark.parametrize("front", ["acp", "interactive"])
def test_acp_and_interactive_fronts_load_only_the_openai_types_they_use(front: str, workspace: Path, tmp_path: Path):
    """`crystal acp` and the interactive `crystal` open sessions as `crystal run` does and
    defer the openai package inits too: a session opened on the openai provider (acp:
    initialize and session/new; the interactive front with piped stdin: one answered
    turn) never loads the rest of the API's types."""
    with LLMServer([{"text": "Hello back."}]) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CRYSTAL_")}
        env.update({"CRYSTAL_HOME": str(tmp_path / "home"), "CRYSTAL_PROVIDER": "openai", "CRYSTAL_BASE_URL": server.base_url,
                    "CRYSTAL_MODEL": "gpt-4.1", "CRYSTAL_API_KEY_ENV": "TEST_KEY", "TEST_KEY": "sk-test"})
        args, stdin = (["acp"], acp_requests(workspace)) if front == "acp" else (["--workspace", str(workspace)], "hello")
        out = subprocess.run([sys.executable, "-c", TYPES_WRAPPER.replace("openai.types", "openai"), *args],
                             input=stdin, capture_output=True, text=True, env=env, cwd=workspace, timeout=60)
    assert out.returncode == 0, out.stderr
    if front == "acp":
        answers = {m["id"]: m for m in map(json.loads, out.stdout.splitlines()) if "id" in m}
        assert answers[2]["result"]["sessionId"], out.stdout
    else:
        assert out.stdout.strip() == "Hello back."
    line = next(x for x in out.stderr.splitlines() if x.startswith("MODULES "))
    loaded = set(json.loads(line[len("MODULES "):]))
    assert "openai._client" in loaded  # the session's provider is the openai SDK's client
    for unused in ("openai.lib._tools", "openai.types.batch", "openai.types.eval_create_params",
                   "openai.types.responses.response"):
        assert unused not in loaded, f"crystal {front} imported {unused}"


# A front as the console script runs it, with the point its start ends replaced by a
# report: whether the collector is on there, and how many collections the start ran.
GC_PROBE = """
import gc, sys
def report(*args, **kwargs):
    if not REPORTED:
        REPORTED.append(True)
        sys.stderr.write(f"GC {gc.isenabled()} {sum(s['collections'] for s in gc.get_stats()) - BEFORE}\\n")
REPORTED = []
{patch}
from crystal_kernel.cli import main
sys.argv = ['crystal', *sys.argv[1:]]
# A collection now, so that the probe's own counting cannot cross the collector's
# threshold (it did, when the imports above happened to end just below it): from here
# on, only the front's start allocates.
gc.collect()
BEFORE = sum(s['collections'] for s in gc.get_stats())
sys.exit(main())
"""
GC_PATCHES = {
    # serving: the agent's flags are checked (the ACP SDK's schema and the host imported)
    "acp": "import crystal_kernel.acp.cli as front\nasync def serve(*args):\n    report()\nfront.serve = serve",
    # printing the list: the tools are found
    "tools": "import crystal_kernel.cli.tools as front\nfront.say = report",
    # the prompt loop, on a terminal: the session is open
    "interactive": "import crystal_kernel.cli.interactive as front\nclass Repl:\n    def __init__(self, session):\n"
                   "        pass\n    async def run(self):\n        report()\n        return 0\nfront.Repl = Repl\n"
                   "class Terminal:\n    def isatty(self):\n        return True\nsys.stdin = Terminal()",
}


@pytest.mark.parametrize("front", ["acp", "tools", "interactive"])
def test_own_process_fronts_start_with_the_collector_paused_and_go_on_with_it_on(front: str, tmp_path: Path):
    """`crystal acp`, `tools` and the interactive front run no collection while they start
    (the SDKs, the host); from there on the collector is on (core/gc_pause.py
    pause_front_start)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRYSTAL_")}
    env.update({"CRYSTAL_HOME": str(tmp_path / "home"), "CRYSTAL_PROVIDER": "openai", "CRYSTAL_MODEL": "gpt-4.1",
                "CRYSTAL_BASE_URL": "http://127.0.0.1:9/v1", "CRYSTAL_API_KEY_ENV": "TEST_KEY", "TEST_KEY": "sk-test"})
    args = {"acp": ["acp"], "tools": ["tools", "list", "--workspace", str(tmp_path)],
            "interactive": ["--workspace", str(tmp_path)]}[front]
    out = subprocess.run([sys.executable, "-c", GC_PROBE.replace("{patch}", GC_PATCHES[front]), *args], input="",
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    assert [line.split()[1:] for line in out.stderr.splitlines() if line.startswith("GC ")] == [["True", "0"]], out.stderr


DEFERRED_CHECK = """
import sys
from crystal_kernel.providers.deferred_init import defer_package_inits
assert defer_package_inits()
from openai._client import AsyncOpenAI
import openai
# The client's module loaded without the package's own __init__ (openai.lib, every type).
assert 'pydantic_function_tool' not in vars(openai) and 'openai.lib._tools' not in sys.modules
assert openai.AsyncOpenAI is AsyncOpenAI and openai.pydantic_function_tool.__name__ == 'pydantic_function_tool'
try:
    openai.NoSuchName
except AttributeError:
    pass
else:
    raise AssertionError('openai.NoSuchName')
from openai.types.chat.chat_completion_chunk import ChatCompletionChunk
import openai.types.chat as chat
assert ChatCompletionChunk is chat.ChatCompletionChunk
from openai.types import Batch
from openai.types.responses import Response
assert openai.types.Batch is Batch and Response.__name__ == 'Response'
try:
    openai.types.NoSuchName
except AttributeError:
    print('ok')
"""


def test_deferred_package_inits_still_give_every_name():
    """A deferred package behaves as shipped once used: its names, its submodules, and an
    AttributeError for a name it does not have. The ``openai`` package itself is deferred
    too (docs/benchmarks.md): its client module loads alone, and the first name read from the
    package runs its __init__."""
    out = subprocess.run([sys.executable, "-c", DEFERRED_CHECK], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


# Records what the process had imported when it wrote its first model request (the
# first POST on a socket): what `crystal run` loads before the model can start answering.
# The context window probe's requests (server_info.py) come before it and do not count.
# Also recorded: whether a TLS trust store was read by then, and how many collections of
# the oldest generation the collector had run.
FIRST_REQUEST_WRAPPER = """
import gc, json, socket, ssl, sys
import importlib.metadata as metadata
SCANS = []
_entry_points = metadata.entry_points
def entry_points(**params):
    SCANS.append(params.get('group'))
    return _entry_points(**params)
metadata.entry_points = entry_points
READS = []
for name in ('load_verify_locations', 'load_default_certs', 'set_default_verify_paths'):
    def reader(self, *args, _name=name, _real=getattr(ssl.SSLContext, name), **kwargs):
        READS.append(_name)
        return _real(self, *args, **kwargs)
    setattr(ssl.SSLContext, name, reader)
_send = socket.socket.send
def send(self, data, *args):
    line = bytes(data[:200]).split(b'\\r\\n', 1)[0]
    if line.startswith(b'POST ') and line.split()[1].endswith((b'/completions', b'/responses', b'/messages')) \\
            and not getattr(sys, '_first_post', False):
        sys._first_post = True
        sys.stderr.write('FIRST ' + json.dumps(sorted(sys.modules)) + '\\n')
        sys.stderr.write('TRUST ' + json.dumps(READS) + '\\n')
        sys.stderr.write('FULLGC ' + str(gc.get_stats()[2]['collections']) + '\\n')
        sys.stderr.write('SCANS ' + json.dumps(SCANS) + '\\n')
    return _send(self, data, *args)
socket.socket.send = send
from crystal_kernel.cli import main
sys.argv = ['crystal', *sys.argv[1:]]
sys.exit(main())
"""

# Needed only once a tool stops a process tree, starts a job or searches, an MCP server is configured, or a front
# other than the terminal runs: none of it before the first request.
NOT_BEFORE_FIRST_REQUEST = {"psutil", "httpx", "mcp", "aiohttp", "IPython", "ipykernel", "jupyter_client",
                            "nbformat", "crystal_kernel.mcp.manager", "crystal_kernel.jobs.manager",
                            "crystal_kernel.jobs.job", "crystal_kernel.tools._index", "sqlite3",
                            # The openai package's own __init__ (docs/benchmarks.md): its helpers and every type.
                            "openai.lib._tools", "openai.lib.azure", "openai.types.shared.chat_model"}


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_first_request_is_sent_before_loading_what_it_does_not_need(provider: str, workspace: Path, tmp_path: Path):
    """`crystal run` against a plain-http server (context window probed first, as for any
    `baseUrl` server): by the time the first model request is written, the process has
    not imported psutil (process-tree stopping), httpx (the probe uses the SDK's httpx2),
    MCP or any Jupyter library."""
    with LLMServer([{"text": "Hello back."}]) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CRYSTAL_")}
        env.update({"CRYSTAL_HOME": str(tmp_path / "home"), "CRYSTAL_PROVIDER": provider,
                    "CRYSTAL_BASE_URL": server.url if provider == "anthropic" else server.base_url,
                    "CRYSTAL_MODEL": "claude-sonnet-4-6" if provider == "anthropic" else "gpt-4.1",
                    "CRYSTAL_API_KEY_ENV": "TEST_KEY", "TEST_KEY": "sk-test"})
        out = subprocess.run([sys.executable, "-c", FIRST_REQUEST_WRAPPER, "run", "hello", "--workspace", str(workspace)],
                             capture_output=True, text=True, env=env, timeout=120)
        paths = [r["path"] for r in server.requests]
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Hello back."
    lines = [x for x in out.stderr.splitlines() if x.startswith("FIRST ")]
    assert lines, f"no POST seen on a socket; requests: {paths}"
    loaded = set(json.loads(lines[0][len("FIRST "):]))
    assert "crystal_kernel.host.loop" in loaded  # the record is of a real turn's process
    early = sorted(m for m in loaded if m in NOT_BEFORE_FIRST_REQUEST or m.split(".")[0] in NOT_BEFORE_FIRST_REQUEST
                   # The other fronts' subcommands: `crystal run` parses only its own (docs/benchmarks.md).
                   or m.startswith(("crystal_kernel.jupyter", "crystal_kernel.acp")))
    assert not early, f"crystal run imported {early} before its first model request"


def _first_request_record(provider: str, workspace: Path, tmp_path: Path) -> dict[str, str]:
    """The FIRST/TRUST/FULLGC lines a `crystal run` against the loopback server wrote."""
    with LLMServer([{"text": "Hello back."}]) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CRYSTAL_")}
        env.update({"CRYSTAL_HOME": str(tmp_path / "home"), "CRYSTAL_PROVIDER": provider,
                    "CRYSTAL_BASE_URL": server.base_url, "CRYSTAL_MODEL": "gpt-4.1",
                    "CRYSTAL_API_KEY_ENV": "TEST_KEY", "TEST_KEY": "sk-test"})
        out = subprocess.run([sys.executable, "-c", FIRST_REQUEST_WRAPPER, "run", "hello", "--workspace", str(workspace)],
                             capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Hello back."
    return {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in out.stderr.splitlines()
            if line.startswith(("FIRST ", "TRUST ", "FULLGC ", "SCANS "))}


@pytest.mark.parametrize("provider", ["openai", "openai-responses"])
def test_a_plain_http_server_costs_no_trust_store_and_the_start_no_full_collection(
        provider: str, workspace: Path, tmp_path: Path):
    """Start to first request (docs/benchmarks.md): against a plain-http server (every local one) no
    TLS trust store is read before the first model request (the SDK's client read the
    system's CA certificates, ~50 ms of CPU, though no TLS is ever spoken), and the
    garbage collector, off while the host and the SDK are imported, has run no
    collection of its oldest generation by then."""
    record = _first_request_record(provider, workspace, tmp_path)
    assert "FIRST" in record, "no model request seen on a socket"
    assert json.loads(record["TRUST"]) == [], f"a trust store was read before the first request: {record['TRUST']}"
    assert record["FULLGC"] == "0", f"{record['FULLGC']} full collections ran before the first request"


def test_entry_point_groups_nobody_declares_are_not_scanned_before_the_first_request(workspace: Path, tmp_path: Path):
    """Start to first request (docs/benchmarks.md): ``importlib.metadata.entry_points`` builds every installed distribution
    (~8 ms here); Crystal's plugin group and pydantic's are scanned before the first
    request only when some distribution declares them (plugins.declares_entry_points)."""
    from importlib.metadata import entry_points

    record = _first_request_record("openai", workspace, tmp_path)
    scans = json.loads(record["SCANS"])
    for group in ("crystal_kernel.plugins", "pydantic"):
        if not entry_points(group=group):
            assert group not in scans, f"{group} was scanned before the first request: {scans}"


def test_a_plain_http_servers_client_checks_certificates_but_loads_none():
    """The TLS context a plain-http server's client gets (providers/sdk.no_trust_store)
    reads no trust store yet still checks certificates and host names, so a redirect to
    an https address fails rather than connecting unchecked; an https server gets the
    SDK's own client (None here)."""
    import ssl

    from crystal_kernel.providers.sdk import no_trust_store

    context = no_trust_store("http://127.0.0.1:11434/v1")
    assert context is not None
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.cert_store_stats() == {"x509": 0, "crl": 0, "x509_ca": 0}
    assert no_trust_store("HTTP://LOCALHOST:8000/v1") is not None
    assert no_trust_store("https://api.openai.com/v1") is None


def test_own_process_fronts_skip_jsonschemas_iri_grammar_and_leave_a_loaded_one_alone(workspace):
    """`crystal tools`, `run`, `acp` and the interactive front run no one else's code: the
    MCP SDK's jsonschema does not build rfc3987-syntax's grammar there (~1.2 CPU s before
    an MCP server's first catalog); a process that loaded jsonschema first is left as it
    was (a kernel's person may check "iri" formats)."""
    probe = ("import sys\n"
             "from crystal_kernel import cli\n"
             "{before}"
             "sys.argv = ['crystal', 'tools', 'list', '--workspace', {ws!r}]\n"
             "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
             "import jsonschema\n"
             "print(sorted(f for f in ('iri', 'iri-reference') if f in jsonschema.FormatChecker().checkers))\n")
    fresh = subprocess.run([sys.executable, "-c", probe.format(before="", ws=str(workspace))],
                           capture_output=True, text=True, timeout=120)
    assert fresh.returncode == 0, fresh.stderr
    assert fresh.stdout.strip().splitlines()[-1] == "[]"
    loaded = subprocess.run([sys.executable, "-c", probe.format(before="import jsonschema\n", ws=str(workspace))],
                            capture_output=True, text=True, timeout=120)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip().splitlines()[-1] == "['iri', 'iri-reference']"


COMMANDS_WRAPPER = WRAPPER.replace(
    "names = sorted({m.split('.')[0] for m in loaded} | {m for m in loaded if m.startswith('openai.resources')})",
    "names = sorted(m for m in loaded if m.startswith('crystal_kernel.host.command'))")


@pytest.mark.parametrize("prompt", ["hello", "/help"])
def test_run_imports_the_commands_only_for_a_command_line(prompt: str, workspace: Path, tmp_path: Path):
    """`crystal run "a prompt"` does not import the slash commands'
    module (every command's handlers and option models) before its request; `crystal run
    /help` does, and answers."""
    with LLMServer([{"text": "Hello back."}]) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CRYSTAL_")}
        env.update({"CRYSTAL_HOME": str(tmp_path / "home"), "CRYSTAL_PROVIDER": "openai", "CRYSTAL_BASE_URL": server.base_url,
                    "CRYSTAL_MODEL": "gpt-4.1", "CRYSTAL_API_KEY_ENV": "TEST_KEY", "TEST_KEY": "sk-test"})
        out = subprocess.run([sys.executable, "-c", COMMANDS_WRAPPER, "run", prompt, "--workspace", str(workspace)],
                             capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    line = next(x for x in out.stderr.splitlines() if x.startswith("MODULES "))
    loaded = set(json.loads(line[len("MODULES "):]))
    if prompt == "hello":
        assert out.stdout.strip() == "Hello back."
        assert "crystal_kernel.host.commands" not in loaded, f"crystal run imported {sorted(loaded)}"
    else:
        assert "/help" in out.stdout or "help" in out.stdout.lower(), out.stdout
        assert "crystal_kernel.host.commands" in loaded
