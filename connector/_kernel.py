"""Which record kernel runs: the C extension when it was built, else the Python reference.

Walking varint records is the one per-record loop on the consumer's hot path (see
docs/ARCHITECTURE.md, "The record kernel"), so `setup.py` builds `_records_c` when a compiler is
available.
`MINILOG_PURE_PYTHON=1` forces the reference (to compare, or to rule the extension out when
debugging). `records.py` and `arrow.py` read `active` on every call, so `use()` switches both.

`crc32c(data, value=0)` goes with the kernel: the C kernel's own (SSE4.2 and PCLMULQDQ where
the CPU has them, see `_records_c.c`), else the `crc32c` package's, which gives the same
results. Callers read `_kernel.crc32c` on every call, so `use()` switches it too.
"""
import os

from crc32c import crc32c as _crc32c_package

from . import _records_py as python

try:
    from . import _records_c as c
except ImportError:  # no compiler at install time: the reference does the same work
    c = None

KERNELS = {"python": python, "c": c}


def _choose():
    if os.environ.get("MINILOG_PURE_PYTHON", "") not in ("", "0") or c is None:
        return python
    return c


def _crc32c_of(kernel):
    # getattr: an extension built before crc32c was added to it still loads (until rebuilt).
    # Without SSE4.2 ours is table-driven: the package has hardware paths for other CPUs.
    ours = getattr(kernel, "crc32c", None)
    if ours is None or kernel._crc32c_impl() == "portable":
        return _crc32c_package
    return ours


active = _choose()
crc32c = _crc32c_of(active)


def use(name):
    """Switch the kernel ("python" or "c") for this process; return the previous one's name."""
    global active, crc32c
    kernel = KERNELS.get(name)
    if kernel is None:
        raise ValueError(f"record kernel {name!r} is not available here")
    previous, active, crc32c = name_of(active), kernel, _crc32c_of(kernel)
    return previous


def name_of(kernel=None):
    return "c" if (kernel or active) is c and c is not None else "python"
