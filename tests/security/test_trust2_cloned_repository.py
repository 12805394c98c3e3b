"""TRUST-2, TRUST-5 attacks from a cloned repository that the earlier tests did not cover:

- a repository file that shadows a package the Crystal kernel imports (``pluggy.py``)
  or declares a Crystal plugin (``x.dist-info/entry_points.txt``) in the notebook's
  folder: opening a notebook there must run none of it;
- a repository whose ``.crystal`` is a symbolic link to another project's trusted
  ``.crystal`` (or whose ``mcp.json`` is a link to a trusted one): trust is by content
  *and* place, so the link inherits nothing, in every front (the one trust store).

Each hostile file writes a marker when it runs: a marker means the repository ran code
on the person's machine before they trusted anything.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crystal_kernel.jupyter.driver import click
from crystal_kernel.testing.llm_server import LLMServer

CRYSTAL = str(Path(sys.executable).parent / "crystal")

_spec = importlib.util.spec_from_file_location("jupyter_kernel_helpers_clone",
                                               Path(__file__).parents[1] / "jupyter" / "conftest.py")
helpers = importlib.util.module_from_spec(_spec)
sys.modules["jupyter_kernel_helpers_clone"] = helpers  # dataclasses look their module up
_spec.loader.exec_module(helpers)  # type: ignore[union-attr]


def plant_python_files(repo: Path, markers: Path) -> None:
    """A repository with a module shadowing a package the host imports, and a plugin."""
    for module in ("pluggy", "openai", "mcp"):
        (repo / f"{module}.py").write_text(
            f"open({str(markers / module)!r}, 'w').write('ran')\nraise ImportError('shadowed')\n")
    package = repo / "crystal_kernel"
    (package / "jupyter").mkdir(parents=True)
    (package / "cli").mkdir()
    (package / "__init__.py").write_text(f"open({str(markers / 'crystal_kernel')!r}, 'w').write('ran')\n")
    for sub in ("jupyter", "cli"):
        (package / sub / "__init__.py").write_text("")
        (package / sub / "__main__.py").write_text("")
    plant_plugin(repo, markers)


def plant_plugin(repo: Path, markers: Path) -> None:
    """A folder that makes ``importlib.metadata`` see a distribution declaring a Crystal
    plugin, whose module leaves a marker when it is loaded."""
    info = repo / "evilplug-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: evilplug\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[crystal_kernel.plugins]\nevil = evilplug_mod\n")
    (repo / "evilplug_mod.py").write_text(f"open({str(markers / 'plugin')!r}, 'w').write('ran')\n")


@pytest.fixture
def llm_server():
    with LLMServer(max_hang=20) as server:
        yield server


def test_a_notebook_folder_cannot_shadow_the_kernels_imports_or_plant_a_plugin(llm_server, tmp_path):
    """TRUST-2: a real Crystal kernel started by jupyter_client in a cloned repository's
    folder (as Jupyter starts it for a notebook there) answers a turn, and neither the
    shadowing modules nor the planted plugin ran; the python tool's code still imports
    a module of that folder (what a notebook's code expects)."""
    repo = tmp_path / "ws"
    repo.mkdir()
    markers = tmp_path / "markers"
    markers.mkdir()
    plant_python_files(repo, markers)
    (repo / "helper.py").write_text("VALUE = 'from the notebook folder'\n")
    llm_server.add({"tool_calls": [{"name": "python", "arguments": {"code": "import helper; print(helper.VALUE)"}}]},
                   {"text": "done"})
    kernel = helpers.start_kernel(tmp_path, llm_server, workspace=repo)
    try:
        assert kernel.run("/approval full").status == "ok"
        run = kernel.run("use the helper", actions=[click("Allow once")])  # asked in full too (SANDBOX-1)
        assert run.status == "ok", run.texts()
    finally:
        kernel.stop()
    ran = sorted(p.name for p in markers.iterdir())
    assert ran == [], f"the cloned repository ran code in the kernel: {ran}"
    results = [m for body in llm_server.bodies("chat") for m in body["messages"] if m.get("role") == "tool"]
    assert results and "from the notebook folder" in json.dumps(results), results


def test_plugins_are_never_found_in_the_current_folder(tmp_path):
    """TRUST-2, at the one place plugins are found (plugins.plugin_manager, every front):
    with the current folder on ``sys.path`` as IPython puts it (the magics in a notebook
    of the repository), the repository's distribution is not loaded; the same
    distribution in an installed location (an absolute ``sys.path`` entry elsewhere) is."""
    repo = tmp_path / "repo"
    repo.mkdir()
    markers = tmp_path / "markers"
    markers.mkdir()
    plant_plugin(repo, markers)
    probe = ("import sys; sys.path.insert(0, ''); "
             "from crystal_kernel.plugins import third_party_plugins; "
             "print(sorted(name for name, _ in third_party_plugins()))")
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    here = subprocess.run([sys.executable, "-c", probe], cwd=repo, capture_output=True, text=True, timeout=60, env=env)
    assert here.returncode == 0, here.stderr
    assert here.stdout.strip() == "[]" and not (markers / "plugin").exists(), here.stdout

    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    installed = subprocess.run(
        [sys.executable, "-c", probe.replace("sys.path.insert(0, '')", f"sys.path.insert(0, {str(repo)!r})")],
        cwd=elsewhere, capture_output=True, text=True, timeout=60, env=env)
    assert installed.returncode == 0, installed.stderr
    assert installed.stdout.strip() == "['evil']" and (markers / "plugin").exists(), installed.stdout


def test_the_launchers_of_the_kernel_and_the_acp_persona_import_nothing_from_their_folder(tmp_path):
    """TRUST-2: the argv the kernelspec and Jupyter AI's ACP persona start Crystal with
    (kernelspec.module_argv) runs the installed package in a folder holding a
    ``crystal_kernel/`` package of its own; ``python -m`` there (the control) runs the
    repository's."""
    from crystal_kernel.jupyter.kernelspec import kernel_json, module_argv

    repo = tmp_path / "repo"
    repo.mkdir()
    markers = tmp_path / "markers"
    markers.mkdir()
    plant_python_files(repo, markers)
    assert kernel_json()["argv"][:4] == module_argv(sys.executable, "crystal_kernel.jupyter")
    done = subprocess.run([*module_argv(sys.executable, "crystal_kernel.cli"), "--version"], cwd=repo,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip(), done.stderr
    assert sorted(p.name for p in markers.iterdir()) == []
    subprocess.run([sys.executable, "-m", "crystal_kernel.cli", "--version"], cwd=repo,
                   capture_output=True, text=True, timeout=60)
    assert (markers / "crystal_kernel").exists(), "control: python -m imports the folder's package"


def crystal(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([CRYSTAL, *args], cwd=cwd, capture_output=True, text=True, timeout=120, env=dict(os.environ))


def write_mcp(crystal_dir: Path) -> Path:
    """An mcp.json whose server writes ``ran-here`` in the folder it was started in
    (the workspace): where it ran tells which repository's trust was used."""
    crystal_dir.mkdir(parents=True, exist_ok=True)
    path = crystal_dir / "mcp.json"
    code = "open('ran-here', 'a').write('ran\\n')"
    path.write_text(json.dumps({"mcpServers": {"evil": {"command": sys.executable, "args": ["-c", code]}}}))
    return path


@pytest.mark.parametrize("link", [".crystal", ".crystal/mcp.json"])
def test_a_link_to_a_trusted_crystal_folder_inherits_no_trust(tmp_path, link):
    """TRUST-5 (trust content, not paths): the person trusted project A's mcp.json. A
    cloned repository B whose ``.crystal`` (or ``mcp.json``) is a symbolic link to A's
    starts nothing in B through `crystal run`, `crystal tools list` and `crystal trust`
    refuses to trust it, naming the link; A still runs."""
    trusted = tmp_path / "A"
    write_mcp(trusted / ".crystal")
    done = crystal("trust", ".crystal/mcp.json", cwd=trusted)
    assert done.returncode == 0, done.stderr
    crystal("run", "/tools", cwd=trusted)
    assert (trusted / "ran-here").exists(), "control: the trusted server starts in its own project"

    hostile = tmp_path / "B"
    hostile.mkdir()
    if link == ".crystal":
        (hostile / ".crystal").symlink_to(trusted / ".crystal")
    else:
        (hostile / ".crystal").mkdir()
        (hostile / ".crystal" / "mcp.json").symlink_to(trusted / ".crystal" / "mcp.json")
    for args in (["run", "/tools"], ["tools", "list"]):
        done = crystal(*args, cwd=hostile)
        assert done.returncode == 0, done.stderr
        assert not (hostile / "ran-here").exists(), f"`crystal {' '.join(args)}` in B used A's trust"
    listed = crystal("trust", "list", cwd=hostile)
    assert "refused" in listed.stdout and f"{link.split('/')[-1]} is a symbolic link" in listed.stdout, listed.stdout
    refused = crystal("trust", ".crystal/mcp.json", cwd=hostile)
    assert refused.returncode != 0 and "is a symbolic link" in refused.stderr, refused.stdout + refused.stderr
    crystal("run", "/tools", cwd=hostile)
    assert not (hostile / "ran-here").exists()


def test_a_planted_cassettes_link_cannot_lead_a_recording_out_of_the_workspace(tmp_path):
    """TRUST-3: with `record: true` (the person's Home config) Crystal writes
    `.crystal/cassettes/default.json`; a cloned repository whose `.crystal/cassettes`
    is a link to another folder must not make Crystal write (or replace) a
    `default.json` there. A real `crystal run` stops with one line naming the link."""
    home = Path(os.environ["CRYSTAL_HOME"])
    (home / "config.json").write_text(json.dumps({"record": True, "topicNaming": False}))
    repo = tmp_path / "repo"
    (repo / ".crystal").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (repo / ".crystal" / "cassettes").symlink_to(outside)
    with LLMServer([{"text": "ok"}]) as server:
        done = subprocess.run([CRYSTAL, "run", "--provider", "openai", "--base-url", server.base_url,
                               "--api-key-env", "CLONE_KEY", "hello"], cwd=repo, capture_output=True, text=True,
                              timeout=120, env={**os.environ, "CLONE_KEY": "sk-clone-key-123"})
    assert list(outside.iterdir()) == [], "the recording was written through the planted link"
    assert done.returncode != 0
    assert "Cannot record to" in done.stderr and "is a symbolic link" in done.stderr, done.stderr


def test_a_trusted_mcp_json_is_untrusted_again_when_the_script_it_runs_changes(tmp_path):
    """TRUST-2 (trust content, not paths): the person trusted an mcp.json whose server
    is the repository's own ``tools/server.py``. A ``git pull`` that changes only that
    script must not run it without asking again: `crystal run` starts nothing, `crystal
    trust list` says `changed`; trusting again runs the new script. An mcp.json that
    names no workspace file keeps the hash of its bytes (trust made before stays)."""
    repo = tmp_path / "repo"
    (repo / ".crystal").mkdir(parents=True)
    (repo / "tools").mkdir()
    script = repo / "tools" / "server.py"
    script.write_text("open('ran-v1', 'w').write('ran')\n")
    (repo / ".crystal" / "mcp.json").write_text(json.dumps(
        {"mcpServers": {"local": {"command": sys.executable, "args": ["tools/server.py"]}}}))
    assert crystal("trust", ".crystal/mcp.json", cwd=repo).returncode == 0
    crystal("run", "/tools", cwd=repo)
    assert (repo / "ran-v1").exists(), "control: the trusted server runs"

    script.write_text("open('ran-v2', 'w').write('pulled')\n")
    done = crystal("run", "/tools", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert not (repo / "ran-v2").exists(), "a changed server script ran without trust"
    listed = crystal("trust", "list", cwd=repo)
    assert "changed" in listed.stdout, listed.stdout
    assert crystal("trust", ".crystal/mcp.json", cwd=repo).returncode == 0
    crystal("run", "/tools", cwd=repo)
    assert (repo / "ran-v2").exists()


def test_an_mcp_json_naming_no_workspace_file_keeps_its_byte_hash(tmp_path):
    from crystal_kernel.core.trust import file_digest
    from crystal_kernel.core.trust_digest import bytes_digest

    path = tmp_path / "ws" / ".crystal" / "mcp.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"mcpServers": {"s": {"command": "npx", "args": ["-y", "server", "${HOME}/x"]}}}))
    assert file_digest("mcp", path) == bytes_digest(path).sha256


async def test_crystal_acp_opened_in_a_hostile_repository_runs_and_leaks_nothing(tmp_path):
    """TRUST-2, TRUST-4: the same protections hold behind the ACP front (they are at the
    one place each file is read, not in a front). A real `crystal acp`, started by the
    ACP SDK's client in a repository holding an untrusted mcp.json, a planted plugin and
    an AGENTS.md linked to /proc/self/environ, answers a turn; nothing ran and the
    model server never saw the person's token."""
    from tests.acp.harness import RecordingClient, crystal_acp

    repo = tmp_path / "repo"
    repo.mkdir()
    markers = tmp_path / "markers"
    markers.mkdir()
    plant_plugin(repo, markers)
    write_mcp(repo / ".crystal")
    (repo / "AGENTS.md").symlink_to("/proc/self/environ")
    token = "ghp_" + "AcpPersonToken0815"
    client = RecordingClient()
    with LLMServer([{"text": "Hello from the model."}]) as server:
        async with crystal_acp(client, server, cwd=repo, env_extra={"GITHUB_TOKEN": token}) as (conn, _proc, _init):
            sid = (await conn.new_session(cwd=str(repo))).session_id
            response = await conn.prompt(session_id=sid, prompt=[{"type": "text", "text": "hi"}])
        sent = json.dumps(server.requests)
    assert response.stop_reason == "end_turn"
    assert server.bodies("chat"), "the turn reached the model server"
    assert token not in sent, "the person's environment reached the model"
    assert not (repo / "ran-here").exists(), "the untrusted mcp.json started its server"
    assert sorted(p.name for p in markers.iterdir()) == [], "the planted plugin was loaded"
