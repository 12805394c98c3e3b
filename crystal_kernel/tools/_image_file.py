"""Loading an image file for the image tools: access-checked, magic-number checked,
bounded at 20 MiB, read off the event loop."""

from __future__ import annotations

import asyncio
import os
import stat

from crystal_kernel.core.errors import ToolError
from crystal_kernel.core.messages import ImagePart
from crystal_kernel.tools.base import ToolContext
from crystal_kernel.tools.images import MAX_IMAGE_BYTES, sniff_image_type


async def load_image(path: str, ctx: ToolContext) -> ImagePart:
    """The image at ``path`` (workspace or added directory) as an ImagePart."""
    resolved = ctx.access.resolve(path)
    try:
        info = os.stat(resolved)
    except FileNotFoundError:
        raise ToolError(f"'{path}' does not exist.") from None
    except OSError as exc:
        raise ToolError(f"Cannot read '{path}': {exc.strerror or exc}.") from None
    if stat.S_ISDIR(info.st_mode):
        raise ToolError(f"'{path}' is a folder, not an image file.")
    if not stat.S_ISREG(info.st_mode):
        raise ToolError(f"'{path}' is not a regular file.")
    if info.st_size > MAX_IMAGE_BYTES:
        raise ToolError(f"'{path}' is {info.st_size} bytes; images are limited to {MAX_IMAGE_BYTES} bytes (20 MiB).")

    def read() -> bytes:
        fd = os.open(resolved, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ToolError(f"'{path}' is not a regular file.")
            chunks = []
            size = 0
            while size <= MAX_IMAGE_BYTES:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    data = await asyncio.to_thread(read)
    if len(data) > MAX_IMAGE_BYTES:
        raise ToolError(f"'{path}' is larger than the image limit of {MAX_IMAGE_BYTES} bytes (20 MiB).")
    mime = sniff_image_type(data[:16])
    if mime is None:
        raise ToolError(f"'{path}' is not a PNG, JPEG, GIF or WebP image (checked by its first bytes).")
    return ImagePart.from_bytes(mime, data)
