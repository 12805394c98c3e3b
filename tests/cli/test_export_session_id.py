"""`crystal prompts export work` (SPEC §11) prints the text as the model receives it; the
new session's id is not known yet, so `{{session_id}}` stays, and one note on stderr
says what it stands for (a person reading `Session: {{session_id}}` took it for a fault)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CRYSTAL = str(Path(sys.executable).parent / "crystal")


def test_export_says_what_the_session_id_token_stands_for(workspace):
    out = subprocess.run([CRYSTAL, "prompts", "export", "work", "--workspace", str(workspace)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "Session: {{session_id}}" in out.stdout  # stdout stays the exact text
    notes = [line for line in out.stderr.splitlines() if "{{session_id}}" in line]
    assert notes == ["note: {{session_id}} stands for the session's id, which a session gets when it starts "
                     "(e.g. 20261207-205909-a1b2c3); the rest is the text as the model receives it."], out.stderr
    assert list(workspace.iterdir()) == []
