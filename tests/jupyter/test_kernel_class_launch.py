"""Crystal's kernel class started the way Enterprise Gateway's Python launcher starts a
kernel (docs/deploy.md): ``IPKernelApp`` with ``kernel_class`` set, not ``python -m
crystal_kernel.jupyter``. Crystal's flags then come from ``CRYSTAL_ARGS`` (FL-1), and a
cell is a turn as usual."""

from __future__ import annotations

import json
import sys

from crystal_kernel.jupyter.driver import KernelDriver


def test_the_kernel_class_alone_reads_its_flags_from_crystal_args(tmp_path, llm_server):
    from tests.jupyter.conftest import kernel_env, make_home, start_own_spec

    home = make_home(tmp_path)
    team = home / ".crystal" / "promptsets" / "team"
    team.mkdir(parents=True)
    (team / "prompt.json").write_text(json.dumps({"name": "Team rules"}))
    (team / "work.md").write_text("Follow the team rules.\n")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = kernel_env(home, llm_server, str(workspace / "a.ipynb"), {"CRYSTAL_ARGS": "--prompt-set team"})
    km, kc = start_own_spec(tmp_path, "crystal_launcher", [
        sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
        "--IPKernelApp.kernel_class=crystal_kernel.jupyter.kernel.CrystalKernel"], "Crystal (launcher)", env, workspace)
    try:
        kc.wait_for_ready(timeout=60)
        info = kc.kernel_info(reply=True, timeout=30)["content"]
        assert info["implementation"] == "crystal" and info["crystal"]["promptSet"] == "team"
        llm_server.clear()
        llm_server.add({"text": "Following them."})
        run = KernelDriver(kc).execute("Which rules?")
        assert run.status == "ok" and "Following them." in run.texts()
        assert llm_server.bodies("chat")[-1]["messages"][0]["content"].startswith("Follow the team rules.")
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
