"""`/usage` and the turn's status line (the card header) count the same tokens, in the
real Crystal kernel against the loopback model server. The header counts the session's
input + output tokens; `/usage` said only "20383 input + 285 output tokens", so a person
compared 20,383 with the header's 20,668. `/usage` now leads with the same total, in the
header's words and digits, then its parts."""

from __future__ import annotations

import re

SHOWN = re.compile(r"· ([\d,]+) tokens$")


def test_usage_states_the_total_the_status_line_shows(kernel):
    kernel.server.add({"text": "Read it all.", "usage": {"input_tokens": 20_383, "output_tokens": 285}})
    turn = kernel.run("Read the whole project")
    assert turn.status == "ok", turn.texts()
    header = SHOWN.search(turn.outputs()[0]["text/plain"])
    assert header is not None, turn.outputs()[0]
    usage = kernel.run("/usage")
    assert usage.status == "ok", usage.texts()
    first = "\n".join(usage.texts()).splitlines()[0]
    total = int(header.group(1).replace(",", ""))
    # The same number, written the same way, and what it is made of.
    match = re.search(r": ([\d,]+) tokens \(([\d,]+) input \+ ([\d,]+) output\)", first)
    assert match is not None and match.group(1) == header.group(1), (first, header.group(0))
    assert int(match.group(2).replace(",", "")) + int(match.group(3).replace(",", "")) == total

    # The next turn's header starts from the total /usage gave.
    kernel.server.add({"text": "Again."})
    again = kernel.run("Once more")
    shown_first = next(m for m in again.messages if m["msg_type"] == "display_data")["content"]["data"]["text/plain"]
    assert SHOWN.search(shown_first).group(1) == header.group(1), shown_first
