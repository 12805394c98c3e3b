"""EX-10 … EX-14, EX-16: what a tool's output becomes. Real child processes print the
output; the images are real PNG/JPEG/GIF/WebP byte strings."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import struct
import zlib
from pathlib import Path

import pytest
from exec_support import PY, call, home_set, load, make_ctx

from crystal_kernel.tools.images import MAX_IMAGE_BYTES, NO_IMAGES_TEXT, read_image_file


def png(width: int = 2, height: int = 2) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x00" * 20 + b"\xff\xd9"
GIF = b"GIF89a" + b"\x01\x00\x01\x00\x00\x00\x00;"
WEBP = b"RIFF\x1a\x00\x00\x00WEBPVP8L" + b"\x00" * 14


def printing_tool(home: Path, payload, *, stderr: str = "", code: int = 0, name: str = "pic",
                  extra: dict | None = None) -> None:
    """A set whose tool prints ``payload`` (JSON-encoded unless a str) and exits."""
    out = payload if isinstance(payload, str) else json.dumps(payload)
    # In the set's own folder: the rest of the Crystal Home is hidden from tool processes (SANDBOX-2).
    (home / "tools" / name).mkdir(parents=True, exist_ok=True)
    (home / "tools" / name / "payload.txt").write_text(out, encoding="utf-8")
    script = (f"import sys; sys.stdin.read(); sys.stdout.write(open({str(home / 'tools' / name / 'payload.txt')!r}, "
              f"encoding='utf-8').read()); sys.stderr.write({stderr!r}); sys.exit({code:d})")
    home_set(home, name, {"command": [PY, "-c", script], "tools": [{"name": name, **(extra or {})}]})


async def run_printing(home, workspace, ctx, payload, **kw):
    printing_tool(home, payload, **kw)
    tools, notes = load(home, workspace)
    assert notes == []
    return await call(tools[kw.get("name", "pic")], {}, ctx)


async def test_ex10_text_only(home, workspace, ctx):
    result = await run_printing(home, workspace, ctx, {"text": "hello"})
    assert result.ok and result.text == "hello" and result.images == []


async def test_ex10_empty_object_is_an_empty_success(home, workspace, ctx):
    result = await run_printing(home, workspace, ctx, {})
    assert result.ok and result.text == "" and result.images == []


async def test_ex10_base64_with_whitespace_and_every_type(home, workspace, ctx):
    images = []
    for mime, data in (("image/png", png()), ("image/jpeg", JPEG), ("image/gif", GIF), ("image/webp", WEBP)):
        b64 = base64.b64encode(data).decode()
        spaced = "\n ".join(b64[i:i + 8] for i in range(0, len(b64), 8))
        images.append({"mimeType": mime, "base64": spaced})
    result = await run_printing(home, workspace, ctx, {"text": "four", "images": images})
    assert result.ok, result.text
    assert [i.mime_type for i in result.images] == ["image/png", "image/jpeg", "image/gif", "image/webp"]
    assert result.images[0].raw() == png() and result.images[2].raw() == GIF


async def test_ex10_path_image_inside_workspace(home, workspace, ctx):
    (workspace / "out").mkdir()
    (workspace / "out" / "a.png").write_bytes(png(3, 3))
    result = await run_printing(home, workspace, ctx, {"images": [
        {"mimeType": "image/png", "path": "out/a.png"},
        {"mimeType": "image/png", "path": str(workspace / "out" / "a.png")}]})
    assert result.ok, result.text
    assert [i.raw() for i in result.images] == [png(3, 3), png(3, 3)]


async def test_ex10_stderr_appended_to_text(home, workspace, ctx):
    result = await run_printing(home, workspace, ctx, {"text": "made it"}, stderr="warning: low ink\n")
    assert result.ok and result.text == "made it\nwarning: low ink\n"


@pytest.mark.parametrize("images,problem", [
    ([{"mimeType": "image/png", "base64": base64.b64encode(png()).decode()}] * 9, "at most 8 are allowed"),
    ([{"mimeType": "image/bmp", "base64": "Qk0="}], "mimeType 'image/bmp' is not supported"),
    ([{"mimeType": "image/png"}], "exactly one of base64 or path"),
    ([{"mimeType": "image/png", "base64": "iVBO", "path": "a.png"}], "exactly one of base64 or path"),
    ([{"mimeType": "image/png", "base64": "not base64 !!"}], "not valid base64"),
    ([{"mimeType": "image/jpeg", "base64": base64.b64encode(png()).decode()}],
     "declared as image/jpeg but the bytes are image/png"),
    ([{"mimeType": "image/png", "base64": base64.b64encode(b"plain text").decode()}],
     "not a PNG, JPEG, GIF or WebP image"),
    ("one.png", "must be an array"),
])
async def test_ex10_bad_images_refused(home, workspace, ctx, images, problem):
    result = await run_printing(home, workspace, ctx, {"text": "t", "images": images})
    assert not result.ok and problem in result.text and result.images == []


async def test_ex10_png_declared_as_jpeg_refused_by_path(home, workspace, ctx):
    (workspace / "a.jpg").write_bytes(png())
    result = await run_printing(home, workspace, ctx, {"images": [{"mimeType": "image/jpeg", "path": "a.jpg"}]})
    assert not result.ok
    assert result.text == ("pic returned an image the host refused: images[0] is declared as image/jpeg "
                           "but the bytes are image/png.")


async def test_ex10_path_outside_workspace_refused(home, workspace, ctx, tmp_path):
    outside = tmp_path / "outside.png"
    outside.write_bytes(png())
    for path in (str(outside), "../outside.png"):
        result = await run_printing(home, workspace, ctx, {"images": [{"mimeType": "image/png", "path": path}]})
        assert not result.ok and "is outside the workspace" in result.text


async def test_ex10_symlink_to_outside_refused(home, workspace, ctx, tmp_path):
    outside = tmp_path / "outside.png"
    outside.write_bytes(png())
    (workspace / "inside.png").symlink_to(outside)
    result = await run_printing(home, workspace, ctx, {"images": [{"mimeType": "image/png", "path": "inside.png"}]})
    assert not result.ok and "is outside the workspace" in result.text


async def test_ex10_credential_path_refused(home, workspace, ctx):
    (workspace / ".ssh").mkdir()
    (workspace / ".ssh" / "key.png").write_bytes(png())
    result = await run_printing(home, workspace, ctx, {"images": [{"mimeType": "image/png", "path": ".ssh/key.png"}]})
    assert not result.ok and "credential location" in result.text


async def test_ex10_folder_refused(home, workspace, ctx):
    (workspace / "pics").mkdir()
    result = await run_printing(home, workspace, ctx, {"images": [{"mimeType": "image/png", "path": "pics"}]})
    assert not result.ok and "is a folder" in result.text


async def test_ex10_fifo_refused_without_blocking(home, workspace, ctx):
    os.mkfifo(workspace / "pipe.png")
    result = await asyncio.wait_for(
        run_printing(home, workspace, ctx, {"images": [{"mimeType": "image/png", "path": "pipe.png"}]}), 15)
    assert not result.ok and "not a regular file" in result.text


async def test_ex10_21_mib_image_refused(home, workspace, ctx):
    big = png() + b"\x00" * (21 * 1024 * 1024)
    (workspace / "big.png").write_bytes(big)
    result = await run_printing(home, workspace, ctx, {"images": [{"mimeType": "image/png", "path": "big.png"}]})
    assert not result.ok
    assert f"is {len(big)} bytes; the limit is {MAX_IMAGE_BYTES} bytes (20 MiB) per image" in result.text


async def test_ex10_20_mib_image_accepted(home, workspace, ctx):
    data = png() + b"\x00" * (MAX_IMAGE_BYTES - len(png()))
    (workspace / "edge.png").write_bytes(data)
    result = await run_printing(home, workspace, ctx, {"images": [{"mimeType": "image/png", "path": "edge.png"}]})
    assert result.ok and len(result.images[0].raw()) == MAX_IMAGE_BYTES


async def test_ex10_path_read_honours_cancellation(workspace):
    (workspace / "edge.png").write_bytes(png() + b"\x00" * (MAX_IMAGE_BYTES - 100))
    task = asyncio.ensure_future(read_image_file("edge.png", "image/png", workspace))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_ex11_nonzero_exit_fails_and_attaches_no_images(home, workspace, ctx):
    b64 = base64.b64encode(png()).decode()
    result = await run_printing(home, workspace, ctx,
                                {"text": "half done", "images": [{"mimeType": "image/png", "base64": b64}]},
                                stderr="boom\n", code=3)
    assert not result.ok and result.images == []
    assert result.text == "pic exited with code 3.\nhalf done\nboom\n"


async def test_ex12_text_only_turn_refuses_images_with_exact_text(home, workspace, session):
    # The path does not exist: the host must not even look at it on a text-only turn.
    result = await run_printing(home, workspace, make_ctx(session, images_ok=False),
                                {"text": "x", "images": [{"mimeType": "image/png", "path": "missing.png"}]})
    assert not result.ok and result.text == NO_IMAGES_TEXT == "This model cannot accept tool images."


async def test_ex12_text_only_turn_refuses_even_malformed_images(home, workspace, session):
    result = await run_printing(home, workspace, make_ctx(session, images_ok=False),
                                {"images": [{"mimeType": "image/bmp", "path": "x.bmp"}]})
    assert not result.ok and result.text == NO_IMAGES_TEXT


async def test_ex12_text_only_turn_without_images_is_fine(home, workspace, session):
    result = await run_printing(home, workspace, make_ctx(session, images_ok=False), {"text": "no pictures"})
    assert result.ok and result.text == "no pictures"


async def test_ex13_invalid_json_fails_with_preview(home, workspace, ctx):
    result = await run_printing(home, workspace, ctx, "Traceback: something broke\nnot json at all")
    assert not result.ok
    assert result.text.startswith("pic printed output that is not valid JSON (Expecting value at line 1 column 1)")
    assert "Stdout preview:\nTraceback: something broke\nnot json at all" in result.text


async def test_ex13_json_that_is_not_an_object_fails(home, workspace, ctx):
    result = await run_printing(home, workspace, ctx, "[1, 2]")
    assert not result.ok and "JSON but not an object (it is list)" in result.text


async def test_ex13_preview_is_bounded(home, workspace, ctx):
    result = await run_printing(home, workspace, ctx, "z" * 5000)
    assert not result.ok and len(result.text) < 800


async def test_ex14_stdout_cut_to_output_limit_before_parsing(home, workspace, session):
    session.config.tool_output_limit = 1000
    b64 = base64.b64encode(png() + b"\x00" * 5000).decode()
    result = await run_printing(home, workspace, make_ctx(session),
                                {"images": [{"mimeType": "image/png", "base64": b64}]})
    assert not result.ok
    assert "was cut to the tool output limit of 1000 characters before parsing" in result.text
    assert 'large images should use "path"' in result.text


async def test_ex14_large_image_by_path_passes_a_small_limit(home, workspace, session):
    session.config.tool_output_limit = 1000
    (workspace / "big.png").write_bytes(png() + b"\x00" * 500_000)
    result = await run_printing(home, workspace, make_ctx(session),
                                {"images": [{"mimeType": "image/png", "path": "big.png"}]})
    assert result.ok and len(result.images[0].raw()) == len(png()) + 500_000


async def test_ex16_text_output_stdout_then_stderr(home, workspace, ctx):
    result = await run_printing(home, workspace, ctx, "line one\nline two", stderr="err line\n",
                                extra={"output": "text"})
    assert result.ok and result.text == "line one\nline two\nerr line\n"


async def test_ex16_text_output_truncated(home, workspace, session):
    session.config.tool_output_limit = 200
    result = await run_printing(home, workspace, make_ctx(session), "a" * 5000, extra={"output": "text"})
    assert result.ok and len(result.text) < 400 and "characters cut" in result.text


async def test_ex16_text_output_nonzero_exit_fails(home, workspace, ctx):
    result = await run_printing(home, workspace, ctx, "partial", stderr="bad flag\n", code=2,
                                extra={"output": "text"})
    assert not result.ok and result.text == "pic exited with code 2.\npartial\nbad flag\n"


async def test_output_buffers_are_bounded(home, workspace, session):
    # 50 MB on stdout with a 1000-character limit: the host keeps only a bounded buffer.
    session.config.tool_output_limit = 1000
    script = "import sys\nfor _ in range(50): sys.stdout.write('y' * 1_000_000)\n"
    home_set(home, "flood", {"command": [PY, "-c", script], "tools": [{"name": "flood", "output": "text"}]})
    tools, _ = load(home, workspace)
    result = await call(tools["flood"], {}, make_ctx(session))
    assert result.ok and "the tool wrote 50000000 bytes" in result.text and len(result.text) < 1300
