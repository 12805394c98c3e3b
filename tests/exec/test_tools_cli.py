"""`crystal tools list|show|call` (SPEC §11) and the sample set in examples/tools/,
run through the installed `crystal` command as a person would."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from exec_support import PY, home_set

REPO = Path(__file__).resolve().parents[2]
CRYSTAL = str(Path(sys.executable).parent / "crystal")


def crystal(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([CRYSTAL, *args], cwd=cwd, capture_output=True, text=True, timeout=60)


@pytest.fixture
def sample(home: Path) -> Path:
    target = home / "tools" / "imagetools"
    shutil.copytree(REPO / "examples" / "tools" / "imagetools", target)
    return target


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_list_text_and_json(sample, workspace):
    text = crystal("tools", "list", cwd=workspace)
    assert text.returncode == 0, text.stderr
    assert [line.split()[0] for line in text.stdout.splitlines() if not line.startswith(" ")] == \
        ["plot", "swatch", "pngsize"]
    data = json.loads(crystal("tools", "list", "--format", "json", "--workspace", str(workspace), cwd=REPO).stdout)
    assert [t["name"] for t in data["tools"]] == ["plot", "swatch", "pngsize"]
    assert data["tools"][0]["catalogs"] == ["plan", "work"] and data["tools"][2]["catalogs"] == ["work"]
    assert data["notes"] == []


def test_list_reports_notes(home, workspace):
    home_set(home, "s", {"command": [PY], "tools": [{"name": "bash"}]})
    result = crystal("tools", "list", cwd=workspace)
    assert result.returncode == 0
    assert "note: Tool 'bash' from" in result.stderr and "belongs to a built-in tool" in result.stderr


def test_show(sample, workspace):
    result = crystal("tools", "show", "swatch", "--format", "json", cwd=workspace)
    info = json.loads(result.stdout)
    assert info["command"] == ["python3", "imagetools.py", "swatch"]
    assert info["argv"] == {"color": "--color", "size": "--size"}
    assert info["stdin"] is False and info["output"] == "content" and info["timeoutSeconds"] == 10
    text = crystal("tools", "show", "plot", cwd=workspace).stdout
    assert "name: plot" in text and "Draw a bar or line chart" in text


def test_call_sample_plot_returns_png_by_path(sample, workspace):
    result = crystal("tools", "call", "plot", "--args",
                     '{"values": [3, 1, 4, 1, 5], "title": "digits", "width": 100, "height": 50}', "--images",
                     cwd=workspace)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["ok"] is True and out["text"].startswith("digits: 5 values from 1 to 5, 100x50 bar chart")
    png = workspace / ".crystal" / "data" / "tools" / "imagetools" / "digits.png"
    assert out["images"] == [{"mimeType": "image/png", "bytes": png.stat().st_size}]
    assert png_size(png.read_bytes()) == (100, 50)


def test_call_sample_swatch_and_pngsize(sample, workspace):
    out = json.loads(crystal("tools", "call", "swatch", "--args", '{"color": "#f80", "size": 8}', "--images",
                             cwd=workspace).stdout)
    assert out["ok"] and out["text"] == "A 8x8 swatch of #ff8800." and out["images"][0]["mimeType"] == "image/png"
    (workspace / "a.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + struct.pack(">II", 7, 9))
    out = json.loads(crystal("tools", "call", "pngsize", "--args", '{"path": "a.png"}', cwd=workspace).stdout)
    assert out == {"ok": True, "text": "a.png: 7 x 9 pixels\n", "images": []}


def test_call_without_images_flag_is_a_text_only_turn(sample, workspace):
    result = crystal("tools", "call", "swatch", "--args", '{"color": "#000"}', cwd=workspace)
    assert result.returncode == 1
    assert json.loads(result.stdout) == {"ok": False, "text": "This model cannot accept tool images.", "images": []}


def test_call_failed_tool_exits_1(sample, workspace):
    result = crystal("tools", "call", "plot", "--args", '{"values": []}', cwd=workspace)
    assert result.returncode == 1
    out = json.loads(result.stdout)
    assert out["ok"] is False and "Invalid arguments for plot" in out["text"]


@pytest.mark.parametrize("args,message", [
    (["tools", "call", "nope"], "crystal: No external tool named 'nope'."),
    (["tools", "call", "swatch", "--args", "{bad"], "crystal: --args is not valid JSON"),
    (["tools", "call", "swatch", "--args", "[1]"], "crystal: --args must be a JSON object."),
    (["tools", "show", "bash"], "crystal: 'bash' is a built-in tool"),
    (["tools", "list", "--workspace", "/no/such/dir"], "crystal: The workspace '/no/such/dir' is not a folder."),
])
def test_bad_input_is_one_line_exit_2(sample, workspace, args, message):
    result = crystal(*args, cwd=workspace)
    assert result.returncode == 2
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1
    assert result.stdout == ""


def test_call_environment_has_a_session_and_no_home(home, workspace):
    script = "import json, os; print(json.dumps({'text': json.dumps({k: v for k, v in os.environ.items() if k.startswith('CRYSTAL_')})}))"
    home_set(home, "env", {"command": [PY, "-c", script], "tools": [{"name": "envdump"}]})
    out = json.loads(crystal("tools", "call", "envdump", cwd=workspace).stdout)
    env = json.loads(out["text"])
    assert "CRYSTAL_HOME" not in env
    assert env["CRYSTAL_WORKSPACE"] == str(workspace.resolve()) and env["CRYSTAL_APPROVAL"] == "default"
    assert env["CRYSTAL_SESSION"] and env["CRYSTAL_TOOL_DATA"] == str(home / "data" / "tools" / "env")


def test_plugins_list_without_plugins(workspace):
    result = crystal("plugins", "list", "--format", "json", cwd=workspace)
    assert result.returncode == 0
    assert json.loads(result.stdout)["notes"] == []


def test_list_cuts_long_descriptions_at_a_word_with_a_mark(home, workspace):
    """The first line of a description, at most 80 characters, cut between words and
    marked with …; a short one is shown whole."""
    long = ("Summarise the open pull requests of the repository with their authors, reviewers "
            "and the checks that failed")
    word = "x" * 120
    home_set(home, "s", {"command": [PY], "tools": [
        {"name": "long_one", "description": long},
        {"name": "one_word", "description": word},
        {"name": "short", "description": "Short.\nSecond line."},
    ]})
    result = crystal("tools", "list", cwd=workspace)
    assert result.returncode == 0, result.stderr
    shown = {line.split()[0]: line.split("]  ", 1)[1] for line in result.stdout.splitlines()
             if not line.startswith(" ")}
    assert shown["long_one"] == "Summarise the open pull requests of the repository with their authors,…"
    assert shown["one_word"] == "x" * 79 + "…"
    assert shown["short"] == "Short."
    assert all(len(text) <= 80 for text in shown.values())


def test_list_without_tools_names_every_kind_of_external_tool(home, workspace):
    result = crystal("tools", "list", cwd=workspace)
    assert result.returncode == 0
    ws = workspace.resolve()
    assert result.stdout.splitlines() == [
        "No external tools. Add one of:",
        f"  an exec set: {home}/tools/<dir>/tools.json or {ws}/.crystal/tools/<dir>/tools.json (docs/exec-tools.md)",
        f"  an MCP server: {home}/mcp.json or {ws}/.crystal/mcp.json (docs/mcp.md)",
        "  a plugin: a package with a 'crystal_kernel.plugins' entry point (docs/plugins.md)",
    ]


def png_rows(data: bytes) -> list[bytes]:
    """The RGB rows of an 8-bit RGB PNG written with filter 0 (what imagetools writes)."""
    width, height = png_size(data)
    pos, idat = 8, b""
    while pos < len(data):
        length = struct.unpack(">I", data[pos:pos + 4])[0]
        if data[pos + 4:pos + 8] == b"IDAT":
            idat += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    raw = __import__("zlib").decompress(idat)
    stride = 1 + 3 * width
    return [raw[r * stride + 1:(r + 1) * stride] for r in range(height)]


def test_plot_draws_its_title_above_the_chart(sample, workspace):
    """The `title` argument is drawn in the image, not only used as the file name."""
    def band(args: dict) -> list[bytes]:
        out = json.loads(crystal("tools", "call", "plot", "--args", json.dumps(args), "--images",
                                 cwd=workspace).stdout)
        assert out["ok"], out
        name = args.get("title", "plot")
        rows = png_rows((workspace / ".crystal" / "data" / "tools" / "imagetools" / f"{name}.png").read_bytes())
        # The title's rows, right of the value scale and the y axis (x >= 24 at this size).
        return [row[3 * 24:] for row in rows[8:18]]

    def pixels(rows: list[bytes], rgb: bytes) -> int:
        return sum(row[i:i + 3] == rgb for row in rows for i in range(0, len(row), 3))

    text, ink = bytes((60, 60, 60)), bytes((0x1e, 0x78, 0xc8))
    titled = band({"values": [3, 1, 4], "title": "Load", "width": 120, "height": 80})
    assert pixels(titled, text) > 20, "the title is drawn in the text colour"
    assert pixels(titled, ink) == 0, "the bars start below the title"
    assert all(row[3 * 26:] == b"\xff" * len(row[3 * 26:]) for row in titled), "four letters end by x=50"
    untitled = band({"values": [3, 1, 4], "width": 120, "height": 80})
    assert pixels(untitled, text) == 0 and pixels(untitled, ink) > 0, "no title: the chart uses the space"
    assert band({"values": [3, 1, 4], "title": "Heat", "width": 120, "height": 80}) != titled
