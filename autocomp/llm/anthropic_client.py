"""Anthropic messages through the official async SDK (reads ``ANTHROPIC_API_KEY`` and
``ANTHROPIC_BASE_URL`` itself). No sampling parameters: this SDK version rejects them."""

from __future__ import annotations

import os
import time

import anthropic

from autocomp.llm.base import LLMClient, LLMConfigError, LLMReply, LLMRequest, sdk_errors
from autocomp.model import Usage


class AnthropicClient(LLMClient):
    def __init__(self, model: str, timeout: float) -> None:
        if not os.environ.get("ANTHROPIC_API_KEY"):
            raise LLMConfigError(
                f"anthropic:{model} needs ANTHROPIC_API_KEY in the environment, "
                "or use a recorded session with --llm replay:FILE"
            )
        self.model = model
        self.spec = f"anthropic:{model}"
        self._client = anthropic.AsyncAnthropic(max_retries=0, timeout=timeout)

    async def complete(self, request: LLMRequest, sample: int) -> LLMReply:
        start = time.monotonic()
        with sdk_errors(anthropic, anthropic.AnthropicError, self.spec):
            response = await self._client.messages.create(
                model=self.model,
                system=request.system,
                messages=[{"role": "user", "content": request.user}],
                max_tokens=request.max_tokens,
            )
        text = "".join(getattr(block, "text", "") for block in response.content)
        usage = Usage(calls=1, input_tokens=response.usage.input_tokens or 0, output_tokens=response.usage.output_tokens or 0)
        return LLMReply(
            text=text,
            model=self.spec,
            usage=usage,
            seconds=time.monotonic() - start,
            truncated=response.stop_reason == "max_tokens",
        )

    async def close(self) -> None:
        await self._client.close()
