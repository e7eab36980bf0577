"""Anthropic messages through the official async SDK (reads ``ANTHROPIC_API_KEY`` and
``ANTHROPIC_BASE_URL`` itself). No sampling parameters: this SDK version rejects them."""

from __future__ import annotations

import os
import time

import anthropic

from autocomp.llm.base import LLMCallError, LLMClient, LLMConfigError, LLMReply, LLMRequest
from autocomp.llm.openai_client import _short, classify_status
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
        try:
            response = await self._client.messages.create(
                model=self.model,
                system=request.system,
                messages=[{"role": "user", "content": request.user}],
                max_tokens=request.max_tokens,
            )
        except anthropic.APIStatusError as exc:
            raise LLMCallError(f"{self.spec}: HTTP {exc.status_code}: {_short(exc)}", classify_status(exc.status_code), exc.status_code) from exc
        except anthropic.APITimeoutError as exc:
            raise LLMCallError(f"{self.spec}: request timed out", True) from exc
        except anthropic.APIConnectionError as exc:
            raise LLMCallError(f"{self.spec}: connection failed: {_short(exc)}", True) from exc
        except anthropic.AnthropicError as exc:
            raise LLMCallError(f"{self.spec}: {_short(exc)}", False) from exc
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
