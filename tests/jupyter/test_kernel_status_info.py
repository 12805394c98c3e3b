"""The kernel publishes mode, approval, model and prompt set in kernel_info_reply under
``crystal`` (read by the lab extension's status bar item); it follows slash commands."""

from __future__ import annotations


def kernel_info(kernel) -> dict:
    """Send kernel_info_request as a frontend does and return the reply's content."""
    kc = kernel.driver.kc
    msg_id = kc.kernel_info()
    while True:
        msg = kc.get_shell_msg(timeout=10)
        if msg["parent_header"].get("msg_id") == msg_id:
            return msg["content"]


def test_kernel_info_carries_the_crystal_status_and_follows_mode(kernel):
    kernel.run("/mode plan")
    status = kernel_info(kernel)["crystal"]
    assert status["mode"] == "plan" and status["approval"] == "default"
    assert (status["provider"], status["model"], status["promptSet"]) == ("openai", "gpt-4.1", "default")
    kernel.run("/mode work\n/approval edit")
    status = kernel_info(kernel)["crystal"]
    assert (status["mode"], status["approval"]) == ("work", "edit")
    assert status["workspace"] == str(kernel.workspace.resolve())
