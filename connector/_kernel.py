"""Which record kernel runs: the C extension when it was built, else the Python reference.

Walking varint records is the one per-record loop on the consumer's hot path (see DESIGN.md,
"The hot path, measured"), so `setup.py` builds `_records_c` when a compiler is available.
`MINILOG_PURE_PYTHON=1` forces the reference (to compare, or to rule the extension out when
debugging). `records.py` and `arrow.py` read `active` on every call, so `use()` switches both.
"""
import os

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


active = _choose()


def use(name):
    """Switch the kernel ("python" or "c") for this process; return the previous one's name."""
    global active
    kernel = KERNELS.get(name)
    if kernel is None:
        raise ValueError(f"record kernel {name!r} is not available here")
    previous, active = name_of(active), kernel
    return previous


def name_of(kernel=None):
    return "c" if (kernel or active) is c and c is not None else "python"
