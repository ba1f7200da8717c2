"""Ctrl-C while Spark runs: one line at once, then a clean stop between two Spark calls.

A SIGINT that lands inside a py4j call prints dozens of lines of py4j and Java tracebacks:
py4j logs the KeyboardInterrupt it catches mid-command, and pyspark's own SIGINT handler calls
into the JVM (`cancelAllJobs`) from inside whatever call the driver is making. So once Spark is
involved (`defer()`), Ctrl-C only says "interrupted: stopping" and records the request; the
driver's loops call `check()` between Spark calls, which raises KeyboardInterrupt there, and the
driver stops its queries and Spark normally. A second Ctrl-C raises at once. Before `defer()`,
Ctrl-C prints the same line and raises at once (no Spark call can be cut in two). After the
line, the process's own Python output is silenced: the threads pyspark runs in the driver
(py4j's callback server, the accumulator server) report the JVM going away with tracebacks
of their own, and the user has already been told what happens.

SIGTERM, as a supervisor (systemd, Kubernetes, `kill`) stops a job, takes the same path with
"terminated: stopping": the queries stop between two micro-batches and Spark stops, instead of
the Python driver dying at once and leaving the JVM it launched. The exit status is 128 plus
the signal's number (130, 143), as a shell reports a process the signal ended.

Spark's JVM must ignore SIGINT as well, or it stops on its own with its own tracebacks:
pyspark starts the JVM it launches that way; under spark-submit, where the JVM is the driver's
parent, `defer(spark)` tells it to ignore SIGINT (the Python workers it starts later inherit
that).
"""
import logging
import os
import signal
import sys
import threading
from typing import Any

MESSAGE = "interrupted: stopping"
MESSAGES = {signal.SIGINT: MESSAGE, signal.SIGTERM: "terminated: stopping"}


class _Gate:
    def __init__(self) -> None:
        self.requested = False
        self.deferred = False
        self.signum = signal.SIGINT  # the first signal that asked to stop
        self._previous: dict[int, Any] = {}  # each signal's handler before ours
        self._asked = threading.Event()  # set with `requested`, for `when_requested`

    def _handle(self, signum: int, frame: Any) -> None:
        first = not self.requested
        if first:
            self.signum = signum
            print(MESSAGES[signum], file=sys.stderr, flush=True)
            logging.disable(logging.CRITICAL)
            sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - for the rest of the process
        self.requested = True
        self._asked.set()
        if not (first and self.deferred):
            raise KeyboardInterrupt

    @property
    def exit_status(self) -> int:
        """What a shell reports for a process ended by the signal: 130 for Ctrl-C."""
        return 128 + self.signum

    def install(self) -> None:
        """Ctrl-C (or SIGTERM) prints the one line and raises KeyboardInterrupt at once."""
        for sig in MESSAGES:
            previous = signal.signal(sig, self._handle)
            if sig not in self._previous and previous != self._handle:
                self._previous[sig] = previous

    def install_for(self, module: str) -> None:
        """`install` where `module` (a job's `__name__`) runs as the program, from its first
        line, before it imports pyspark and the connector (seconds, when spark-submit's JVM,
        still taking SIGINT, already runs); nothing where a test imports it."""
        if module == "__main__":
            self.install()

    def release(self) -> None:
        """The signals back to their handlers before `install`, for a driver that goes on
        after its Spark work (the tests run the jobs in their own process). After a Ctrl-C the
        output stays silenced: the process is on its way out, and pyspark's threads with it."""
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()
        self.deferred = False

    def defer(self, spark: Any = None) -> None:
        """From now on, Ctrl-C is only recorded until `check()`. Call it again once a Spark
        session exists (its creation installs pyspark's own handler), with the session under
        spark-submit so that its JVM ignores SIGINT too."""
        self.deferred = True
        self.install()
        if spark is not None:
            _jvm_ignores_sigint(spark)

    def start_spark(self, builder: Any) -> Any:
        """`builder.getOrCreate()` with Ctrl-C deferred from before the JVM starts until the
        session is ready. pyspark's SparkContext installs its own SIGINT handler when it is
        created on the main thread, and only there: a Ctrl-C that lands before `defer(spark)`
        puts ours back runs `cancelAllJobs` from inside whatever py4j call is under way, and
        py4j prints its tracebacks. So the session is created on a thread of its own while the
        main thread waits and takes the signals with our handler."""
        self.defer()
        made: dict[str, Any] = {}

        def create() -> None:
            try:
                made["spark"] = builder.getOrCreate()
            except BaseException as e:  # noqa: BLE001 - raised again on the main thread
                made["error"] = e

        starting = threading.Thread(target=create, name="spark-session-start", daemon=True)
        starting.start()
        while starting.is_alive():
            starting.join(0.2)
        if "error" in made:
            raise made["error"]
        spark = made["spark"]
        # The JVM keeps the active session per thread (what finds a registered Python data
        # source, among others): this thread's too, as the builder set it for the other one.
        spark._jvm.SparkSession.setActiveSession(spark._jsparkSession)
        self.defer(spark)
        return spark

    def when_requested(self, action: Any) -> None:
        """Run `action()` on a thread of its own as soon as Ctrl-C (or SIGTERM) comes, not at
        the next `check()`: what must happen at once while the main thread is inside a Spark
        call (silencing the JVM before the batch under way logs its end)."""
        def wait() -> None:
            self._asked.wait()
            action()
        threading.Thread(target=wait, name="on-interrupt", daemon=True).start()

    def check(self) -> None:
        """Raise KeyboardInterrupt if Ctrl-C was pressed: call it between Spark calls."""
        if self.requested:
            raise KeyboardInterrupt


def _jvm_ignores_sigint(spark: Any) -> None:
    jvm = spark.sparkContext._jvm
    try:
        jvm.sun.misc.Signal.handle(jvm.sun.misc.Signal("INT"),
                                   jvm.sun.misc.SignalHandler.SIG_IGN)
    except Exception:  # noqa: BLE001 - a JVM without sun.misc: it stops on its own, noisily
        pass


CTRL_C = _Gate()
