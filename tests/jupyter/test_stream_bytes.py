"""A long streamed answer in a real kernel, with the front JupyterLab is when Crystal's
extension is loaded (it opens ``crystal.live`` with ``streamDeltas``): the bytes the
kernel publishes on iopub stay near the answer's length, the final output is the same
sanitized rendering (TRUST-1), and a page reloaded mid-stream gets the whole HTML so
far (FORM-2)."""

from __future__ import annotations

import json
import time

from crystal_kernel.jupyter.safe_html import markdown_html
from crystal_kernel.jupyter.stream_html import STREAM_MIME, apply_update

WORDS = 6000


def long_answer() -> str:
    return "".join(("\n" if i and i % 50 == 0 else "") + " word" for i in range(WORDS)) + " finalword."


def lab_front(kernel) -> None:
    """Open crystal.live as the lab extension does on connecting, and let it answer."""
    kernel.driver.open_comm("crystal.live", {"streamDeltas": True})
    kernel.driver.drain(1.0)


def test_iopub_bytes_of_a_long_streamed_answer_stay_near_its_length(kernel_factory):
    """TRUST-1: the final output is the same sanitized HTML; live updates carry only how
    the HTML of the text so far changed, so the whole cell's iopub content is under 2.2x
    the answer's length plus a small constant (each update re-sent the whole answer
    before: ~26x)."""
    k = kernel_factory.start()
    lab_front(k)
    text = long_answer()
    k.server.add({"text": text, "chunk": 5})
    run = k.run("Write the long answer.", timeout=180, cell_id="cell-long")
    assert run.status == "ok", run.texts()
    total = sum(len(json.dumps(m["content"])) for m in run.messages)
    assert total <= 2.2 * len(text) + 6000, (total, len(text))
    deltas = [m for m in run.messages
              if m["msg_type"] in ("display_data", "update_display_data") and STREAM_MIME in m["content"]["data"]]
    assert len(deltas) >= 2, "the answer was not streamed live"
    answer = next(d for d in run.outputs() if "crystal-answer" in str(d.get("text/html", "")))
    assert answer["text/html"] == markdown_html(text)
    assert len(answer["text/plain"]) < 400
    # What a reader of the output gets (the notebook tools, the driver): the answer's text.
    shown = [t for t in run.texts() if "finalword." in t]
    assert shown and shown[0].split() == text.split()


def test_a_page_reloaded_mid_stream_gets_the_whole_html_so_far(kernel_factory):
    """FORM-2: the extension opens crystal.live again on reload; the kernel shows the
    running answer again as the whole HTML of its text so far, and the next updates
    apply to it."""
    k = kernel_factory.start()
    lab_front(k)
    text = long_answer()
    k.server.add({"text": text, "chunk": 5, "delay": 0.0005})
    state: dict = {"reopened": False, "snapshot": None, "after": []}

    def hook(msg, driver):
        if msg is None or msg["msg_type"] not in ("display_data", "update_display_data"):
            return
        data = msg["content"]["data"]
        if STREAM_MIME not in data:
            return
        delta = data[STREAM_MIME]
        if not state["reopened"] and delta["at"] > 4000:
            state["reopened"] = True
            driver.open_comm("crystal.live", {"streamDeltas": True})
        elif state["reopened"] and state["snapshot"] is None and msg["msg_type"] == "display_data":
            state["snapshot"] = delta
        elif state["snapshot"] is not None:
            state["after"].append(delta)

    started = time.monotonic()
    run = k.run("Write the long answer.", timeout=180, cell_id="cell-reload", on_message=hook)
    assert run.status == "ok", run.texts()
    snap = state["snapshot"]
    assert snap is not None, f"no whole text shown again ({time.monotonic() - started:.1f} s)"
    html = apply_update("", snap)
    assert snap["at"] == 0 and html is not None and len(html) > 4000
    assert html.startswith('<div class="crystal-answer') and " word word" in html
    # The updates after it apply to it in turn (none missing between them).
    assert state["after"]
    before = len(html)
    for delta in state["after"]:
        html = apply_update(html, delta)
        assert html is not None
    assert len(html) > before and markdown_html(text).startswith(html[:-len("</p>\n</div>")])
