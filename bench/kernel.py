"""Records/s of decode_to_arrow and decode_batches per record kernel: C against the Python
reference, same data, same run.

    python -m bench kernel [--quick] [--records N] [--value-size B]

Batches of ~16 KiB (the Java producer's default batch.size), 8-byte keys. "1 call" decodes
all records at once; "1 MiB fetches" decodes them in fetch responses of about 1 MiB (the
default max.partition.fetch.bytes), which is how a consumer or a Spark task sees them.
"""
import argparse
import time

from minilog.connector import _kernel, arrow, records


def make_batches(n, value_size, codec):
    per_batch = max(1, 16384 // (value_size + 20))
    value = bytes(range(256)) * (value_size // 256 + 2)
    out, offset = [], 0
    while offset < n:
        count = min(per_batch, n - offset)
        recs = [(1_700_000_000_000 + i, b"key%05d" % (i % 100000),
                 value[i % 97:i % 97 + value_size], ()) for i in range(offset, offset + count)]
        out.append(records.encode_batch(recs, compression=codec, base_offset=offset))
        offset += count
    return out


def fetches(batches, size=1 << 20):
    out, cur, cur_size = [], [], 0
    for b in batches:
        if cur and cur_size + len(b) > size:
            out.append(b"".join(cur))
            cur, cur_size = [], 0
        cur.append(b)
        cur_size += len(b)
    return out + [b"".join(cur)]


def best_rate(fn, n, repeat):
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return n / best / 1e6


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench kernel")
    parser.add_argument("--quick", action="store_true", help="100k records instead of 1M")
    parser.add_argument("--records", type=int)
    parser.add_argument("--value-size", type=int, default=100)
    args = parser.parse_args(argv)
    n = args.records or (100_000 if args.quick else 1_000_000)
    size = args.value_size
    kernels = [k for k in ("python", "c") if _kernel.KERNELS[k] is not None]
    print(f"{n} records of {size} B values; M records/s, best of 3 (python: 1)")
    rates = {}
    for codec in ("none", "lz4", "zstd"):
        batches = make_batches(n, size, codec)
        whole, chunks = b"".join(batches), fetches(batches)
        for k in kernels:
            _kernel.use(k)
            repeat = 3 if k == "c" else 1
            a1 = best_rate(lambda w=whole: arrow.decode_to_arrow(w, "bench", 0), n, repeat)
            a2 = best_rate(lambda cs=chunks: [arrow.decode_to_arrow(c, "bench", 0) for c in cs],
                           n, repeat)
            r2 = best_rate(lambda cs=chunks: [records.decode_batches(c, "bench", 0) for c in cs],
                           n, repeat)
            print(f"{codec:5} {k:6} decode_to_arrow: 1 call {a1:5.2f}, 1 MiB fetches "
                  f"{a2:5.2f} | decode_batches, 1 MiB fetches {r2:5.2f}")
            rates[(codec, k)] = a2
        if "c" in kernels:
            print(f"ratio kernel c/python decode_to_arrow {codec} = "
                  f"{rates[(codec, 'c')] / rates[(codec, 'python')]:.3g}")


if __name__ == "__main__":
    main()
