"""What every benchmark shares: statistics, repeats, the printed table, results JSON and plots.

A benchmark builds a `Report`, measures (warm-up, then repeated timed runs, the median kept
with the spread), adds rows and ratios, and `finish`es it: the table and the ratio lines
are printed (`ratio <what> = x.xx`, the lines the rot test looks for), the results are written
to `<out>/bench-results/<name>.json` and the plots to `<out>/img/`. Quick runs write nothing
unless given `--out`, so the test suite never overwrites the published figures.
"""
import datetime
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

MB = 1e6  # throughput is reported in decimal megabytes (10^6 bytes) of record values


def median(values):
    return statistics.median(values)


def percentile(values, q):
    """The q-th percentile (0-100) of `values`, linear between closest ranks."""
    s = sorted(values)
    if not s:
        return math.nan
    k = (len(s) - 1) * q / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


class Timer:
    """`with Timer() as t: ...` then `t.seconds`."""

    def __enter__(self):
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self._t0


def fmt(v, digits=3):
    """A number for a table: thousands separated, `digits` significant figures for small."""
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    if isinstance(v, float) and math.isnan(v):
        return "n/a"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if v == int(v) and isinstance(v, int):
        return str(v)
    return f"{v:.{digits}g}"


def table(rows, columns):
    """Rows (dicts) as an aligned text table of `columns` ([(key, title)])."""
    cells = [[title for _, title in columns]]
    cells += [[fmt(r.get(key)) for key, _ in columns] for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(columns))]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths)))
             for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def machine():
    """The machine the figures come from: CPU, cores, RAM, the disk under the temp dir."""
    info = {"nproc": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform()}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                info["ram_gb"] = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    tmp = os.environ.get("TMPDIR", "/tmp")
    usage = shutil.disk_usage(tmp)
    info["disk"] = f"{tmp}: {usage.total / 1e9:.0f} GB, {usage.free / 1e9:.0f} GB free"
    try:
        out = subprocess.run(["df", "--output=source,fstype", tmp], capture_output=True,
                             text=True, timeout=5, check=False).stdout.split("\n")[1].split()
        info["disk"] += f", {out[0]} ({out[1]})"
    except (OSError, IndexError, subprocess.SubprocessError):
        pass
    try:
        import confluent_kafka
        version = confluent_kafka.version()  # a string in 2.x, a (string, int) tuple before
        version = version if isinstance(version, str) else version[0]
        info["confluent_kafka"] = f"{version} (librdkafka {confluent_kafka.libversion()[0]})"
    except ImportError:
        pass
    try:
        from minilog.connector import _kernel
        info["record_kernel"] = _kernel.name_of()
    except ImportError:
        pass
    return info


def default_out():
    return Path(__file__).resolve().parent.parent / "docs"


class Report:
    """Collects one benchmark run's rows, ratios and curves; `finish` prints and saves them."""

    def __init__(self, name, quick, out=None, params=None):
        self.name, self.quick = name, quick
        self.out = Path(out) if out is not None else (None if quick else default_out())
        self.params = dict(params or {})
        self.sections = []   # (title, rows, columns)
        self.ratios = []     # (label, value, note)
        self.plots = []      # (file stem, draw function)
        self.started = time.time()
        print(f"== {name}{' (quick)' if quick else ''}: "
              + ", ".join(f"{k}={v}" for k, v in self.params.items()), flush=True)

    def section(self, title, rows, columns):
        """A table of rows (dicts), printed by `finish` with `columns` ([(key, title)])."""
        self.sections.append((title, rows, columns))

    def ratio(self, label, num, den, note=""):
        value = num / den if den else math.nan
        self.ratios.append((label, value, note))
        return value

    def plot(self, stem, draw):
        """`draw(plt)` draws one figure; saved as `<out>/img/<name>-<stem>.png`."""
        self.plots.append((stem, draw))

    def log(self, message):
        print(f"   {message}", flush=True)

    def finish(self):
        for title, rows, columns in self.sections:
            print(f"\n{title}\n{table(rows, columns)}")
        print()
        for label, value, note in self.ratios:
            print(f"ratio {label} = {fmt(value)}{f'   ({note})' if note else ''}")
        print(f"({time.time() - self.started:.1f} s)", flush=True)
        if self.out is not None:
            self._save()

    def _save(self):
        results = self.out / "bench-results"
        results.mkdir(parents=True, exist_ok=True)
        doc = {
            "benchmark": self.name, "quick": self.quick,
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "command": " ".join(["python -m bench", self.name] + (["--quick"] if self.quick else [])),
            "machine": machine(), "params": self.params,
            "sections": [{"title": t, "rows": rows} for t, rows, _ in self.sections],
            "ratios": {label: value for label, value, _ in self.ratios},
            "seconds": round(time.time() - self.started, 1),
        }
        path = results / f"{self.name}.json"
        path.write_text(json.dumps(doc, indent=1, default=_jsonable) + "\n")
        print(f"results: {path}")
        self._draw()

    def _draw(self):
        if not self.plots:
            return
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("plots skipped: matplotlib is not installed (pip install -e '.[bench]')")
            return
        img = self.out / "img"
        img.mkdir(parents=True, exist_ok=True)
        for stem, draw in self.plots:
            fig = plt.figure(figsize=(7, 4.2), dpi=100)
            draw(plt)
            plt.grid(True, alpha=0.3)
            plt.tight_layout()
            path = img / f"{self.name}-{stem}.png"
            fig.savefig(path)
            plt.close(fig)
            print(f"plot: {path}")


def _jsonable(v):
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, Path):
        return str(v)
    return repr(v)


def bars(plt, labels, series, ylabel, title):
    """Grouped bars: `series` is {name: [value per label]}."""
    n = len(series)
    width = 0.8 / max(n, 1)
    for i, (name, values) in enumerate(series.items()):
        xs = [x + (i - (n - 1) / 2) * width for x in range(len(labels))]
        plt.bar(xs, [0 if v is None or (isinstance(v, float) and math.isnan(v)) else v
                     for v in values], width, label=name)
    plt.xticks(range(len(labels)), labels, rotation=20 if len(labels) > 6 else 0)
    plt.ylabel(ylabel)
    plt.title(title)
    plt.legend(fontsize=8)


def lines(plt, xs, series, xlabel, ylabel, title, logx=False, ymin0=True):
    """One line per series: `series` is {name: [y per x]}."""
    for name, ys in series.items():
        plt.plot(xs, ys, marker="o", label=name)
    if logx:
        plt.xscale("log", base=2)
        plt.xticks(xs, [str(x) for x in xs])
    if ymin0:
        plt.ylim(bottom=0)
    plt.xlabel(xlabel)
    plt.ylabel(ylabel)
    plt.title(title)
    plt.legend(fontsize=8)


def main_args(argv=None, more=None):
    """Shared command-line flags of the benchmark modules; `more(parser)` adds a module's own."""
    import argparse
    parser = argparse.ArgumentParser()
    if more is not None:
        more(parser)
    parser.add_argument("--quick", action="store_true", help="small sizes, seconds")
    parser.add_argument("--out", help="where bench-results/ and img/ go "
                        "(default docs/ for full runs, nowhere for quick runs)")
    parser.add_argument("--repeats", type=int, help="timed runs per cell (median reported)")
    return parser.parse_args(argv if argv is not None else sys.argv[1:])
