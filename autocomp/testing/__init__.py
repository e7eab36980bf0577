"""Test doubles, named as such: a loopback fake LLM server (speaks the OpenAI and Anthropic
HTTP APIs with scripted replies) and a scripted backend. They exist so the engine and the
server can be tested through the real SDKs and real protocol code; no feature relies on them."""
