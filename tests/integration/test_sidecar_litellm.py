"""The litellm backend (with a stand-in module: the extra is optional) and backend selection."""

from __future__ import annotations

import sys
import types
from typing import Any

import anyio
import pytest
from faithjudge.errors import ConfigError
from faithjudge.sidecar.backends import BackendConfig, make_backend
from faithjudge.sidecar.backends.base import Turn
from faithjudge.sidecar.backends.litellm_chat import LiteLLMVLMBackend
from faithjudge_client.retry import RetryPolicy
from PIL import Image


class _RateLimitError(Exception):
    pass


class _FakeResponse:
    def __init__(self, content: str, finish: str) -> None:
        self._content = content
        self._finish = finish

    def model_dump(self) -> dict[str, Any]:
        return {
            "choices": [{"message": {"content": self._content}, "finish_reason": self._finish}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7},
        }


def _module(failures: int = 0) -> tuple[types.ModuleType, list[dict[str, Any]]]:
    calls: list[dict[str, Any]] = []
    module = types.ModuleType("litellm")
    module.__version__ = "1.109.1"  # type: ignore[attr-defined]
    module.RateLimitError = _RateLimitError  # type: ignore[attr-defined]

    async def acompletion(**kwargs: Any) -> _FakeResponse:
        calls.append(kwargs)
        if len(calls) <= failures:
            raise _RateLimitError("slow down")
        return _FakeResponse("<think><step>ok</step></think><answer>yes</answer>", "stop")

    module.acompletion = acompletion  # type: ignore[attr-defined]
    return module, calls


def _conversation() -> list[Turn]:
    return [Turn("user", "Is it? (yes or no)", (Image.new("RGB", (4, 4)),))]


def test_litellm_backend_sends_images_and_reads_the_reply() -> None:
    module, calls = _module()
    backend = LiteLLMVLMBackend("gemini/gemini-2.5-flash", litellm_module=module, max_tokens=64)
    (gen,) = anyio.run(backend.generate, [_conversation()])
    assert gen.error is None
    assert gen.text.endswith("<answer>yes</answer>")
    assert (gen.prompt_tokens, gen.completion_tokens) == (11, 7)
    sent = calls[0]
    assert sent["num_retries"] == 0  # retries are ours
    assert sent["temperature"] == 0.0 and sent["max_tokens"] == 64
    parts = sent["messages"][0]["content"]
    assert parts[0]["image_url"]["url"].startswith("data:image/png;base64,")
    assert backend.settings()["litellm_version"] == "1.109.1"


def test_litellm_transient_errors_are_retried() -> None:
    module, calls = _module(failures=2)
    backend = LiteLLMVLMBackend(
        "m", litellm_module=module, policy=RetryPolicy(max_retries=3, base=0.0, jitter=False)
    )
    (gen,) = anyio.run(backend.generate, [_conversation()])
    assert gen.error is None and len(calls) == 3


def test_litellm_persistent_failure_is_a_per_item_error() -> None:
    module, _ = _module(failures=99)
    backend = LiteLLMVLMBackend(
        "m", litellm_module=module, policy=RetryPolicy(max_retries=1, base=0.0, jitter=False)
    )
    gens = anyio.run(backend.generate, [_conversation(), _conversation()])
    assert all(g.finish_reason == "error" and "retries exhausted" in (g.error or "") for g in gens)


def test_missing_litellm_extra_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "litellm", None)  # as if the extra were not installed
    with pytest.raises(ConfigError, match=r"faithjudge\[litellm\]"):
        make_backend(BackendConfig("litellm", "gemini/gemini-2.5-flash"))


def test_backend_selection_errors() -> None:
    with pytest.raises(ConfigError, match="unknown backend"):
        make_backend(BackendConfig("onnx", "m"))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="model is required"):
        make_backend(BackendConfig("openai", ""))
