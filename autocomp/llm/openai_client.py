"""OpenAI chat completions through the official async SDK.

The SDK reads ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` itself, so any OpenAI-compatible
server (vLLM, Ollama, llama.cpp) works by setting the base URL. Chat completions rather than
the responses API because that is what local servers implement; one sample per request
because they do not all honour ``n``.
"""

from __future__ import annotations

import os
import time

import openai

from autocomp.llm.base import LLMCallError, LLMClient, LLMConfigError, LLMReply, LLMRequest, sdk_errors
from autocomp.model import Usage

class OpenAIClient(LLMClient):
    def __init__(self, model: str, timeout: float) -> None:
        if not os.environ.get("OPENAI_API_KEY"):
            raise LLMConfigError(
                f"openai:{model} needs OPENAI_API_KEY in the environment (for a local OpenAI-compatible "
                "server set OPENAI_BASE_URL and any non-empty OPENAI_API_KEY), or use a recorded session "
                "with --llm replay:FILE"
            )
        self.model = model
        self.spec = f"openai:{model}"
        # Retries are the pool's job (it counts them and respects the overall timeout).
        self._client = openai.AsyncOpenAI(max_retries=0, timeout=timeout)

    async def complete(self, request: LLMRequest, sample: int) -> LLMReply:
        start = time.monotonic()
        with sdk_errors(openai, openai.OpenAIError, self.spec):
            response = await self._client.chat.completions.create(
                model=self.model,
                messages=[
                    {"role": "system", "content": request.system},
                    {"role": "user", "content": request.user},
                ],
                max_completion_tokens=request.max_tokens,
            )
        if not response.choices:
            raise LLMCallError(f"{self.spec}: reply had no choices", True)
        choice = response.choices[0]
        text = choice.message.content or ""
        usage = Usage(calls=1)
        if response.usage is not None:
            usage.input_tokens = response.usage.prompt_tokens or 0
            usage.output_tokens = response.usage.completion_tokens or 0
        return LLMReply(
            text=text,
            model=self.spec,
            usage=usage,
            seconds=time.monotonic() - start,
            truncated=choice.finish_reason == "length",
        )

    async def close(self) -> None:
        await self._client.close()
