"""`modelImages` (config.json): a model whose name the capability table does not know
(a local `my-model` behind an OpenAI-compatible server) is guessed text-only; the key
says otherwise. Through `crystal run` against the loopback model server, with a Home
exec tool `plot` that answers an image: with `true` the image reaches the server as an
image part (EX-12's image-capable turn); with `false` (and unset) the tool result is
EX-12's exact refusal and no image is sent."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crystal_kernel.testing.llm_server import LLMServer

CRYSTAL = str(Path(sys.executable).parent / "crystal")
# A 1x1 PNG.
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")


# An exec tool set in the Home (no trust needed): `plot` prints one PNG as its result.
PLOT = ("import json, sys; json.load(sys.stdin); "
        "print(json.dumps({'text': 'plotted', 'images': [{'mimeType': 'image/png', 'base64': "
        + repr(base64.b64encode(PNG).decode()) + "}]}))")


def run_with(workspace: Path, home: Path, config: dict) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    (home / "tools" / "charts").mkdir(parents=True)
    (home / "tools" / "charts" / "tools.json").write_text(json.dumps(
        {"command": [sys.executable, "-c", PLOT], "tools": [{"name": "plot"}]}))
    (home / "config.json").write_text(json.dumps({**config, "topicNaming": False, "contextWindow": 8192}))
    replies = [{"tool_calls": [{"name": "plot", "arguments": {}}]}, {"text": "A dot."}]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRYSTAL_")}
    env.update(HOME=str(home.parent), CRYSTAL_HOME=str(home), OPENAI_API_KEY="sk-test")
    with LLMServer(replies) as server:
        out = subprocess.run([CRYSTAL, "run", "plot it", "--workspace", str(workspace),
                              "--provider", "openai", "--base-url", server.base_url, "--model", "my-model",
                              "--approval", "full"], capture_output=True, text=True, env=env, timeout=60)
        bodies = server.bodies("chat")
    assert out.returncode == 0, out.stderr
    assert len(bodies) == 2, bodies
    return out, bodies[1]["messages"]


def image_parts(messages: list[dict]) -> list[dict]:
    return [part for m in messages if isinstance(m.get("content"), list)
            for part in m["content"] if part.get("type") == "image_url"]


def test_model_images_true_sends_a_tool_image_to_an_unknown_model(workspace, private_home):
    out, messages = run_with(workspace, private_home, {"modelImages": True})
    parts = image_parts(messages)
    assert len(parts) == 1, messages
    assert parts[0]["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert "cannot accept tool images" not in json.dumps(messages)
    assert out.stdout.strip() == "A dot."


@pytest.mark.parametrize("config", [{"modelImages": False}, {}], ids=["false", "unset"])
def test_model_images_false_or_unset_gives_an_unknown_model_the_ex12_text(config, workspace, private_home):
    _out, messages = run_with(workspace, private_home, config)
    assert image_parts(messages) == [], messages
    tool = [m for m in messages if m["role"] == "tool"]
    assert len(tool) == 1 and "This model cannot accept tool images." in json.dumps(tool[0]), messages


def test_model_images_must_be_true_false_or_null(workspace, private_home):
    (private_home / "config.json").write_text(json.dumps({"modelImages": "yes"}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRYSTAL_")}
    env.update(HOME=str(private_home.parent), CRYSTAL_HOME=str(private_home))
    out = subprocess.run([CRYSTAL, "run", "hi", "--workspace", str(workspace)], capture_output=True, text=True,
                         env=env, timeout=60)
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [
        "crystal: Config key 'modelImages' must be true, false or null (guessed from the model's name), not 'yes'."], out
    assert list(workspace.iterdir()) == []
