"""Path-escape attempts through every file tool and through exec-tool image paths:
``..``, absolute paths, ``~``, symlinks (file and folder) pointing out of the workspace,
a NUL byte, glob patterns climbing out. Each attempt is a failed tool result the model
can read (or, for listings, a result that shows nothing from outside); nothing outside
the workspace is read, written or changed."""

from __future__ import annotations

import json
import struct
import sys
import zlib

import pytest

from crystal_kernel.core.config import Config
from crystal_kernel.core.errors import ToolError
from crystal_kernel.core.interaction import NoPerson
from crystal_kernel.core.trust import trust_all
from crystal_kernel.host.session import Session
from crystal_kernel.host.tool_sources import discover_external_tools
from crystal_kernel.testing.scripted import ScriptedProvider
from crystal_kernel.tools.base import ToolResult
from crystal_kernel.tools.catalog import load_builtin

SECRET = "TOP SECRET outside the workspace"


def png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    raw = b"\x00\xff\x00\x00"
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


@pytest.fixture
def world(tmp_path, monkeypatch):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    (outside / "pic.png").write_bytes(png())
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "inside.txt").write_text("inside\n")
    (ws / "link_file").symlink_to(outside / "secret.txt")
    (ws / "link_dir").symlink_to(outside)
    (ws / "link_png.png").symlink_to(outside / "pic.png")
    (ws / "sub" / "up").symlink_to("../..")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(outside))  # "~" points outside the workspace
    session = Session(workspace=ws, config=Config(home=home, approval="full"), provider=ScriptedProvider(),
                      person_present=False)
    before = {p: p.read_bytes() for p in outside.iterdir()}
    yield {"ws": ws.resolve(), "outside": outside, "home": home, "session": session}
    # Nothing outside changed, and nothing new appeared there.
    assert {p: p.read_bytes() for p in outside.iterdir()} == before


ESCAPES = [
    "../outside/secret.txt", "{outside}/secret.txt", "~/secret.txt", "link_file", "link_dir/secret.txt",
    "sub/../../outside/secret.txt", "sub/up/outside/secret.txt", "{ws}/../outside/secret.txt",
    "./../outside/secret.txt", "secret\x00.txt", "/etc/passwd", "~nosuchuser/secret.txt", "x" * 300,
]
FOLDERS = ["..", "../outside", "{outside}", "~", "link_dir", "sub/up", "sub/up/outside", "/", "/etc"]


def fill(path: str, world) -> str:
    return path.format(outside=world["outside"], ws=world["ws"])


async def call(tool_name: str, world, /, **arguments) -> ToolResult:
    tool = load_builtin(tool_name)
    ctx = world["session"].tool_context(NoPerson(), call_id="c1", images_ok=True)
    try:
        args = tool.parse(arguments)
        tool.classify(args, ctx)
        return await tool.run(args, ctx)
    except ToolError as exc:
        return ToolResult.fail(str(exc))


def refused(result: ToolResult) -> None:
    assert not result.ok, f"an escape succeeded: {result.text[:200]}"
    assert result.text.strip() and "\n" not in result.text.strip(), result.text
    assert SECRET not in result.text and "root:" not in result.text


@pytest.mark.parametrize("path", ESCAPES)
async def test_file_tools_refuse_paths_outside(world, path):
    p = fill(path, world)
    refused(await call("read", world, path=p))
    refused(await call("write", world, path=p, content="overwritten"))
    refused(await call("edit", world, path=p, old_string="TOP", new_string="LOW"))
    refused(await call("view_image", world, path=p))
    refused(await call("describe_image", world, path=p))


async def test_image_tools_refuse_a_symlinked_picture(world):
    refused(await call("view_image", world, path="link_png.png"))
    refused(await call("describe_image", world, path="link_png.png"))
    refused(await call("view_image", world, path=str(world["outside"] / "pic.png")))


@pytest.mark.parametrize("path", FOLDERS)
async def test_listing_tools_refuse_folders_outside(world, path):
    p = fill(path, world)
    refused(await call("list", world, path=p))
    refused(await call("tree", world, path=p))
    refused(await call("glob", world, pattern="*", path=p))
    refused(await call("grep", world, pattern="SECRET", path=p))


@pytest.mark.parametrize("pattern", ["../outside/*", "../**/*", "{outside}/*", "link_dir/*", "sub/up/**/secret*",
                                     "**/secret.txt", "/etc/*"])
async def test_glob_patterns_never_show_outside_files(world, pattern):
    result = await call("glob", world, pattern=fill(pattern, world))
    found = [line for line in result.text.splitlines() if not line.startswith("No files")]
    assert not [line for line in found if "secret.txt" in line or "passwd" in line], result.text


async def test_workspace_wide_listings_do_not_follow_links_out(world):
    for result in (await call("grep", world, pattern="TOP SECRET"), await call("tree", world),
                   await call("list", world, path="link_dir"), await call("search", world, query="TOP SECRET")):
        assert SECRET not in result.text and "secret.txt" not in result.text


@pytest.mark.parametrize("name", ["../../outside/secret", "/etc/passwd", "link_dir", "~", "a/../../b"])
async def test_skill_names_cannot_climb_out(world, name):
    result = await call("skill", world, name=name)
    assert not result.ok and SECRET not in result.text


# ----- exec tools: image paths named by the tool's content JSON -----------------------------------
SCRIPT = """import json, sys
args = json.loads(sys.stdin.read())
print(json.dumps({"text": "made", "images": [{"mimeType": "image/png", "path": args["path"]}]}))
"""


@pytest.mark.parametrize("path", ["../outside/pic.png", "{outside}/pic.png", "link_png.png", "link_dir/pic.png",
                                  "sub/up/outside/pic.png", "~/pic.png", "~nosuchuser/pic.png", "sub", "/dev/zero",
                                  "pic\x00.png", "x" * 300 + ".png"])
async def test_exec_tool_image_paths_stay_inside(world, path):
    folder = world["ws"] / ".crystal" / "tools" / "imgs"
    folder.mkdir(parents=True)
    (folder / "make.py").write_text(SCRIPT)
    (folder / "tools.json").write_text(json.dumps({"command": [sys.executable, "make.py"], "tools": [
        {"name": "make_image", "description": "Makes an image.",
         "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}}]}))
    trust_all(world["home"], world["ws"])  # the person trusts the set (TRUST-2)
    tools, notes = await discover_external_tools(world["home"], world["ws"], context=world["session"])
    tool = {t.name: t for t in tools}["make_image"]
    ctx = world["session"].tool_context(NoPerson(), call_id="c1", images_ok=True)
    try:
        result = await tool.run(tool.parse({"path": fill(path, world)}), ctx)
    except ToolError as exc:
        result = ToolResult.fail(str(exc))
    assert not result.ok and not result.images, f"{path!r}: {result.text[:200]}"
    assert result.text.strip()


async def test_exec_tool_image_inside_the_workspace_is_attached(world):
    """The control case: the same tool with a picture inside the workspace works."""
    (world["ws"] / "pic.png").write_bytes(png())
    folder = world["ws"] / ".crystal" / "tools" / "imgs"
    folder.mkdir(parents=True)
    (folder / "make.py").write_text(SCRIPT)
    (folder / "tools.json").write_text(json.dumps({"command": [sys.executable, "make.py"], "tools": [
        {"name": "make_image", "description": "Makes an image.",
         "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}}]}))
    trust_all(world["home"], world["ws"])  # the person trusts the set (TRUST-2)
    tools, _ = await discover_external_tools(world["home"], world["ws"], context=world["session"])
    tool = {t.name: t for t in tools}["make_image"]
    ctx = world["session"].tool_context(NoPerson(), call_id="c1", images_ok=True)
    result = await tool.run(tool.parse({"path": "pic.png"}), ctx)
    assert result.ok and len(result.images) == 1
