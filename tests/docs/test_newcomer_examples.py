"""Examples a newcomer copies from the docs do what they say: docs/contributing.md's
`pytest … -k NAME` selects tests (its `-k resume` selected none), and docs/models.md says
to activate `.venv` before its first bare `crystal` command."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_k_example_in_contributing_selects_tests():
    text = (ROOT / "docs" / "contributing.md").read_text()
    examples = re.findall(r"`\.venv/bin/python -m pytest ([^`]*-k [^`]*)`", text)
    assert examples, "docs/contributing.md shows no -k example"
    for example in examples:
        args = [a for a in shlex.split(example) if a not in ("-x", "-q")]
        out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q", *args],
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
        # pytest exits 5 when a -k selects nothing.
        assert out.returncode == 0 and "no tests collected" not in out.stdout, (example, out.stdout[-500:])


def test_models_says_to_activate_the_venv_before_its_first_crystal_command():
    text = (ROOT / "docs" / "models.md").read_text()
    first_command = re.search(r"^crystal ", text, re.M)
    assert first_command
    assert "source .venv/bin/activate" in text[: first_command.start()]
