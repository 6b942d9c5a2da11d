"""The OpenAI-compatible model gateway (aiohttp): retries, per-trial tokens, usage and cost."""
