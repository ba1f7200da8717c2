"""Waiting on a condition instead of sleeping: a loaded machine makes everything slower, so
tests wait for what they need to see, with deadlines far beyond the usual time."""
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
