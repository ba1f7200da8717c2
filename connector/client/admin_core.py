"""What every part of the admin client shares: its config, its `Cluster`, deadlines and the
retry loop. `AsyncAdminClient` (admin.py) and its group and transaction mixins
(admin_groups.py, admin_transactions.py) all build on `AdminCore`, so each mixin's use of the
client's state is declared in one place rather than assumed."""
import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from minilog.connector.protocol import ErrorCode, KafkaError

from .cluster import Cluster
from .config import Config
from .types import KafkaConnectionError, OffsetAndTimestamp, TopicPartition

T = TypeVar("T")


def retriable(exc: KafkaError) -> bool:
    """Worth another try. An unknown topic is an answer for admin calls, not a glitch."""
    if exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return False
    return exc.retriable or isinstance(exc, KafkaConnectionError) or \
        exc.code == ErrorCode.NOT_CONTROLLER


def offset_of(found: OffsetAndTimestamp | None, tp: TopicPartition) -> int:
    """The offset ListOffsets gave for earliest or latest, which every partition has."""
    if found is None:
        raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"no earliest or latest offset for {tp}")
    return found.offset


class AdminCore:
    """The admin client's state (set by `AsyncAdminClient.__init__`) and its retry rules."""
    config: Config
    _cluster: Cluster

    def _deadline(self, timeout: float | None) -> float:
        return time.monotonic() + (self.config.seconds("default.api.timeout.ms")
                                   if timeout is None else timeout)

    async def _retry(self, fn: Callable[[], Awaitable[T]], timeout: float | None,
                     what: str) -> T:
        """Run `fn()` until it succeeds, a non-retriable error, or the deadline."""
        deadline = self._deadline(timeout)
        await self._cluster.ensure_bootstrapped()
        while True:
            try:
                return await fn()
            except KafkaError as e:
                if not retriable(e) or time.monotonic() >= deadline:
                    raise
                self._cluster.request_update()
                await asyncio.sleep(self.config.seconds("retry.backoff.ms"))
                await self._cluster.maybe_refresh()
