"""`make demo`: the product's main job, offline.

Copies the sample project to build/demo/project and runs the agent on it with the
replay provider and the shipped cassette: the model's replies are recorded, every tool
(tree, bash, read, edit) runs for real on real files. Needs no API key and no network.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build" / "demo"
PROMPT = "One of the tests in this project fails. Find out why and fix it."


def run_cli_tour() -> int:
    project = BUILD / "project"
    if project.exists():
        shutil.rmtree(project)
    shutil.copytree(ROOT / "examples" / "sample-project", project)
    home = BUILD / "home"
    home.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, CRYSTAL_HOME=str(home), CRYSTAL_PROVIDER="replay",
               CRYSTAL_CASSETTE=str(ROOT / "examples" / "cassettes" / "cli-tour.json"))
    for var in ("CRYSTAL_MODEL", "CRYSTAL_BASE_URL", "CRYSTAL_API_KEY_ENV", "CRYSTAL_APPROVAL"):
        env.pop(var, None)
    crystal = Path(sys.executable).parent / "crystal"
    print(f"$ crystal run {PROMPT!r} --workspace {project.relative_to(ROOT)} --approval full\n", flush=True)
    code = subprocess.call([str(crystal), "run", PROMPT, "--workspace", str(project), "--approval", "full"], env=env)
    if code != 0:
        print(f"\nThe CLI tour failed (exit {code}).", file=sys.stderr)
        return code
    check = subprocess.run([sys.executable, "-m", "unittest", "-q"], cwd=project, capture_output=True, text=True)
    print("\nThe sample project's tests after the agent's fix:", "pass" if check.returncode == 0 else "FAIL")
    sessions = sorted((project / ".crystal" / "sessions").glob("*.json"))
    if sessions:
        print(f"The session document: {sessions[-1].relative_to(ROOT)}")
    return check.returncode


def main() -> int:
    BUILD.mkdir(parents=True, exist_ok=True)
    code = run_cli_tour()
    if code == 0:
        print(f"\nDone. Everything the demo wrote is in {BUILD.relative_to(ROOT)}/.")
    return code


if __name__ == "__main__":
    sys.exit(main())
