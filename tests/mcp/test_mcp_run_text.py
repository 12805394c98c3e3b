"""An MCP tool's images, progress and audience-annotated content through the real
`crystal run` command (text mode), a real stdio MCP server child process and the
loopback model server, which records what the model received."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from mcp_support import stdio_entry, write_config

from crystal_kernel.testing.llm_server import LLMServer

CRYSTAL = str(Path(sys.executable).parent / "crystal")


def run_text(prompt: str, replies: list, workspace: Path) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """`crystal run` in text mode: the finished process and the model requests' bodies."""
    with LLMServer(replies) as server:
        env = dict(os.environ, CRYSTAL_PROVIDER="openai", CRYSTAL_BASE_URL=server.base_url,
                   CRYSTAL_MODEL="gpt-4o", OPENAI_API_KEY="sk-test")
        out = subprocess.run([CRYSTAL, "run", prompt, "--workspace", str(workspace), "--approval", "full"],
                             capture_output=True, text=True, env=env, timeout=90, stdin=subprocess.DEVNULL)
        return out, server.bodies("chat")


def test_text_mode_marks_an_image_and_shows_progress(home, workspace):
    """The terminal cannot show an image: a marker says one came back (type, size); an
    MCP tool's progress notifications show while it runs."""
    write_config(home / "mcp.json", {"demo": stdio_entry()})
    replies = [
        {"tool_calls": [{"name": "demo_picture", "arguments": {}}]},
        {"tool_calls": [{"name": "demo_steps", "arguments": {"count": 3}}]},
        {"text": "Done."},
    ]
    out, _ = run_text("draw, then count", replies, workspace)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Done."
    lines = out.stderr.splitlines()
    result = lines.index("✓ demo_picture a png picture")
    assert lines[result + 1] == "  [image: image/png, 24 bytes]", out.stderr
    # The first report is shown at once; the later ones, 50 ms apart, fold into it.
    assert "… demo_steps 1/3: step 1" in lines, out.stderr
    assert lines.index("… demo_steps 1/3: step 1") < lines.index("✓ demo_steps 3 steps done")


def test_audience_user_content_is_shown_not_sent_and_assistant_content_sent_not_shown(home, workspace):
    """MCP ``audience`` annotations: a block for ["user"] (a text and an image) is shown
    to the person and never reaches the model; a block for ["assistant"] reaches the
    model and is not shown; a block without an audience goes to both."""
    write_config(home / "mcp.json", {"demo": stdio_entry()})
    replies = [{"tool_calls": [{"name": "demo_audience", "arguments": {}}]}, {"text": "Read it."}]
    out, bodies = run_text("look at the table", replies, workspace)
    assert out.returncode == 0, out.stderr
    # What the person saw.
    assert "✓ demo_audience for everyone: 3 rows" in out.stderr
    assert "for the person only: the raw table" in out.stderr
    assert "[image: image/png, 24 bytes]" in out.stderr
    assert "for the model only" not in out.stderr + out.stdout
    # What the model received: the follow-up request carries the result.
    assert len(bodies) == 2
    sent = json.dumps(bodies[1]["messages"])
    assert "for everyone: 3 rows" in sent and "rows are sorted by date" in sent
    assert "for the person only" not in sent and "the raw table" not in sent
    assert "image/png" not in sent and "data:image" not in sent  # the person's image stayed here
    assert "1 content block" not in sent and "2 content blocks of this result shown to the person only" in sent
