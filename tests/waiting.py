"""Waiting on a condition instead of sleeping: a loaded machine makes everything slower, so
tests wait for what they need to see, with deadlines far beyond the usual time."""
import sys
import time


def wait_until(predicate, timeout=60.0, what="condition", interval=0.05):
    """Return predicate()'s first truthy value; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


def kafka_python_to_end(consumer, timeout=60.0):
    """Every record a kafka-python consumer reads from its position up to the end offsets of
    its assignment as of now: it stops on reaching them, not after a quiet period."""
    assigned = consumer.assignment()
    ends = consumer.end_offsets(list(assigned))
    records = []

    def done():
        for batch in consumer.poll(200).values():
            records.extend(batch)
        return all(consumer.position(tp) >= ends[tp] for tp in assigned)
    wait_until(done, timeout, what=f"kafka-python to reach {ends}", interval=0)
    return records


def blocked(thread):
    """Whether `thread` is waiting inside threading (an Event, a Condition, a join): how a test
    knows a call has started to block, without sleeping and hoping."""
    frame = sys._current_frames().get(thread.ident)
    while frame is not None:
        if frame.f_code.co_filename.endswith("threading.py") and frame.f_code.co_name == "wait":
            return True
        frame = frame.f_back
    return False
