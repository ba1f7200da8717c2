"""CRC32C: every crc32c() minilog can run must agree with an independent reference.

Every test runs on each implementation this CPU has (`_records_c._crc32c_impl` switches the
one crc32c() runs: "sse4.2+pclmul", "sse4.2", "portable") and on the pure-Python kernel's
choice, the `crc32c` package through `_kernel.crc32c`. The expected values come from neither:
a byte-at-a-time table CRC written here from the polynomial, itself pinned to the published
check value and RFC 3720's vectors.
"""
import array
import functools
import random
import threading

import crc32c as package
import pytest
from minilog.connector import _kernel, batch

C_IMPLS = ("sse4.2+pclmul", "sse4.2", "portable")


def _available(name):
    if _kernel.c is None:
        return False
    previous = _kernel.c._crc32c_impl()
    try:
        _kernel.c._crc32c_impl(name)
    except ValueError:
        return False
    _kernel.c._crc32c_impl(previous)
    return True


@pytest.fixture(params=[pytest.param(name, marks=pytest.mark.skipif(
    not _available(name), reason=f"no C crc32c {name!r} here")) for name in C_IMPLS] + ["python"])
def crc(request):
    """The crc32c function under test: the C kernel's on one implementation, or the package
    that the pure-Python kernel falls back to."""
    previous = _kernel.use("python" if request.param == "python" else "c")
    if request.param != "python":
        previous_impl = _kernel.c._crc32c_impl(request.param)
    yield _kernel.crc32c
    if request.param != "python":
        _kernel.c._crc32c_impl(previous_impl)
    _kernel.use(previous)


_POLY = 0x82F63B78  # CRC32C (Castagnoli), bit-reflected
_TABLE = []
for _n in range(256):
    for _ in range(8):
        _n = (_n >> 1) ^ _POLY if _n & 1 else _n >> 1
    _TABLE.append(_n)


@functools.lru_cache(maxsize=4096)
def _table_crc(data, value):
    crc = value ^ 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def reference(data, value=0):
    """CRC32C one byte at a time (cached: every implementation is checked on the same data);
    `value` chains from an earlier result and, like the package's, is taken modulo 2**32."""
    return _table_crc(bytes(memoryview(data).cast("B")), int(value) & 0xFFFFFFFF)


def test_the_reference_gives_the_published_values():
    assert reference(b"123456789") == 0xE3069283            # the CRC catalogue's check value
    assert reference(bytes(32)) == 0x8A9136AA               # RFC 3720, B.4
    assert reference(b"\xff" * 32) == 0x62A8AB43
    assert reference(bytes(range(32))) == 0x46DD794E
    assert reference(bytes(range(31, -1, -1))) == 0x113FDB5C
    assert reference(b"6789", reference(b"12345")) == 0xE3069283


def _data(n, seed=0):
    return random.Random(seed * 1_000_003 + n).randbytes(n)


# Every length up to 1100 crosses each code path's boundaries: alignment prologue, one stream
# below 64 bytes, the folding rounds and their 16-byte tails, blocks of 3 x 256 bytes. Then
# lengths around the 3 x 2048 blocks, the 64 KiB GIL release threshold, and random ones.
LENGTHS = (list(range(1101)) + [6143, 6144, 6145, 6144 + 768 + 7, 16384, 16384 + 13, 65535,
                                 65536, 65537, 70000]
           + random.Random(7).sample(range(1101, 72 * 1024), 150))


def test_check_value(crc):
    assert crc(b"123456789") == 0xE3069283
    assert crc(bytes(32)) == 0x8A9136AA and crc(bytes(range(32))) == 0x46DD794E
    assert crc(b"") == 0
    assert crc(b"", 0xDEADBEEF) == 0xDEADBEEF


def test_equals_the_reference_at_every_length(crc):
    buf = _data(72 * 1024 + 16)
    view = memoryview(buf)
    for n in LENGTHS:
        start = n % 16                  # every alignment of the start, as lengths go by
        part = view[start:start + n]
        assert crc(part) == reference(part), n


def test_odd_alignments_and_lengths(crc):
    buf = bytearray(_data(20000, seed=1))
    view = memoryview(buf)
    for n in (1, 7, 63, 64, 65, 255, 256, 767, 768, 1000, 6200, 19000):
        for start in range(17):
            part = view[start:start + n]
            assert crc(part) == reference(part), (n, start)


def test_a_few_mib(crc):
    for n in (1 << 20, 3 * (1 << 20) + 5):
        data = _data(n, seed=2)
        assert crc(data) == reference(data), n
        assert crc(memoryview(data)[3:]) == reference(memoryview(data)[3:]), n


def test_chaining_with_value(crc):
    data = _data(100_000, seed=3)
    rng = random.Random(4)
    for _ in range(200):
        cut = rng.randrange(len(data) + 1)
        assert crc(data[cut:], crc(data[:cut])) == crc(data), cut
    for value in (0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, rng.getrandbits(32)):
        for n in (0, 1, 9, 100, 5000):
            assert crc(data[:n], value) == reference(data[:n], value), (n, value)
    # like the package's "I" format: any int, taken modulo 2**32
    for value in (-1, -12345, 1 << 32, (1 << 64) + 3, True):
        assert crc(b"abc", value) == reference(b"abc", value), value


def test_bytes_like_inputs(crc):
    data = _data(5000, seed=5)
    expected = reference(data)
    writable = bytearray(data)
    for obj in (data, writable, memoryview(data), memoryview(writable),
                memoryview(data).toreadonly(), memoryview(writable).cast("B", (50, 100)),
                array.array("B", data)):
        assert crc(obj) == expected, type(obj)
    assert crc(array.array("I", [1, 2, 3])) == reference(array.array("I", [1, 2, 3]))


def test_keywords_and_bad_arguments(crc):
    assert crc(data=b"abc", value=5) == crc(b"abc", 5) == crc(b"abc", value=5)
    for bad in ("abc", None, 5, [1, 2]):
        with pytest.raises(TypeError):
            crc(bad)
    with pytest.raises(BufferError):
        crc(memoryview(b"abcdef")[::2])     # not contiguous
    with pytest.raises(TypeError):
        crc(b"abc", 1.0)
    with pytest.raises(TypeError):
        crc()


def test_c_argument_errors():
    if _kernel.c is None:
        pytest.skip("C record kernel not built")
    f = _kernel.c.crc32c
    for call in (lambda: f(b"a", 1, 2), lambda: f(b"a", data=b"b"), lambda: f(b"a", val=1),
                 lambda: f(value=1)):
        with pytest.raises(TypeError):
            call()
    with pytest.raises(ValueError):
        _kernel.c._crc32c_impl("no such implementation")


def test_threads_share_large_buffers(crc):
    """From 64 KiB the C crc32c runs without the GIL: threads at once still agree."""
    datas = [_data(n, seed=6) for n in (64 * 1024, 300_000, 1 << 20)]
    expected = [reference(d) for d in datas]
    errors = []

    def work():
        for _ in range(5):
            got = [crc(d) for d in datas]
            if got != expected:
                errors.append(got)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_kernel_choice_brings_its_crc32c():
    previous = _kernel.use("python")
    try:
        assert _kernel.crc32c is package.crc32c
        if _kernel.c is not None:
            _kernel.use("c")
            assert _kernel.crc32c is _kernel.c.crc32c
    finally:
        _kernel.use(previous)


def test_batches_check_with_the_active_crc32c(crc):
    payload = _data(3000, seed=8)
    built = batch.build(payload, 1, 0, 1_700_000_000_000, 1_700_000_000_000)
    h = batch.validate(built)
    assert h.crc == reference(memoryview(built)[batch.CRC_START:])
    stamped = bytearray(built)
    batch.stamp_in_place(stamped, 42, log_append_time=1_800_000_000_000)
    assert batch.validate(stamped).crc == reference(memoryview(stamped)[batch.CRC_START:])
    stamped[-1] ^= 1
    with pytest.raises(batch.InvalidBatch, match="CRC32C"):
        batch.validate(stamped)
