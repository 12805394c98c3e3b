"""describe_image: ask an image-capable model to describe an image file, and return its
text. The model is the session's own, or a provider built from ``imageModel`` when that
is configured; the prompts are the named image.system / image.user (with
``{{question}}``)."""

from __future__ import annotations

from pydantic import Field

from crystal_kernel.core.errors import ProviderError, ToolError
from crystal_kernel.core.messages import Message, TextPart
from crystal_kernel.providers.base import ModelRequest, Provider, TextChunk
from crystal_kernel.tools._image_file import load_image
from crystal_kernel.tools.base import Risk, Tool, ToolContext, ToolInput, ToolResult, truncate_output

DEFAULT_QUESTION = "Describe the image in detail."
MAX_OUTPUT_TOKENS = 2048


class DescribeImageInput(ToolInput):
    path: str = Field(description="The image file.")
    question: str | None = Field(
        default=None, description="What you want to know, e.g. 'What error is shown?' (default: a detailed description)."
    )


def image_prompts(ctx: ToolContext, question: str) -> tuple[str, str]:
    """The composed image.system and image.user texts for this session."""
    if ctx.compose_prompt is None:
        raise ToolError("describe_image needs a session to compose its prompts.")
    return ctx.compose_prompt("image.system", None), ctx.compose_prompt("image.user", {"question": question})


def image_provider(ctx: ToolContext) -> tuple[Provider, bool]:
    """The provider to ask, and whether this tool created it (and must close it)."""
    config = ctx.config
    if config.image_model:
        from crystal_kernel.providers.registry import make_provider

        return make_provider(config, workspace=ctx.workspace, model=config.image_model), True
    if ctx.model is None:
        raise ToolError("There is no model to describe the image; set imageModel in config.json.")
    return ctx.model, False


class DescribeImageTool(Tool[DescribeImageInput]):
    name = "describe_image"
    Input = DescribeImageInput
    risk = Risk.READ
    path_arguments = ("path",)

    async def run(self, args: DescribeImageInput, ctx: ToolContext) -> ToolResult:
        image = await load_image(args.path, ctx)
        question = (args.question or "").strip() or DEFAULT_QUESTION
        system, user = image_prompts(ctx, question)
        provider, owned = image_provider(ctx)
        try:
            if not provider.capabilities.images:
                raise ToolError(
                    f"The model {provider.model} cannot take images; set imageModel in config.json to an "
                    "image-capable model to describe images."
                )
            request = ModelRequest(
                model=provider.model,
                system=system,
                messages=[Message(role="user", parts=[TextPart(text=user), image])],
                tools=[],
                max_output_tokens=MAX_OUTPUT_TOKENS,
                purpose="image",
            )
            pieces: list[str] = []
            try:
                async for item in provider.stream(request):
                    if isinstance(item, TextChunk):
                        pieces.append(item.text)
            except ProviderError as exc:
                raise ToolError(f"The image model failed: {exc}") from None
        finally:
            if owned:
                await provider.aclose()
        text = "".join(pieces).strip()
        if not text:
            raise ToolError("The image model returned no description.")
        return ToolResult(ok=True, text=truncate_output(text, ctx.config.tool_output_limit))
