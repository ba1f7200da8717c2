"""Producer, consumer and admin client over one asyncio core, with a synchronous face."""
