"""Tool cards read like what the call does (SPEC §13 fronts; VIEW-2), in the real Crystal
kernel: ``notebook_edit`` and ``notebook_run`` headers are sentences, not escaped JSON;
a long ``read`` result shows its first lines with the rest one click away, while the
model receives the whole file."""

from __future__ import annotations

import json

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from crystal_kernel.jupyter.cards import PREVIEW_LINES, summarize_arguments


def header(bundle) -> str:
    return bundle["text/plain"].splitlines()[0]


def test_notebook_cards_say_what_the_call_does(kernel):
    kernel.reset(approval="full")
    nb = new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    nb.cells = [new_markdown_cell("# Sales"), new_code_cell("total = 2 + 3\ntotal")]
    path = kernel.workspace / "sales.ipynb"
    nbformat.write(nb, str(path))
    kernel.server.add(
        {"tool_calls": [{"name": "notebook_edit", "arguments": {
            "path": "sales.ipynb", "action": "insert", "index": 2, "cell_type": "markdown",
            "source": "## \"Totals\" {by month}"}}]},
        {"tool_calls": [{"name": "notebook_run", "arguments": {"path": "sales.ipynb"}}]},
        {"text": "Done."},
    )
    run = kernel.run("Add a heading and run the notebook")
    assert run.status == "ok", run.texts()
    edit = run.find("[notebook_edit]")
    assert header(edit) == "[notebook_edit] sales.ipynb: insert markdown cell #2 — done", header(edit)
    ran = run.find("[notebook_run]")
    assert header(ran) == "[notebook_run] sales.ipynb (all cells) — done", header(ran)
    for card in (edit, ran):  # the header (HTML too) holds no JSON of the arguments
        first = card["text/html"].split("</div>", 1)[0]  # up to the end of the header line
        assert "{" not in header(card) and "&quot;" not in first and '\\"' not in first, first
    assert [c.source for c in nbformat.read(str(path), as_version=4).cells][1] == "## \"Totals\" {by month}"


def test_plot_header_is_a_sentence():
    """``plot`` (an exec tool, examples/tools/imagetools) names its title and chart."""
    assert summarize_arguments("plot", {"values": [3, 1, 2], "kind": "line", "title": "Stock\nby item"}) \
        == "Stock … (line chart of 3 values)"


def test_a_long_read_shows_a_preview_and_the_rest_on_a_click(kernel):
    kernel.reset(approval="full")
    lines = [f"line {i:03d}: {'x' * 20}" for i in range(1, 201)]
    (kernel.workspace / "notes.txt").write_text("\n".join(lines) + "\n")
    kernel.server.add({"tool_calls": [{"name": "read", "arguments": {"path": "notes.txt"}}]}, {"text": "Read it."})
    run = kernel.run("Read notes.txt")
    assert run.status == "ok", run.texts()
    card = run.find("[read] notes.txt")
    text = card["text/plain"].splitlines()
    assert text[0] == "[read] notes.txt — done"
    shown = text[1:-1]
    assert len(shown) == PREVIEW_LINES and "line 001" in shown[0] and "line 012" in shown[-1], shown
    assert text[-1].startswith("[… ") and text[-1].endswith(" more lines]"), text[-1]
    html = card["text/html"]
    assert "<details" in html and "Show the other " in html and "line 200" in html
    assert html.index("line 012") < html.index("<details") < html.index("line 013")
    # The model gets the whole file.
    result = [m for m in kernel.last_body()["messages"] if m["role"] == "tool"][-1]["content"]
    assert "line 001" in result and "line 200" in result
    assert json.dumps(result).count("line ") == 200


def test_a_huge_read_card_starts_at_the_top_and_is_bounded():
    """A result longer than the card keeps: the preview is still the file's first lines
    (not its end, as a terminal's output is), and what opens on a click is bounded."""
    from crystal_kernel.jupyter.cards import CARD_TEXT_LIMIT, CardState, card_bundle

    text = "\n".join(f"{i:6d}\tline {i} {'y' * 60}" for i in range(1, 2001))
    bundle = card_bundle(CardState(id="c", name="read", arguments={"path": "big.txt"}, state="done", result=text))
    plain = bundle["text/plain"].splitlines()
    assert plain[1].endswith("line 1 " + "y" * 60) and plain[-1] == f"[… {2000 - PREVIEW_LINES} more lines]"
    assert len(bundle["text/html"]) < CARD_TEXT_LIMIT + 5_000
    assert "more lines not shown here]" in bundle["text/html"] and "line 2000 " not in bundle["text/html"]
