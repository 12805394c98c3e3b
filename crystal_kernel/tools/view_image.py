"""view_image: attach an image file to the conversation for an image-capable model."""

from __future__ import annotations

from pydantic import Field

from crystal_kernel.core.errors import ToolError
from crystal_kernel.tools._files import display_path
from crystal_kernel.tools._image_file import load_image
from crystal_kernel.tools.base import Risk, Tool, ToolContext, ToolInput, ToolResult


class ViewImageInput(ToolInput):
    path: str = Field(description="The image file.")


class ViewImageTool(Tool[ViewImageInput]):
    name = "view_image"
    Input = ViewImageInput
    risk = Risk.READ
    path_arguments = ("path",)

    async def run(self, args: ViewImageInput, ctx: ToolContext) -> ToolResult:
        if not ctx.images_ok:
            raise ToolError(
                "The current model cannot take images, so view_image cannot attach "
                f"'{args.path}'. Use describe_image to have an image-capable model describe it."
            )
        image = await load_image(args.path, ctx)
        size = len(image.raw())
        shown = display_path(ctx.access.resolve(args.path), ctx.workspace)
        return ToolResult(ok=True, text=f"Attached {shown} ({image.mime_type}, {size} bytes).", images=[image])
