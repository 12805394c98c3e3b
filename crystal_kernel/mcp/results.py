"""Turn an MCP ``CallToolResult`` into a Crystal tool result.

Text content becomes the result's text; image content goes through the same checks as
exec tool images (:mod:`crystal_kernel.tools.images`: supported type, magic numbers,
20 MiB each, at most 8) and, on a text-only turn, fails the result with exactly
``This model cannot accept tool images.`` (EX-12). ``isError`` fails the result and
attaches no images (as EX-11 does for a non-zero exit). Content Crystal does not pass
on (audio, binary resources) is named in the text so the model knows it was there.
Content annotated for one audience goes only there: ``audience: ["user"]`` is shown to
the person and never reaches the model, ``["assistant"]`` reaches the model and is not
shown (``ToolResult.shown_text``). ``structuredContent`` is the model's text only when
the result has no content for the model of its own, and
never carries binary data as text: long base64 strings and ``data:`` URLs in it are
replaced by a note (an image there is also in the content, or it is not for the model).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from crystal_kernel.core.errors import ToolError
from crystal_kernel.core.messages import ImagePart
from crystal_kernel.mcp.sdk import field
from crystal_kernel.tools.base import ToolResult, truncate_output
from crystal_kernel.tools.images import MAX_IMAGES, NO_IMAGES_TEXT, check_mime_type, decode_base64_image

if TYPE_CHECKING:
    from mcp import types as mcp_types


def map_result(tool: str, result: mcp_types.CallToolResult, *, limit: int, images_ok: bool) -> ToolResult:
    """``result`` is the SDK's answer (read by its fields: content, isError,
    structuredContent, under either SDK line's names; the content blocks by their ``type``).

    A block annotated ``audience: ["user"]`` is for the person only: it never reaches
    the model (a note there says it was shown), and fronts show it (``shown_text``,
    ``shown_images``). A block annotated ``["assistant"]`` reaches the model only."""
    blocks = list(result.content or [])
    for_model = [b for b in blocks if _audience(b)[0]]
    for_person = [b for b in blocks if _audience(b)[1]]
    mapped = _map_blocks(tool, for_model, result, limit=limit, images_ok=images_ok)
    if len(for_model) == len(blocks) == len(for_person):
        return mapped  # no block is meant for one audience only
    person_only = len(blocks) - len(for_model)
    if person_only:
        note = f"[{person_only} content block{'s' if person_only > 1 else ''} of this result shown to the person only]"
        mapped.text = f"{mapped.text}\n{note}" if mapped.text else note
    texts, images = _collect(for_person)
    mapped.shown_text = truncate_output("\n".join(texts), limit)
    try:
        mapped.shown_images = load_images(images)
    except ToolError as exc:
        mapped.shown_images = []
        mapped.shown_text = truncate_output(f"{mapped.shown_text}\n[images not shown: {exc}]".strip(), limit)
    return mapped


def _audience(block: Any) -> tuple[bool, bool]:
    """(for the model, for the person) from the block's ``annotations.audience``; a block
    without one is for both."""
    roles = getattr(getattr(block, "annotations", None), "audience", None)
    if not roles:
        return True, True
    return "assistant" in roles, "user" in roles


def _collect(blocks: list[Any]) -> tuple[list[str], list[tuple[str, str]]]:
    """The blocks' texts (other content named in words) and (mimeType, base64) images."""
    texts: list[str] = []
    images: list[tuple[str, str]] = []
    for block in blocks:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "image":
            images.append((field(block, "mimeType"), block.data))
        elif block.type == "audio":
            texts.append(f"[audio content ({field(block, 'mimeType')}) omitted: Crystal passes text and images only]")
        elif block.type == "resource_link":
            texts.append(f"[resource link: {block.name} {block.uri}]")
        elif block.type == "resource":
            res = block.resource
            text = getattr(res, "text", None)  # a text resource; a blob has none
            if text is not None:
                texts.append(f"[resource {res.uri}]\n{text}")
            else:
                texts.append(f"[binary resource {res.uri} ({field(res, 'mimeType') or 'unknown type'}) omitted]")
        else:
            texts.append(f"[content of type {getattr(block, 'type', None)!r} omitted]")
    return texts, images


def _map_blocks(tool: str, blocks: list[Any], result: mcp_types.CallToolResult, *, limit: int,
                images_ok: bool) -> ToolResult:
    """The model's result from its content blocks (EX-11, EX-12)."""
    texts, images = _collect(blocks)
    structured = field(result, "structuredContent")
    if not texts and not images and structured is not None:
        texts.append(json.dumps(without_binary(structured), ensure_ascii=False, indent=2))
    text = truncate_output("\n".join(texts), limit)
    if field(result, "isError"):
        return ToolResult.fail(text or f"The MCP tool {tool} reported an error without a message.")
    if not images:
        return ToolResult(ok=True, text=text)
    if not images_ok:
        return ToolResult.fail(NO_IMAGES_TEXT)  # EX-12: exactly this, nothing decoded
    try:
        parts = load_images(images)
    except ToolError as exc:
        return ToolResult.fail(truncate_output(f"{tool} returned an image the host refused: {exc}", limit))
    return ToolResult(ok=True, text=text, images=parts)


# A string that is base64 data rather than words: long, no spaces, base64 alphabet only.
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]+")
BINARY_MIN_CHARS = 256


def without_binary(value: Any) -> Any:
    """``value`` with every binary-looking string (a ``data:`` URL, or long base64)
    replaced by a short note saying what was left out."""
    if isinstance(value, dict):
        return {k: without_binary(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_binary(v) for v in value]
    if isinstance(value, str) and len(value) >= BINARY_MIN_CHARS and (
            value.startswith("data:") or (" " not in value[:200] and _BASE64.fullmatch(value))):
        return f"[binary data omitted: {len(value)} characters]"
    return value


def load_images(images: list[tuple[str, str]]) -> list[ImagePart]:
    """(mimeType, base64) pairs through the shared checks."""
    if len(images) > MAX_IMAGES:
        raise ToolError(f"the result holds {len(images)} images; at most {MAX_IMAGES} are allowed")
    parts: list[ImagePart] = []
    for i, (mime, data) in enumerate(images):
        where = f"image {i + 1}"
        check_mime_type(mime, where)
        parts.append(ImagePart.from_bytes(mime, decode_base64_image(data, mime, where)))
    return parts
