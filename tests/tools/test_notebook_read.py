"""SPEC §12 notebook tools: read renders a notebook as numbered cells (SPEC §12), grep and search match
cell sources, not the JSON around them."""

from __future__ import annotations

from nbformat.v4 import new_code_cell, new_output

from tests.tools.conftest import call
from tests.tools.nbfixtures import analysis_notebook, png_bytes, write


async def test_read_shows_cells_outputs_and_errors_not_json(workspace, ctx):
    nb = analysis_notebook()
    write(workspace / "analysis.ipynb", nb)
    result = await call("read", ctx, path="analysis.ipynb")
    assert result.ok, result.text
    text = result.text
    assert text.startswith("analysis.ipynb: notebook, 5 cells, kernel python3.")
    ids = [c.id for c in nb.cells]
    assert f"## cell 1 · markdown · id {ids[0]}\n# Sales analysis\nTotals per region." in text
    assert f"## cell 2 · code · id {ids[1]} · In [1]\nrows = [3, 4, 5]\nprint(sum(rows))\n→ stdout:\n12" in text
    # Errors: ename: evalue, then the traceback with the ANSI colour codes stripped.
    assert "→ error: ZeroDivisionError: division by zero\n" in text
    assert "----> 1 1/0" in text and "\x1b" not in text
    assert "→ result (text/plain):\n[3, 4, 5]" in text
    # No JSON and no base64 reach the model.
    assert '"cell_type"' not in text and "iVBOR" not in text
    # The image output is listed and attached (the test model takes images).
    assert "→ image/png image, about" in text and "(attached as image 1)" in text
    assert len(result.images) == 1 and result.images[0].mime_type == "image/png"
    assert result.images[0].raw() == png_bytes()


async def test_read_lists_images_without_attaching_for_a_text_only_model(workspace, session):
    write(workspace / "a.ipynb", analysis_notebook())
    ctx = session.tool_context(None, call_id="c", images_ok=False)
    result = await call("read", ctx, path="a.ipynb")
    assert result.ok and result.images == []
    assert "(not attached: this model takes no images)" in result.text


async def test_offset_and_limit_count_cells(workspace, ctx):
    write(workspace / "a.ipynb", analysis_notebook())
    result = await call("read", ctx, path="a.ipynb", offset=2, limit=2)
    assert "## cell 2 · code" in result.text and "## cell 3 · code" in result.text
    assert "## cell 1 " not in result.text and "## cell 4 " not in result.text
    assert result.text.endswith("[cells 2-3 of 5; read on with offset=4]")
    past = await call("read", ctx, path="a.ipynb", offset=9)
    assert not past.ok and "has 5 cells" in past.text


async def test_huge_output_is_cut_with_a_note(workspace, ctx):
    nb = analysis_notebook()
    nb.cells.append(new_code_cell("print('x' * 100000)", outputs=[
        new_output("stream", name="stdout", text="A" * 50_000 + "\n" + "Z" * 50_000)]))
    write(workspace / "big.ipynb", nb)
    result = await call("read", ctx, path="big.ipynb", offset=6)
    assert result.ok
    assert "characters of this output cut" in result.text
    assert len(result.text) < 5000
    assert result.text.count("A") < 3000 and "ZZZZ" in result.text


async def test_a_broken_notebook_is_shown_as_text_with_a_note(workspace, ctx):
    (workspace / "bad.ipynb").write_text('{"cells": [\n  {"cell_type": "code",\n')
    result = await call("read", ctx, path="bad.ipynb")
    assert result.ok
    assert result.text.startswith("['bad.ipynb' is not a valid notebook: its JSON is broken at line 3")
    assert '\n2\t  {"cell_type": "code",' in result.text


async def test_grep_matches_cell_sources_and_reports_cell_numbers(workspace, ctx):
    nb = analysis_notebook()
    # In the JSON this line is "print(\"total: \" + str(sum(rows)))": a quote is escaped.
    nb.cells[4].source = 'print("total: " + str(sum(rows)))'
    write(workspace / "a.ipynb", nb)
    (workspace / "notes.txt").write_text('print("total: ")\n')
    result = await call("grep", ctx, pattern='print\\("total')
    assert result.ok, result.text
    assert "a.ipynb:\ncell 5 line 1: print(\"total: \" + str(sum(rows)))" in result.text
    assert "notes.txt:\n1:print(\"total: \")" in result.text
    # JSON keys and outputs are not cell sources.
    keys = await call("grep", ctx, pattern="cell_type|execution_count|ZeroDivisionError")
    assert "a.ipynb" not in keys.text
    context = await call("grep", ctx, pattern="print", path="a.ipynb", context=1)
    assert "cell 2 line 1- rows = [3, 4, 5]\ncell 2 line 2: print(sum(rows))" in context.text


async def test_grep_keeps_the_ignore_files_and_hidden_folders_for_notebooks(workspace, ctx):
    """Notebooks are listed with the walking rules every other file follows: a git-ignored
    or hidden notebook is not searched (rg's --iglob used to override .gitignore)."""
    from crystal_kernel.tools._notebook_search import notebook_files
    from crystal_kernel.tools._walk import walk

    nb = analysis_notebook()
    nb.cells[4].source = 'print("needle")'
    for rel in ("kept.ipynb", "sub/Upper.IPYNB", "ignored.ipynb", "out/inside.ipynb", ".hidden/h.ipynb", ".dot.ipynb"):
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        write(workspace / rel, nb)
    (workspace / ".gitignore").write_text("ignored.ipynb\nout/\n")
    result = await call("grep", ctx, pattern="needle")
    assert result.ok, result.text
    assert "kept.ipynb:" in result.text and "sub/Upper.IPYNB:" in result.text
    for left_out in ("ignored.ipynb", "inside.ipynb", "h.ipynb", ".dot.ipynb"):
        assert left_out not in result.text, result.text
    walked = sorted(p for p, _, _ in walk(workspace) if p.suffix.lower() == ".ipynb")
    assert notebook_files(workspace) == walked


async def test_search_indexes_cell_sources_and_names_the_cells(workspace, ctx):
    nb = analysis_notebook()
    nb.cells[4].source = "revenue_by_region = compute_quarterly_revenue(rows)"
    write(workspace / "report.ipynb", nb)
    result = await call("search", ctx, query="quarterly revenue")
    assert result.ok, result.text
    assert "1. report.ipynb (cells 5)" in result.text
    none = await call("search", ctx, query="execution_count")
    assert "report.ipynb" not in none.text


async def test_read_takes_a_long_answer_text_from_its_html(workspace, ctx):
    """An answer shown in JupyterLab keeps its text once, as sanitized HTML (TRUST-1),
    with a short text/plain preview: read gives the model the answer's text from the
    HTML, Markdown marks for its structure, nothing of the markup."""
    from crystal_kernel.jupyter.safe_html import html_answer_bundle

    answer = ("## Plan\n\nFirst *read* the logs, then fix the parser.\n\n- step one\n- step two\n\n"
              "```python\nparse(x < 2)\n```\n\n" + "More detail. " * 40 + "\n\nThe last line.")
    bundle = html_answer_bundle(answer)
    assert len(bundle["text/plain"]) < 300
    nb = analysis_notebook()
    nb.cells.append(new_code_cell("Plan the fix", outputs=[
        new_output("display_data", data=bundle, metadata={"crystal": {"display": "d1"}})]))
    write(workspace / "answer.ipynb", nb)
    result = await call("read", ctx, path="answer.ipynb", offset=6)
    assert result.ok, result.text
    assert "→ display (text/html):\n## Plan\n\nFirst read the logs, then fix the parser.\n\n- step one\n- step two" \
        in result.text
    assert "```python\nparse(x < 2)\n```" in result.text and "The last line." in result.text
    assert "<p>" not in result.text and "crystal-answer" not in result.text


async def test_an_emptied_display_is_not_listed(workspace, ctx):
    """A Crystal cell's streamed answer display, emptied when the whole answer was shown
    as its own output, shows nothing in a notebook, and nothing to the model."""
    nb = analysis_notebook()
    nb.cells.append(new_code_cell("Tell me", outputs=[
        new_output("display_data", data={}),
        new_output("display_data", data={"text/plain": "The whole answer."})]))
    write(workspace / "answered.ipynb", nb)
    result = await call("read", ctx, path="answered.ipynb", offset=6)
    assert result.ok
    assert "In [ ]\nTell me\n→ display (text/plain):\nThe whole answer.\n" in result.text
    assert "→ display: " not in result.text
