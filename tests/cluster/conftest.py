"""Replicated clusters of real broker processes on 127.0.0.1, always torn down.

Timeouts are shortened (sessions, elections, ISR lag) so failovers happen in seconds; every
wait is on a condition with a generous deadline, never on a fixed sleep.
"""
import pytest
from clustertools import TestCluster


@pytest.fixture
def make_cluster(tmp_path):
    started = []

    def make(size=3, controllers=0, metrics=False, **overrides):
        c = TestCluster(size, tmp_path / f"cluster-{len(started)}", overrides, controllers,
                        metrics)
        started.append(c)
        return c.start()
    yield make
    for c in started:
        c.destroy()


def pytest_collection_modifyitems(config, items):
    """The long nemesis runs only when asked for by its marker (`-m nemesis_long`)."""
    if "nemesis_long" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="long nemesis: run with -m nemesis_long")
    for item in items:
        if "nemesis_long" in item.keywords:
            item.add_marker(skip)
