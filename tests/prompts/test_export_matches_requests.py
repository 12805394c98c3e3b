"""``crystal prompts export NAME`` is the text the model receives (SPEC §11), for every
named prompt: real ``crystal run`` processes drive a session through a turn, an image
description, a review, topic naming, compaction and a Plan turn against the loopback
server, and each request's system (and user) text equals the export made with the same
Home, workspace and flags — with a skill in Home, an instruction file, an attachment and
a disabled tool, so the skills block and the rest of the session context are covered.

What an export cannot know stays a token there and is matched as "anything": the per-call
slots (PH-7) and the new session's id. Local times differ by the seconds between the two
processes and are compared as times."""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
import zlib
from pathlib import Path

from crystal_kernel.prompts.names import EXTRA_SLOTS, NAMED_PROMPTS
from crystal_kernel.testing.llm_server import LLMServer

CRYSTAL = str(Path(sys.executable).parent / "crystal")
FLAGS = ["--approval", "review", "--disable-tool", "bash_start"]
TIME = re.compile(r"\d{4}-\d{2}-\d{2}|\d{2}:\d{2}:\d{2} [+-]\d{2}:\d{2}")
VERDICT = json.dumps({"risk_level": "low", "user_authorization": "high", "harm_unrequested": False,
                      "rationale": "the person asked for it"})


def png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b""))


def crystal(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    out = subprocess.run([CRYSTAL, *args], capture_output=True, text=True, env=env, timeout=90)
    assert out.returncode == 0, (args, out.stderr)
    return out


def as_pattern(exported: str, name: str) -> re.Pattern[str]:
    """The export as a pattern: per-call slots and the session id match anything. A slot
    bound to "" leaves no blank lines (compose.tidy), so the blank space around a slot
    matches any blank space."""
    wild = (*EXTRA_SLOTS.get(name, ()), "session_id")
    pieces = re.split(r"\{\{(?:" + "|".join(wild) + r")\}\}", TIME.sub("@T@", exported))
    inner = [re.escape(p.strip("\n")) for p in pieces[1:-1]]
    parts = [re.escape(pieces[0].rstrip("\n")), *inner, re.escape(pieces[-1].lstrip("\n"))] if len(pieces) > 1 \
        else [re.escape(pieces[0])]
    return re.compile(r"\s*(.*?)\s*".join(parts), re.DOTALL)


def texts(body: dict) -> tuple[str, str]:
    """(system text, the last user message's text) of a Chat Completions request."""
    system = body["messages"][0]
    assert system["role"] == "system"
    user = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    if isinstance(user, list):
        user = "".join(p.get("text", "") for p in user if p.get("type") == "text")
    return system["content"], user


def test_export_equals_what_the_model_receives_for_every_named_prompt(private_home, workspace):
    skill = private_home / "skills" / "release-notes"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: release-notes\ndescription: Write release notes from the "
                                    "git log.\n---\nRead the log, group by feature.\n")
    attachment = private_home / "prompt-attachments" / "house-style"
    attachment.mkdir(parents=True)
    (attachment / "prompt.json").write_text('{"enabled": true}')
    for mode in ("work", "plan", "review"):
        (attachment / f"{mode}.md").write_text(f"House style for {{{{model}}}} in {mode}.\n")
    (workspace / "AGENTS.md").write_text("Run the tests before you say done.\n")
    (workspace / "pic.png").write_bytes(png())

    replies = [
        {"tool_calls": [{"name": "describe_image", "arguments": {"path": "pic.png"}}]},
        {"text": "One red pixel."},                                        # image
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo checked"}}]},
        {"text": VERDICT},                                                 # review
        {"text": "It is a red pixel; echo ran."},
        {"text": "Red pixel check"},                                       # topic
        {"text": "Noted."},
        {"text": "## Summary\nA red pixel was described and echo ran."},    # compaction
        {"text": "1. Nothing else to do."},                                # plan
    ]
    with LLMServer(replies) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CRYSTAL_", "OPENAI"))}
        env.update(CRYSTAL_HOME=str(private_home), CRYSTAL_PROVIDER="openai", CRYSTAL_MODEL="gpt-4.1",
                   CRYSTAL_BASE_URL=server.base_url, OPENAI_API_KEY="sk-test")  # topic naming on
        ws = ["--workspace", str(workspace)]
        crystal(env, "run", "Describe pic.png, then run echo checked.", *ws, *FLAGS, "--session", "s1")
        crystal(env, "run", "Thanks.", *ws, *FLAGS, "--session", "s1")
        crystal(env, "run", "/compact", *ws, *FLAGS, "--session", "s1")
        crystal(env, "run", "What is left?", *ws, *FLAGS, "--session", "s1", "--mode", "plan")
        bodies = server.bodies("chat")
        exports = {}
        for name in NAMED_PROMPTS:
            mode = ["--mode", "plan"] if name == "plan" else []
            exports[name] = crystal(env, "prompts", "export", name, *ws, *FLAGS, *mode).stdout
    assert len(bodies) == len(replies)

    sent = {
        "work": texts(bodies[0])[0], "image.system": texts(bodies[1])[0], "image.user": texts(bodies[1])[1],
        "review": texts(bodies[3])[0], "review.user": texts(bodies[3])[1], "topic": texts(bodies[5])[0],
        "compaction.system": texts(bodies[7])[0], "compaction.user": texts(bodies[7])[1],
        "plan": texts(bodies[8])[0],
    }
    assert sorted(sent) == sorted(NAMED_PROMPTS)
    for name, text in sent.items():
        assert as_pattern(exports[name], name).fullmatch(TIME.sub("@T@", text)), (
            f"{name}: the export differs from the request\n--- export\n{exports[name]}\n--- request\n{text}")
    # The session context is really there, in export and request alike.
    assert "release-notes: Write release notes from the git log." in exports["work"]
    assert "release-notes" in exports["plan"]
    assert "Run the tests before you say done." in exports["work"]
    assert "House style for gpt-4.1 in work." in exports["work"]
    assert "House style for gpt-4.1 in review." in exports["review"]
    assert "bash_start" in exports["work"]  # MODE-7: the disabled-tools note
    assert "{{session_id}}" not in sent["work"]
