"""view_image: attaches a checked image on an image-capable turn; fails pointing to
describe_image on a text-only one; refuses non-images, oversize files and bad paths."""

from __future__ import annotations

import os
from pathlib import Path

from crystal_kernel.tools import _image_file
from tests.tools.conftest import call

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"\x00" * 40
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 40
GIF = b"GIF89a" + b"\x00" * 20
WEBP = b"RIFF\x00\x00\x00\x00WEBPVP8 " + b"\x00" * 20


async def test_attaches_each_type(ctx, workspace: Path):
    for name, data, mime in (("a.png", PNG, "image/png"), ("b.jpg", JPEG, "image/jpeg"),
                             ("c.gif", GIF, "image/gif"), ("d.webp", WEBP, "image/webp")):
        (workspace / name).write_bytes(data)
        result = await call("view_image", ctx, path=name)
        assert result.ok, result.text
        assert result.text == f"Attached {name} ({mime}, {len(data)} bytes)."
        assert len(result.images) == 1
        assert result.images[0].mime_type == mime and result.images[0].raw() == data


async def test_text_only_model_points_to_describe_image(ctx, workspace: Path):
    (workspace / "a.png").write_bytes(PNG)
    ctx.images_ok = False
    result = await call("view_image", ctx, path="a.png")
    assert not result.ok and "describe_image" in result.text and not result.images


async def test_magic_number_checked(ctx, workspace: Path):
    (workspace / "fake.png").write_text("not an image")
    result = await call("view_image", ctx, path="fake.png")
    assert not result.ok and "is not a PNG, JPEG, GIF or WebP image" in result.text


async def test_size_bound(ctx, workspace: Path, monkeypatch):
    monkeypatch.setattr(_image_file, "MAX_IMAGE_BYTES", 100)
    (workspace / "big.png").write_bytes(PNG + b"\x00" * 200)
    result = await call("view_image", ctx, path="big.png")
    assert not result.ok and "limited to 100 bytes" in result.text


async def test_path_refusals(ctx, workspace: Path, tmp_path: Path):
    outside = tmp_path / "o.png"
    outside.write_bytes(PNG)
    os.symlink(outside, workspace / "ln.png")
    (workspace / "d").mkdir()
    cases = {"../o.png": "outside the workspace", str(outside): "outside the workspace",
             "ln.png": "outside the workspace", "d": "is a folder", "none.png": "does not exist"}
    for path, message in cases.items():
        result = await call("view_image", ctx, path=path)
        assert not result.ok and message in result.text, path
    os.mkfifo(workspace / "pipe.png")
    result = await call("view_image", ctx, path="pipe.png")
    assert not result.ok and "not a regular file" in result.text
