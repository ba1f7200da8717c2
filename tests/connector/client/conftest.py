"""Fixtures for the client tests: every broker we test against, and small helpers.

`cluster` runs a test against Tansu (a Kafka-compatible broker that is not ours) and against a
minilog broker process. Topics get unique names because brokers are shared per module.
"""
import pytest


@pytest.fixture(scope="module", params=["tansu", "minilog"])
def cluster(request):
    """A running broker (`.bootstrap`); `.kind` says which one."""
    b = request.getfixturevalue("tansu" if request.param == "tansu" else "broker")
    b.kind = request.param
    return b
