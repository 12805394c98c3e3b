"""describe_image: the image part and the image prompts reach an image-capable model
(the scripted provider records the request); its text comes back."""

from __future__ import annotations

from pathlib import Path

from crystal_kernel.core.errors import ProviderError
from crystal_kernel.core.messages import ImagePart, TextPart
from crystal_kernel.providers.base import Capabilities
from crystal_kernel.testing.scripted import text_reply
from tests.tools.conftest import call
from tests.tools.test_view_image import PNG


async def test_describes_with_session_model(ctx, workspace: Path, provider):
    (workspace / "shot.png").write_bytes(PNG)
    provider.add(text_reply("A login form with the error 'Invalid password'."))
    result = await call("describe_image", ctx, path="shot.png", question="What error is shown?")
    assert result.ok and result.text == "A login form with the error 'Invalid password'."
    request = provider.requests[-1]
    assert request.purpose == "image" and request.tools == []
    assert "describe images" in request.system and "Mode: image" in request.system
    parts = request.messages[0].parts
    text = next(p for p in parts if isinstance(p, TextPart)).text
    assert "What error is shown?" in text
    image = next(p for p in parts if isinstance(p, ImagePart))
    assert image.mime_type == "image/png" and image.raw() == PNG


async def test_default_question(ctx, workspace: Path, provider):
    (workspace / "a.png").write_bytes(PNG)
    provider.add(text_reply("A picture."))
    await call("describe_image", ctx, path="a.png")
    text = provider.requests[-1].messages[0].parts[0].text
    assert "Describe the image in detail." in text


async def test_text_only_session_model_without_image_model(ctx, workspace: Path, provider):
    (workspace / "a.png").write_bytes(PNG)
    provider.capabilities = Capabilities(images=False)
    result = await call("describe_image", ctx, path="a.png")
    assert not result.ok and "set imageModel" in result.text
    assert provider.requests == []


async def test_configured_image_model_is_used(ctx, workspace: Path, provider, monkeypatch):
    """With imageModel set, a provider is built from config for that model (here the
    offline replay provider, whose empty cassette makes the call fail visibly)."""
    from crystal_kernel.tools import describe_image as module

    (workspace / "a.png").write_bytes(PNG)
    ctx.config.image_model = "vision-model"
    built = {}
    real = module.image_provider

    def spy(context):
        p, owned = real(context)
        built["model"], built["owned"] = p.model, owned
        return p, owned

    monkeypatch.setattr(module, "image_provider", spy)
    result = await call("describe_image", ctx, path="a.png")
    assert built == {"model": "vision-model", "owned": True}
    assert provider.requests == []
    assert not result.ok


async def test_provider_failure_and_empty_reply(ctx, workspace: Path, provider):
    (workspace / "a.png").write_bytes(PNG)
    provider.add(ProviderError("rate limited"), text_reply(""))
    r1 = await call("describe_image", ctx, path="a.png")
    assert not r1.ok and r1.text == "The image model failed: rate limited"
    r2 = await call("describe_image", ctx, path="a.png")
    assert not r2.ok and r2.text == "The image model returned no description."


async def test_refusals(ctx, workspace: Path):
    (workspace / "t.txt").write_text("text")
    result = await call("describe_image", ctx, path="t.txt")
    assert not result.ok and "is not a PNG" in result.text
    result = await call("describe_image", ctx, path="../x.png")
    assert not result.ok and "outside the workspace" in result.text


async def test_truncated(ctx, workspace: Path, provider):
    (workspace / "a.png").write_bytes(PNG)
    ctx.config.tool_output_limit = 100
    provider.add(text_reply("word " * 200))
    assert "characters cut" in (await call("describe_image", ctx, path="a.png")).text
