"""Fixtures shared by the codec tests: the record kernel each test runs on."""
import pytest
from minilog.connector import _kernel


@pytest.fixture(params=["python", pytest.param("c", marks=pytest.mark.skipif(
    _kernel.c is None, reason="C record kernel not built"))])
def kernel(request):
    previous = _kernel.use(request.param)
    yield request.param
    _kernel.use(previous)
