"""Checks shared by every tool that hands images to the model (EX-10, EX-12).

Exec tool sets use these today; MCP servers and plugins reuse them. Every check raises
:class:`ToolError` with one English sentence the model can act on:

- at most :data:`MAX_IMAGES` images per result;
- a declared ``mimeType`` among :data:`IMAGE_MIME_TYPES`;
- bytes that really are that type (magic numbers, :func:`sniff_image_type`);
- at most :data:`MAX_IMAGE_BYTES` (20 MiB) per image;
- a ``path`` image must be a regular file inside the workspace that is not a credential
  location; folders, pipes and devices are refused before anything is opened, and the
  read honours cancellation (:func:`read_image_file`);
- on a text-only turn a result with images fails with exactly :data:`NO_IMAGES_TEXT`.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crystal_kernel.core.access import is_credential_path
from crystal_kernel.core.errors import ToolError
from crystal_kernel.core.messages import ImagePart

MAX_IMAGES = 8
MAX_IMAGE_BYTES = 20 * 1024 * 1024
IMAGE_MIME_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
# EX-12: the exact text of a failed result on a turn whose model takes no images.
NO_IMAGES_TEXT = "This model cannot accept tool images."

# Reads happen in chunks so that a cancelled turn stops a large read between chunks.
_READ_CHUNK = 1024 * 1024


def sniff_image_type(data: bytes) -> str | None:
    """The image MIME type the leading bytes announce, or None when none matches."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def check_mime_type(mime_type: object, where: str = "image") -> str:
    """The declared type (untrusted: any JSON value) must be one the host forwards to models."""
    for known in IMAGE_MIME_TYPES:
        if mime_type == known:
            return known
    raise ToolError(
        f"{where}: mimeType {mime_type!r} is not supported; use one of {', '.join(IMAGE_MIME_TYPES)}."
    )


def check_image_bytes(data: bytes, mime_type: str, where: str = "image") -> None:
    """Size limit, then magic numbers against the declared type."""
    if len(data) > MAX_IMAGE_BYTES:
        raise ToolError(f"{where} is {len(data)} bytes; the limit is {MAX_IMAGE_BYTES} bytes (20 MiB) per image.")
    if not data:
        raise ToolError(f"{where} is empty.")
    actual = sniff_image_type(data)
    if actual != mime_type:
        found = f"the bytes are {actual}" if actual else "the bytes are not a PNG, JPEG, GIF or WebP image"
        raise ToolError(f"{where} is declared as {mime_type} but {found}.")


def decode_base64_image(text: Any, mime_type: str, where: str = "image") -> bytes:
    """Decode base64 (whitespace allowed), then check size and type."""
    if not isinstance(text, str):
        raise ToolError(f"{where}: base64 must be a string.")
    compact = "".join(text.split())
    # Refuse before decoding so a huge string costs no memory beyond what we hold.
    if len(compact) > (MAX_IMAGE_BYTES + 2) // 3 * 4 + 4:
        raise ToolError(f"{where} is larger than the limit of {MAX_IMAGE_BYTES} bytes (20 MiB) per image.")
    try:
        data = base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        raise ToolError(f"{where}: base64 is not valid base64 data.") from None
    check_image_bytes(data, mime_type, where)
    return data


def check_image_path(path: Any, workspace: Path, where: str = "image") -> Path:
    """Resolve ``path`` against the workspace and refuse anything but a regular file
    inside it that is not a credential location. Nothing is opened."""
    if not isinstance(path, str) or not path.strip():
        raise ToolError(f"{where}: path must be a non-empty string.")
    if "\x00" in path:  # the OS refuses it with ValueError, not OSError
        raise ToolError(f"{where}: path {path!r} contains a NUL character.")
    root = Path(os.path.realpath(workspace))
    try:
        given = Path(path).expanduser()
    except RuntimeError:  # "~someone" with no such user
        raise ToolError(f"{where}: path '{path}' names the home folder of an unknown user.") from None
    resolved = Path(os.path.realpath(given if given.is_absolute() else root / given))
    if resolved != root and root not in resolved.parents:
        raise ToolError(f"{where}: path '{path}' is outside the workspace ({root}); refused.")
    if is_credential_path(resolved.relative_to(root)):
        raise ToolError(f"{where}: path '{path}' is a credential location; refused.")
    try:
        info = os.stat(resolved)
    except OSError as exc:
        raise ToolError(f"{where}: path '{path}' cannot be read ({exc.strerror or exc}).") from None
    if stat.S_ISDIR(info.st_mode):
        raise ToolError(f"{where}: path '{path}' is a folder, not an image file.")
    if not stat.S_ISREG(info.st_mode):
        raise ToolError(f"{where}: path '{path}' is not a regular file (pipes and devices are refused).")
    if info.st_size > MAX_IMAGE_BYTES:
        raise ToolError(
            f"{where}: '{path}' is {info.st_size} bytes; the limit is {MAX_IMAGE_BYTES} bytes (20 MiB) per image."
        )
    return resolved


async def read_image_file(path: Any, mime_type: str, workspace: Path, where: str = "image") -> bytes:
    """Check ``path`` (:func:`check_image_path`), read it in chunks off the event loop so
    cancellation stops the read, then check size and type."""
    resolved = check_image_path(path, workspace, where)
    # O_NONBLOCK: if the file was swapped for a pipe after the check, open must not block.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(resolved, flags)
    except OSError as exc:
        raise ToolError(f"{where}: path '{path}' cannot be opened ({exc.strerror or exc}).") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ToolError(f"{where}: path '{path}' is not a regular file (pipes and devices are refused).")
        data = bytearray()
        while True:
            chunk = await asyncio.to_thread(os.read, fd, _READ_CHUNK)
            if not chunk:
                break
            data += chunk
            if len(data) > MAX_IMAGE_BYTES:
                raise ToolError(
                    f"{where}: '{path}' is larger than the limit of {MAX_IMAGE_BYTES} bytes (20 MiB) per image."
                )
    finally:
        os.close(fd)
    check_image_bytes(bytes(data), mime_type, where)
    return bytes(data)


@dataclass(frozen=True)
class ImageRef:
    """One image a tool announced, checked for shape but not yet loaded."""

    mime_type: str
    base64: str | None = None
    path: str | None = None


def parse_image_refs(images: Any, *, where: str = "images") -> list[ImageRef]:
    """Validate the ``images`` array of a content result (EX-10): at most 8 objects,
    each with a supported ``mimeType`` and exactly one of ``base64`` or ``path``."""
    if images is None:
        return []
    if not isinstance(images, list):
        raise ToolError(f"{where} must be an array.")
    if len(images) > MAX_IMAGES:
        raise ToolError(f"{where} holds {len(images)} images; at most {MAX_IMAGES} are allowed.")
    refs: list[ImageRef] = []
    for i, item in enumerate(images):
        label = f"{where}[{i}]"
        if not isinstance(item, dict):
            raise ToolError(f"{label} must be an object with mimeType and base64 or path.")
        mime = check_mime_type(item.get("mimeType"), label)
        has_b64, has_path = item.get("base64") is not None, item.get("path") is not None
        if has_b64 == has_path:
            raise ToolError(f"{label} must set exactly one of base64 or path.")
        refs.append(ImageRef(mime, base64=item.get("base64"), path=item.get("path")))
    return refs


async def load_images(refs: list[ImageRef], workspace: Path, *, images_ok: bool,
                      where: str = "images") -> list[ImagePart]:
    """Turn checked references into image parts. On a text-only turn any image fails
    the result with exactly :data:`NO_IMAGES_TEXT`, before any file is opened (EX-12)."""
    if not refs:
        return []
    require_images_ok(images_ok)
    parts: list[ImagePart] = []
    for i, ref in enumerate(refs):
        label = f"{where}[{i}]"
        if ref.path is not None:
            data = await read_image_file(ref.path, ref.mime_type, workspace, label)
        else:
            data = decode_base64_image(ref.base64, ref.mime_type, label)
        parts.append(ImagePart.from_bytes(ref.mime_type, data))
    return parts


def require_images_ok(images_ok: bool) -> None:
    """EX-12: a text-only turn refuses any image with the exact sentence."""
    if not images_ok:
        raise ToolError(NO_IMAGES_TEXT)
