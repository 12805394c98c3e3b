"""``%%crystal`` / ``%crystal`` turns in a stock python3 ipykernel: streamed answers,
tool cards, ``{name}`` interpolation, the notebook tools, one session per kernel."""

from __future__ import annotations

import json
from pathlib import Path

from crystal_kernel.jupyter.driver import click

# SANDBOX-1: the python tool runs unsandboxed in the kernel, so `full` asks for it too.
ALLOW = click("Allow once")


def user_text(body):
    return [m for m in body["messages"] if m["role"] == "user"][-1]["content"]


def tool_results(body):
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def test_load_ext_registers_the_magics_and_help(kernel):
    run = kernel.run("%crystal /help")
    assert run.status == "ok"
    text = run.outputs()[0]["text/plain"]
    assert "/mode plan|work" in text and "x = %crystal PROMPT" in text
    run = kernel.run("print(sorted(k for k in get_ipython().magics_manager.magics['cell'] if k == 'crystal'))")
    assert run.streams == "['crystal']\n"


def test_cell_turn_streams_the_answer_and_shows_tool_cards(kernel):
    kernel.reset(approval="full")
    text = "# Result\n\n" + " ".join(f"w{i}" for i in range(80))
    kernel.server.add({"tool_calls": [{"name": "bash", "arguments": {"command": "echo from-magic"}}]},
                      {"text": text, "chunk": 2, "delay": 0.003})
    run = kernel.run("%%crystal\nRun echo, then write a long answer")
    assert run.status == "ok", run.texts()
    status = run.outputs()[0]["text/plain"]
    assert status.startswith("Crystal · work · approval full · openai:")
    card = run.find("[bash] echo from-magic")
    assert 'data-state="done"' in card["text/html"] and "from-magic" in card["text/plain"]
    markdown = [k for k in run.order if "crystal-answer" in run.displays[k].get("text/html", "")]
    assert len(markdown) == 1 and run.displays[markdown[0]]["text/plain"] == text
    # It streamed into one display updated in place, whose last update is the whole
    # answer: no output is left empty.
    assert [k for k in run.order if run.displays[k] == {}] == []
    assert run.updates[markdown[0]] >= 2, "the answer streams into one display"
    assert not any("Out[" in t for t in run.texts()), "the magic leaves no Out[] value"


def test_the_python_tools_output_shows_once(kernel):
    """What the python tool's code prints shows in the cell as it runs, once: the card
    adds only what the cell did not show (a plain-text value), while the model gets all
    of it."""
    kernel.reset(approval="full")
    kernel.server.add({"tool_calls": [{"name": "python", "arguments": {"code": "print('hello', 'from', 'python')\n21*2"}}]},
                      {"text": "Done."})
    run = kernel.run("%%crystal\nRun it", actions=[ALLOW])
    assert run.status == "ok", run.texts()
    shown = run.streams + "\n".join(run.texts())
    assert shown.count("hello from python") == 1, shown
    card = run.find("[python] ")
    # The card: its header, the approval's decision (FORM-2: on the card, above the
    # result), then only the value the cell did not show.
    assert card["text/plain"].endswith("— done\nAllowed once: python print('hello', 'from', 'python') …\n42"), \
        card["text/plain"]
    assert tool_results(kernel.last_body())[-1] == "hello from python\n42\n"


def test_variables_are_interpolated_into_the_request(kernel):
    """{name} is delimited in what the model receives: a short value in backticks, a
    table (anything on several lines) named in the sentence and given after the prompt
    as a fenced block labelled with its name and type (docs/magics.md)."""
    kernel.run("rows = [1, 2, 3]\nname = 'sales'\n"
               "class Table:\n    def __str__(self):\n        return '   item  price qty\\n0  bolt    NaN   3'\n"
               "df = Table()")
    kernel.server.add({"text": "Six."})
    run = kernel.run("%%crystal\nSum {rows} from {name}; keep {{literal}} and {not a name}.\n")
    assert run.status == "ok"
    assert user_text(kernel.last_body()) == "Sum `[1, 2, 3]` from `sales`; keep {literal} and {not a name}."
    kernel.server.add({"text": "One line."})
    run = kernel.run("%crystal --mode work NaNs in {df}")
    assert user_text(kernel.last_body()) == ("NaNs in `df` (below)\n\n`df` (Table):\n```\n"
                                             "   item  price qty\n0  bolt    NaN   3\n```")


def test_an_unknown_name_is_a_one_line_error_and_no_turn(kernel):
    before = kernel.requests()
    run = kernel.run("%%crystal --approval full\nExplain {undefined_thing}")
    assert run.status == "error"
    assert run.streams.strip() == ("UsageError: {undefined_thing} in the prompt names no variable of the notebook; "
                                   "define it first, or write {{ and }} for literal braces.")
    assert kernel.requests() == before
    run = kernel.run("%crystal /approval")
    assert run.texts() == ["Approval: default"], "a refused cell changes nothing, options included"


def test_python_tool_changes_a_variable_the_next_cell_sees(kernel):
    kernel.reset(approval="full")
    kernel.run("counter = 1")
    kernel.server.add({"tool_calls": [{"name": "python", "arguments": {"code": "counter += 41\nprint('now', counter)"}}]},
                      {"tool_calls": [{"name": "variables", "arguments": {}}]},
                      {"text": "Done."})
    run = kernel.run("%%crystal\nAdd 41 to counter", actions=[ALLOW])
    assert run.status == "ok"
    assert "now 42" in run.streams
    assert "counter: int = 42" in tool_results(kernel.last_body())[-1]
    run = kernel.run("print(counter)")
    assert run.streams == "42\n"


def test_cell_output_gives_the_model_a_previous_output(kernel):
    run = kernel.run("{'answer': 6 * 7}")
    count = run.reply["content"]["execution_count"]
    kernel.server.add({"tool_calls": [{"name": "cell_output", "arguments": {"n": count}}]}, {"text": "It is 42."})
    run = kernel.run("%%crystal\nWhat did the previous cell return?")
    assert run.status == "ok"
    assert tool_results(kernel.last_body())[-1] == f"Out[{count}]: {{'answer': 42}}"
    # After the person's own failed cell, cell_output {} is that traceback, not the older
    # Out[n] (the kernel front says the same; SPEC §11 notebook tools).
    kernel.run("1 / 0")
    kernel.server.add({"tool_calls": [{"name": "cell_output", "arguments": {}}]}, {"text": "Division by zero."})
    run = kernel.run("%%crystal\nWhy did it fail?")
    result = tool_results(kernel.last_body())[-1]
    assert result.startswith("The last error:") and "ZeroDivisionError" in result
    # A newer output wins again.
    run = kernel.run("'fixed'")
    later = run.reply["content"]["execution_count"]
    kernel.server.add({"tool_calls": [{"name": "cell_output", "arguments": {}}]}, {"text": "Fixed."})
    kernel.run("%%crystal\nAnd now?")
    assert tool_results(kernel.last_body())[-1] == f"Out[{later}]: 'fixed'"


def test_two_cells_share_one_session_and_new_starts_a_fresh_one(kernel):
    kernel.run("%crystal --new")
    kernel.server.add({"text": "First answer."})
    kernel.run("%%crystal\nRemember the word kiwi")
    kernel.server.add({"text": "Kiwi."})
    kernel.run("%crystal Which word?")
    messages = kernel.last_body()["messages"]
    texts = [m["content"] for m in messages if m["role"] in ("user", "assistant")]
    assert texts[-3:] == ["Remember the word kiwi", "First answer.", "Which word?"]
    sessions = set((kernel.workspace / ".crystal" / "sessions").glob("*.jsonl"))
    kernel.server.add({"text": "Fresh."})
    run = kernel.run("%%crystal --new\nWhich word?")
    assert run.status == "ok"
    assert any(t.startswith("Note: New session ") for t in run.texts())
    texts = [m["content"] for m in kernel.last_body()["messages"] if m["role"] in ("user", "assistant")]
    assert texts == ["Which word?"]
    new = set((kernel.workspace / ".crystal" / "sessions").glob("*.jsonl")) - sessions
    assert len(new) == 1
    session_id = new.pop().stem
    # The notebook's session is recorded, so /resume in a reopened notebook continues it.
    mapped = json.loads((kernel.workspace / ".crystal" / "notebooks.json").read_text())
    assert mapped["notebooks"][kernel.notebook]["session"] == session_id
    run = kernel.run("%crystal /sessions")
    # The current session's row is starred and named by its notebook (SPEC §13 Notebook identity).
    current = [line for line in run.texts()[0].splitlines() if line.startswith("* ")]
    assert len(current) == 1 and f"({session_id})" in current[0]
    assert current[0].startswith(f"* {Path(kernel.notebook).name} · ")


def test_mode_command_and_session_options(kernel):
    run = kernel.run("%crystal /mode plan")
    # FL-5: /mode sticks as a preference (the magics' --mode option does not).
    assert run.texts() == ["Mode is now plan. Saved as your default in ~/.crystal/config.json."]
    kernel.server.add({"text": "A plan."})
    run = kernel.run("%%crystal\nPlan it")
    assert run.outputs()[0]["text/plain"].startswith("Crystal · plan · approval default")
    tools = {t["function"]["name"] for t in kernel.last_body()["tools"]}
    assert "python" not in tools and "bash" not in tools and "read" in tools
    kernel.server.add({"text": "Working."})
    run = kernel.run("%%crystal --mode work --approval edit --disable-tool python --disable-tool grep\nWork")
    assert run.outputs()[0]["text/plain"].startswith("Crystal · work · approval edit")
    tools = {t["function"]["name"] for t in kernel.last_body()["tools"]}
    assert {"bash", "variables", "cell_output"} <= tools and not {"python", "grep"} & tools
    run = kernel.run("%crystal --disable-tool nosuch")
    assert run.status == "error" and "UsageError: --disable-tool: unknown built-in tool 'nosuch'." in run.streams
    run = kernel.run("%crystal --approval sometimes")
    assert run.status == "error" and "Unknown approval mode 'sometimes'" in run.streams
    run = kernel.run("%crystal --colour red")
    assert run.status == "error" and "UsageError: Unknown option --colour" in run.streams
    kernel.server.add({"text": "Still edit."})
    kernel.run("%crystal hello")
    assert kernel.run("%crystal /approval").texts() == ["Approval: edit"]
    run = kernel.run("%crystal --prompt-set no-such-set")
    assert run.status == "error" and run.streams.startswith("UsageError: ") and run.streams.count("\n") == 1
    kernel.server.add({"text": "Other model."})
    run = kernel.run("%crystal --model openai:gpt-4.1-mini which model?")
    assert kernel.last_body()["model"] == "gpt-4.1-mini"
    assert "openai:gpt-4.1-mini" in run.outputs()[0]["text/plain"]
    kernel.run("%crystal --model gpt-4.1")
    kernel.run("%crystal --disable-tool bash_stop")  # given lists replace the session's list
    kernel.server.add({"text": "ok"})
    kernel.run("%crystal again")
    tools = {t["function"]["name"] for t in kernel.last_body()["tools"]}
    assert "python" in tools and "bash_stop" not in tools
    kernel.run("%crystal --new")


def test_at_path_and_a_command_cell(kernel):
    (Path(kernel.workspace) / "notes.txt").write_text("alpha\n")
    kernel.server.add({"text": "Alpha."})
    run = kernel.run("%crystal What is in @notes.txt?")
    assert any("Attached @notes.txt" in t for t in run.texts())
    assert user_text(kernel.last_body()) == 'What is in @notes.txt?\n<file path="notes.txt">\nalpha\n\n</file>'
    run = kernel.run("%%crystal\n/approval edit\n/mode plan")
    saved = " Saved as your default in ~/.crystal/config.json."
    assert run.texts() == ["Approval mode is now edit." + saved, "Mode is now plan." + saved]
    run = kernel.run("%%crystal\n/mode work\nand a prompt")
    assert run.status == "error" and "must start with '/'" in run.streams
    kernel.run("%crystal /mode work")


def test_listing_commands_run_from_the_python_tool_during_a_turn_PA8_FL1_FL2(kernel):
    """Listing always works, also while a %%crystal turn runs; a change is
    refused with one line and the turn goes on."""
    kernel.reset(approval="full")
    kernel.server.add(
        {"tool_calls": [{"name": "python", "arguments": {"code": "%crystal /promptattach"}}]},
        {"tool_calls": [{"name": "python", "arguments": {"code": "%crystal /promptset\n%crystal /jobs"}}]},
        {"tool_calls": [{"name": "python", "arguments": {"code": "%crystal /mode plan"}}]},
        {"text": "Listed."})
    run = kernel.run("%%crystal\nList the prompt attachments from Python", actions=[ALLOW, ALLOW, ALLOW])
    assert run.status == "ok", run.texts() + [run.streams]
    results = tool_results(kernel.last_body())
    assert "Prompt attachments:" in results[0] and "A Crystal turn is already running" not in results[0]
    assert "Prompt sets in " in results[1] and "No background jobs" in results[1]
    assert "Cannot switch mode while a turn is running." in results[2]
    assert kernel.run("%crystal /mode").texts() == ["Mode: work"]


def test_a_later_magics_flags_replace_the_earlier_ones_FL2_FL3(kernel):
    """`--prompt-attachments off` after `--prompt-attachment X` clears X (no
    --new needed); the conversation stays."""
    folder = Path(kernel.home) / ".crystal" / "prompt-attachments" / "house-style"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "prompt.json").write_text('{"enabled": false}')
    (folder / "work.md").write_text("HOUSE STYLE: answer in one line.\n")
    kernel.server.add({"text": "One."}, {"text": "Two."})
    run = kernel.run("%crystal --prompt-attachment house-style first question")
    assert run.status == "ok", run.texts() + [run.streams]
    assert "HOUSE STYLE" in kernel.last_body()["messages"][0]["content"]
    run = kernel.run("%crystal --prompt-attachments off second question")
    assert run.status == "ok", run.texts() + [run.streams]
    body = kernel.last_body()
    assert "HOUSE STYLE" not in body["messages"][0]["content"]
    assert [m["content"] for m in body["messages"] if m["role"] == "user"][-2:] == ["first question",
                                                                                    "second question"]
    kernel.run("%crystal --prompt-attachments on")
