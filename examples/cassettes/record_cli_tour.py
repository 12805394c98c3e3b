"""Author the CLI tour's cassette: a scripted model run, recorded once.

The replies below are written by hand to read like a real model's work. They are
served by the loopback model server (OpenAI Chat Completions protocol) while
`crystal run` records every interaction to examples/cassettes/cli-tour.json; `make demo`
then replays that cassette offline, with every tool running for real.

    .venv/bin/python examples/cassettes/record_cli_tour.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from crystal_kernel.testing.llm_server import LLMServer

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parent / "sample-project"
CASSETTE = HERE / "cli-tour.json"
PROMPT = "One of the tests in this project fails. Find out why and fix it."

OLD = "        total += item.price\n"
NEW = "        total += item.price * item.quantity\n"

REPLIES = [
    {"text": "I'll start by looking at how the project is laid out.",
     "tool_calls": [{"id": "call_tree", "name": "tree", "arguments": {}}]},
    {"text": "Let me run the tests to see which one fails.",
     "tool_calls": [{"id": "call_test1", "name": "bash", "arguments": {"command": "python3 -m unittest -v 2>&1 | tail -15"}}]},
    {"text": "`test_total_value` expects 64.0. Let me read `total_value`.",
     "tool_calls": [{"id": "call_read", "name": "read", "arguments": {"path": "inventory.py"}}]},
    {"text": "Found it: `total_value` adds each item's price once and ignores the quantity in stock. "
             "The value of the stock is price × quantity.",
     "tool_calls": [{"id": "call_edit", "name": "edit",
                     "arguments": {"path": "inventory.py", "old_string": OLD, "new_string": NEW}}]},
    {"text": "Now the tests again.",
     "tool_calls": [{"id": "call_test2", "name": "bash", "arguments": {"command": "python3 -m unittest -v 2>&1 | tail -6"}}]},
    {"text": "Both tests pass now.\n\n**The cause:** `total_value` summed `item.price` and ignored "
             "`item.quantity`, so 100 bolts counted as one. **The fix:** multiply price by quantity "
             "(`inventory.py`, one line). The expected total is 100 × 0.25 + 2 × 4.5 + 1 × 30.0 = 64.0."},
]


# After the first turn the host asks the topic prompt for the session's name (PH-11).
TOPIC = {"text": "Fix total_value ignoring item quantity", "usage": {"input_tokens": 900, "output_tokens": 9}}

# Token counts as a real model would report them: the prompt grows every step.
for _step, _reply in enumerate(REPLIES):
    _reply["usage"] = {"input_tokens": 3900 + 420 * _step, "output_tokens": 60 + 15 * _step}


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp, LLMServer([*REPLIES, TOPIC]) as server:
        work = Path(tmp) / "project"
        shutil.copytree(PROJECT, work)
        if CASSETTE.exists():
            CASSETTE.unlink()
        env = dict(os.environ, CRYSTAL_PROVIDER="openai", CRYSTAL_BASE_URL=server.base_url,
                   CRYSTAL_MODEL="gpt-4.1", OPENAI_API_KEY="recording", CRYSTAL_CASSETTE=str(CASSETTE),
                   CRYSTAL_HOME=str(Path(tmp) / "home"))
        (Path(tmp) / "home").mkdir()
        (Path(tmp) / "home" / "config.json").write_text('{"record": true}\n')
        crystal = Path(sys.executable).parent / "crystal"
        out = subprocess.run([str(crystal), "run", PROMPT, "--workspace", str(work), "--approval", "full"],
                             env=env, text=True)
        return out.returncode


if __name__ == "__main__":
    sys.exit(main())
