"""One topic-partition as the broker serves it: its log plus replica state.

The log stores batches; the partition decides what is committed (high watermark), which leader
epoch stamps new batches, and wakes long-polling fetches when data arrives. With one replica the
high watermark follows the log end; replication moves it by follower progress instead.
"""
import asyncio


class Partition:
    def __init__(self, topic, index, log, topic_id=None, leader_epoch=0, replicas=(), isr=()):
        self.topic, self.index, self.log, self.topic_id = topic, index, log, topic_id
        self.leader_epoch = leader_epoch
        self.replicas = list(replicas)
        self.isr = list(isr)
        self.high_watermark = log.log_end_offset
        self.max_message_bytes = 1048588
        self.min_insync_replicas = 1
        self._waiters = set()

    def apply_config(self, config):
        """Adopt a topic's (new) LogConfig: limits checked here, storage settings by the log."""
        self.max_message_bytes = config.max_message_bytes
        self.min_insync_replicas = getattr(config, "min_insync_replicas", 1)
        self.log.config = config

    def __repr__(self):
        return f"Partition({self.topic}-{self.index})"

    @property
    def log_start_offset(self):
        return self.log.log_start_offset

    @property
    def log_end_offset(self):
        return self.log.log_end_offset

    def append_as_leader(self, batches, in_place=False):
        """Append validated batches (list of (bytes, BatchHeader)); returns the log's AppendResult.

        `in_place`: writable batches may be stamped where they are (see `Log.append`)."""
        result = self.log.append(batches, leader_epoch=self.leader_epoch, in_place=in_place)
        self._advance_high_watermark()
        return result

    def _advance_high_watermark(self):
        # Single replica: everything appended is committed. Replication replaces this rule.
        if len(self.isr) <= 1:
            new_hw = self.log.log_end_offset
            if new_hw != self.high_watermark:
                self.high_watermark = new_hw
                self.notify()

    def read(self, offset, max_bytes, committed_only=True, min_one=True, region_over=None):
        upper = self.high_watermark if committed_only else None
        return self.log.read(offset, max_bytes, upper_bound=upper, min_one=min_one,
                             region_over=region_over)

    def truncate_before(self, offset):
        """DeleteRecords: move the log start offset forward (never past the high watermark)."""
        self.log.delete_records_before(min(offset, self.high_watermark))
        return self.log.log_start_offset

    # ---- long poll -------------------------------------------------------------------------
    def add_waiter(self, fut):
        self._waiters.add(fut)

    def remove_waiter(self, fut):
        self._waiters.discard(fut)

    def notify(self):
        for fut in self._waiters:
            if not fut.done():
                fut.set_result(True)
        self._waiters.clear()


async def wait_for_any(partitions, timeout_s):
    """Wait until one of the partitions gets new committed data, or the timeout passes."""
    if timeout_s <= 0 or not partitions:
        return
    fut = asyncio.get_running_loop().create_future()
    for p in partitions:
        p.add_waiter(fut)
    try:
        # asyncio.wait, not wait_for: on 3.11 wait_for can swallow a cancellation that
        # arrives as the future completes, and a shutting-down fetch must see it.
        await asyncio.wait({fut}, timeout=timeout_s)
    finally:
        for p in partitions:
            p.remove_waiter(fut)
