"""core/secrets.py, second hand-mutation pass (``M4-..`` rows of
docs/mutants.md; TRUST-4). A key is redacted from what the host saves: down to 4
characters where the key stays in the environment (the ``%crystal`` magics in the
person's own kernel), and anywhere from 8 characters on, inside longer tokens too.
Real fronts: a stock ipykernel with ``%load_ext crystal_kernel``, and ``crystal run``,
both on the loopback model server; the test reads the saved journal."""

from __future__ import annotations

import re

from crystal_kernel.testing.llm_server import LLMServer
from tests.magics.conftest import start_python_kernel
from tests.security.test_trust4_short_keys import turn_with_key


def _journal(workspace) -> str:
    (journal,) = (workspace / ".crystal" / "sessions").glob("*.jsonl")
    return journal.read_text(encoding="utf-8")


def test_a_four_character_key_kept_in_the_environment_is_redacted__M4_92(tmp_path):
    """The magics leave the person's kernel its key variables (its own cells may use
    them): the 4-character key is in os.environ, not withdrawn, and is still redacted
    from the session file."""
    key = "k3Y9"
    with LLMServer([{"text": f"The token is {key}."}]) as server:
        kernel = start_python_kernel(tmp_path, server, env_extra={"OPENAI_API_KEY": key})
        try:
            run = kernel.run(f"%crystal Is {key} the token?")
            assert run.status == "ok", run.texts()
            kept = kernel.run("import os; print(os.environ.get('OPENAI_API_KEY'))")
            assert kept.streams == f"{key}\n"  # the person's kernel keeps it (keys="person_keeps")
            assert server.requests[-1]["headers"].get("authorization") == f"Bearer {key}"
        finally:
            kernel.stop()
    saved = _journal(kernel.workspace)
    assert not re.search(rf"(?<![A-Za-z0-9_\-]){key}(?![A-Za-z0-9_\-])", saved), saved
    assert saved.count("[redacted OPENAI_API_KEY]") >= 2, saved  # the prompt and the answer


def test_an_eight_character_key_inside_a_longer_token_is_redacted__M4_93(workspace):
    """From 8 characters on a key is redacted wherever it stands: in `k3Y9abcdzz` (a
    `Bearer_k3Y9abcd_x` header dumped by a tool) it would otherwise reach the session
    file."""
    saved = turn_with_key(workspace, "k3Y9abcd")
    assert "k3Y9abcd" not in saved, saved
    assert "[redacted OPENAI_API_KEY]zz" in saved
