"""TRUST-4: a key value is redacted from what the host persists whatever its length,
down to 4 characters; a value shorter than 8 is replaced where it stands as a whole
token (so a longer word that merely contains it is kept), and 1-3 characters are a
placeholder, not a secret (core/secrets.py and docs/security.md say why).

A real ``crystal run`` against the loopback model server saves the session; the test
greps the journal file.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from crystal_kernel.core.secrets import mask_bytes, redact_text
from crystal_kernel.testing.llm_server import LLMServer

CRYSTAL = str(Path(sys.executable).parent / "crystal")


def turn_with_key(workspace: Path, key: str) -> str:
    """A turn whose prompt, file read and answer all hold ``key``; the saved journal."""
    (workspace / "notes.txt").write_text(f"token: {key}\nlonger word: {key}zz\n")
    replies = [{"tool_calls": [{"name": "read", "arguments": {"path": "notes.txt"}}]},
               {"text": f"The token is {key}."}]
    with LLMServer(replies) as server:
        env = {**os.environ, "CRYSTAL_PROVIDER": "openai", "CRYSTAL_MODEL": "gpt-test",
               "CRYSTAL_BASE_URL": server.base_url, "OPENAI_API_KEY": key}
        out = subprocess.run([CRYSTAL, "run", f"Is {key} in notes.txt?", "--workspace", str(workspace)],
                             capture_output=True, text=True, env=env, timeout=60)
        sent = server.requests[-1]["headers"].get("authorization")
    assert out.returncode == 0, out.stderr
    assert sent == f"Bearer {key}"  # the key itself worked
    journals = list((workspace / ".crystal" / "sessions").glob("*.jsonl"))
    assert len(journals) == 1
    return journals[0].read_text(encoding="utf-8")


@pytest.mark.parametrize("key", ["k3Y9", "k3Y9z", "sk-k3Y9"])
def test_a_short_key_is_redacted_from_the_saved_session(workspace: Path, key: str) -> None:
    saved = turn_with_key(workspace, key)
    assert not re.search(rf"(?<![A-Za-z0-9_\-]){re.escape(key)}(?![A-Za-z0-9_\-])", saved), saved
    # prompt, tool result and answer: each place it stood is redacted
    assert saved.count("[redacted OPENAI_API_KEY]") >= 3, saved
    assert f"{key}zz" in saved  # a longer word that contains it is not a key


def test_a_placeholder_of_three_characters_is_not_treated_as_a_secret(workspace: Path) -> None:
    """OPENAI_API_KEY=abc for a local server that checks no key: the transcript keeps
    every standalone "abc" (masking would corrupt what is sent back on resume)."""
    saved = turn_with_key(workspace, "abc")
    assert "[redacted" not in saved
    assert "The token is abc." in saved


def test_short_values_are_masked_as_whole_tokens_in_job_logs() -> None:
    secrets = [("OPENAI_API_KEY", "k3Y9z")]
    assert mask_bytes(b"key=k3Y9z; k3Y9zz; xk3Y9z; k3Y9z\n", secrets) == b"key=*****; k3Y9zz; xk3Y9z; *****\n"
    assert redact_text("a k3Y9z b", secrets) == "a [redacted OPENAI_API_KEY] b"
    long = [("OPENAI_API_KEY", "sk-0123456789")]
    assert redact_text("xsk-0123456789y", long) == "x[redacted OPENAI_API_KEY]y"  # 8+: anywhere
