"""Turns in the real Crystal kernel: status line, streamed Markdown, tool cards, the
python/variables tools, @path attachments and Tab completion."""

from __future__ import annotations

import base64
import struct
import zlib

from crystal_kernel.jupyter.driver import click


def tiny_png() -> bytes:
    """A valid 2x2 red PNG, built by hand (no imaging library needed)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    raw = b"".join(b"\x00" + b"\xff\x00\x00" * 2 for _ in range(2))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def test_streamed_answer_is_one_markdown_display_throttled(kernel):
    text = "# Title\n\n" + " ".join(f"word{i}" for i in range(150))
    kernel.server.add({"text": text, "chunk": 2, "delay": 0.004})
    run = kernel.run("Tell me something long")
    assert run.status == "ok"
    status = run.outputs()[0]["text/plain"]
    assert status.startswith("Crystal · work · approval default · openai:gpt-4.1 · prompts default ·")
    markdown = [k for k in run.order if "crystal-answer" in run.displays[k].get("text/html", "")]
    assert len(markdown) == 1, "the answer is shown once"
    assert run.displays[markdown[0]]["text/plain"] == text
    # It streamed into one display updated in place, whose last update is the whole
    # answer: no output is left empty (a display_data without MIME types, which nbconvert
    # warns about).
    assert [k for k in run.order if run.displays[k] == {}] == []
    streamed = markdown
    # ~600 deltas over the stream; at most ~15 updates a second reach the notebook
    # (and one more with the whole answer).
    assert run.updates[streamed[0]] <= run.seconds * 15 + 3
    assert run.updates[streamed[0]] >= 2
    # The status line counts the session's tokens so far, updated as usage arrives.
    shown_first = next(m for m in run.messages if m["msg_type"] == "display_data")["content"]["data"]["text/plain"]
    before = int(shown_first.rsplit("·", 1)[1].split()[0].replace(",", ""))
    assert run.outputs()[0]["text/plain"].endswith(f"{before + 11 + 7:,} tokens")


def test_tool_cards_show_running_then_results(kernel):
    kernel.reset(approval="full")
    (kernel.workspace / "notes.txt").write_text("alpha\nbeta\n")
    kernel.server.add(
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo from-bash"}},
                        {"name": "bash", "arguments": {"command": "echo broken >&2; exit 3"}},
                        {"name": "edit", "arguments": {"path": "notes.txt", "old_string": "beta", "new_string": "gamma"}}]},
        {"text": "All done."},
    )
    run = kernel.run("Do three things")
    assert run.status == "ok"
    cards = [d for d in run.outputs() if 'class="crystal-card"' in d.get("text/html", "")]
    assert len(cards) == 3
    ok_card, failed_card, edit_card = cards
    assert 'data-state="done"' in ok_card["text/html"] and "from-bash" in ok_card["text/plain"]
    assert "background-color:#1f2328" in ok_card["text/html"], "bash output is shown as a terminal"
    assert 'data-state="failed"' in failed_card["text/html"] and "--crystal-error, #b71c1c" in failed_card["text/html"]
    assert 'data-state="done"' in edit_card["text/html"]
    assert run.outputs()[-1]["text/plain"] == "All done."
    assert (kernel.workspace / "notes.txt").read_text() == "alpha\ngamma\n"


def test_python_tool_runs_in_the_kernel_namespace_and_returns_images(kernel):
    kernel.reset(approval="full")
    png = base64.b64encode(tiny_png()).decode()
    code = ("import base64\nfrom IPython.display import Image, display\n"
            f"answer = 21 * 2\nprint('printed', answer)\ndisplay(Image(data=base64.b64decode('{png}')))\nanswer + 1")
    kernel.server.add(
        {"tool_calls": [{"name": "python", "arguments": {"code": code}}]},
        {"tool_calls": [{"name": "variables", "arguments": {}}]},
        {"text": "The answer is 42."},
    )
    # SANDBOX-1: python runs unsandboxed in the kernel, so even `full` asks the person.
    run = kernel.run("Compute with python", actions=[click("Allow once")])
    assert run.status == "ok"
    assert "printed 42" in run.streams
    assert any("image/png" in d for d in run.outputs()), "the displayed image shows in the cell"
    # The value shows once: in the python card, not again as an output of its own.
    assert not any(d.get("text/plain") == "43" for d in run.outputs())
    assert any(str(d.get("text/plain", "")).startswith("[python]") and "\n43" in d["text/plain"]
               for d in run.outputs())
    bodies = kernel.server.bodies("chat")
    tool_msg = [m for m in bodies[-2]["messages"] if m["role"] == "tool"][-1]
    assert "printed 42" in tool_msg["content"] and "43" in tool_msg["content"]
    images = [c for m in bodies[-2]["messages"] if m["role"] == "user" and isinstance(m["content"], list)
              for c in m["content"] if c["type"] == "image_url"]
    assert images and images[-1]["image_url"]["url"].startswith("data:image/png;base64,")
    variables = [m for m in bodies[-1]["messages"] if m["role"] == "tool"][-1]["content"]
    assert "answer: int = 42" in variables
    # An imported module is named, not shown as its file path.
    assert "base64: module base64" in variables and "site-packages" not in variables and ".py'>" not in variables
    # The model's python call asked for approval as execute: default mode asks.
    tools = [t["function"]["name"] for t in bodies[-1]["tools"]]
    assert tools.index("python") > tools.index("bash_stop")


def test_at_path_attaches_the_file(kernel):
    (kernel.workspace / "data.csv").write_text("a,b\n1,2\n")
    kernel.server.add({"text": "Two columns."})
    run = kernel.run("What is in @data.csv?")
    assert run.status == "ok"
    assert any("Attached @data.csv" in t for t in run.texts())
    user = [m for m in kernel.last_body()["messages"] if m["role"] == "user"][-1]
    assert user["content"] == 'What is in @data.csv?\n<file path="data.csv">\na,b\n1,2\n\n</file>'


def test_tab_completion_on_commands_and_paths(kernel):
    (kernel.workspace / "report.md").write_text("x")
    (kernel.workspace / "reports").mkdir(exist_ok=True)
    kc = kernel.driver.kc
    reply = kc.complete("/pro", 4, reply=True, timeout=10)["content"]
    assert reply["matches"] == ["/promptattach", "/prompts", "/promptset"] and reply["cursor_start"] == 0
    reply = kc.complete("/mode p", 7, reply=True, timeout=10)["content"]
    assert reply["matches"] == ["plan"]
    code = "look at @rep"
    reply = kc.complete(code, len(code), reply=True, timeout=10)["content"]
    assert reply["matches"] == ["@report.md", "@reports/"] and reply["cursor_start"] == len("look at ")


def test_silent_requests_run_python_and_never_call_the_model(kernel):
    before = len(kernel.server.bodies())
    kc = kernel.driver.kc
    reply = kc.execute_interactive("hidden_value = 6 * 7", silent=True, timeout=20)
    assert reply["content"]["status"] == "ok"
    assert len(kernel.server.bodies()) == before
    kernel.reset(approval="full")
    kernel.server.add({"tool_calls": [{"name": "variables", "arguments": {}}]}, {"text": "Seen."})
    kernel.run("What is defined?")
    assert "hidden_value: int = 42" in [m["content"] for m in kernel.last_body()["messages"] if m["role"] == "tool"][-1]


def test_image_results_show_as_image_outputs_after_the_card(kernel):
    (kernel.workspace / "plot.png").write_bytes(tiny_png())
    kernel.server.add({"tool_calls": [{"name": "view_image", "arguments": {"path": "plot.png"}}]},
                      {"text": "A red square."})
    run = kernel.run("Look at the plot")
    assert run.status == "ok"
    outputs = run.outputs()
    card = next(i for i, d in enumerate(outputs) if d.get("text/plain", "").startswith("[view_image] plot.png"))
    assert "(1 image below)" in outputs[card]["text/plain"]
    assert base64.b64decode(outputs[card + 1]["image/png"]) == tiny_png()


def test_a_failed_turn_shows_its_error_once_as_the_cells_error(kernel):
    """The model service refuses the request: the cell ends with status error and one
    output says why, the cell's own error (``CrystalError: …``, what papermill and nbclient
    read), not that plus a second "Error: …" box with the same words."""
    kernel.server.add({"status": 400, "message": "the model gpt-nope does not exist"})
    run = kernel.run("Hello?")
    assert run.status == "error"
    saying = [t for t in run.texts() if "gpt-nope does not exist" in t]
    assert len(saying) == 1 and saying[0].startswith("CrystalError: "), run.texts()
