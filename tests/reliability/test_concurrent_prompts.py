"""Several processes on one Home and workspace enable prompt sets and attachments at the
same moment (as two kernels' /promptset and /promptattach, or `crystal promptsets
enable`, would): every prompt.json ends valid with its unknown fields kept, at most one
set is enabled (PS-5) — exactly the one a process enabled last — and the enabled
attachments have distinct order numbers (PA-5). The prompts code serialises these
read-modify-write steps with a file lock (prompts/manifest.py: manifest_lock)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

WORKER = r'''
import random, sys, time
from pathlib import Path
from crystal_kernel.core.errors import UserError
from crystal_kernel.prompts.attachments import discover_attachments
from crystal_kernel.prompts.commands import apply_attachment_action
from crystal_kernel.prompts.promptsets import enable_set, disable_sets

home, workspace, start, seed = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
sets = ["alpha", "beta", "gamma", "delta"]
attachments = ["a1", "a2", "a3", "a4", "w1", "w2"]
while not start.exists():
    time.sleep(0.001)
for i in range(200):
    roll = rng.random()
    try:
        if roll < 0.35:
            enable_set(home, rng.choice(sets))
        elif roll < 0.4:
            disable_sets(home)
        else:
            action = rng.choice(["enable", "enable", "disable", "up", "down"])
            apply_attachment_action(discover_attachments(home, workspace, []), action, rng.choice(attachments))
    except UserError:
        pass  # "already first", "not enabled": refusals a person could also get
enable_set(home, sets[seed % len(sets)])
print(sets[seed % len(sets)], time.monotonic(), flush=True)
'''


def make_folder(root: Path, name: str, files: dict[str, str]) -> None:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "prompt.json").write_text(json.dumps({"name": name.title(), "keep": {"unknown": name}}))
    for file, text in files.items():
        (folder / file).write_text(text)


def test_concurrent_enables_leave_valid_consistent_manifests(tmp_path):
    home, workspace = tmp_path / "home", tmp_path / "ws"
    for name in ("alpha", "beta", "gamma", "delta"):
        make_folder(home / "promptsets", name, {"work.md": f"{name} work text"})
    for name in ("a1", "a2", "a3", "a4"):
        make_folder(home / "prompt-attachments", name, {"work.md": f"{name} attachment"})
    for name in ("w1", "w2"):
        make_folder(workspace / ".crystal" / "prompt-attachments", name, {"work.md": f"{name} attachment"})
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER)
    start = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, str(worker), str(home), str(workspace), str(start), str(seed)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for seed in range(4)]
    time.sleep(0.8)  # all four have imported and wait for the start signal
    start.write_text("go")
    finished = []
    for proc in procs:
        out, err = proc.communicate(timeout=90)
        assert proc.returncode == 0, err[-2000:]
        name, when = out.split()
        finished.append((float(when), name))

    manifests = {p.parent.name: json.loads(p.read_text()) for p in
                 [*home.rglob("prompt.json"), *workspace.rglob("prompt.json")]}
    assert len(manifests) == 10
    for name, data in manifests.items():
        assert data["keep"] == {"unknown": name}, f"{name}: unknown fields lost"
    sets = {n: d for n, d in manifests.items() if n in ("alpha", "beta", "gamma", "delta")}
    enabled_sets = [n for n, d in sets.items() if d.get("enabled") is True]
    assert enabled_sets == [max(finished)[1]], f"enabled sets {enabled_sets}, last enable {max(finished)}"
    orders = [d["order"] for n, d in manifests.items() if n not in sets and d.get("enabled") is True]
    assert len(orders) == len(set(orders)), f"enabled attachments share order numbers: {sorted(orders)}"
    assert all(isinstance(o, int) for o in orders)
    leftovers = [p for p in tmp_path.rglob("*.tmp")]
    assert not leftovers, leftovers
