"""`minilog` run as a user runs it, for the command-line tests: a real process, its exit status
and its output."""
import subprocess
import sys

CLI = [sys.executable, "-m", "minilog.connector.cli"]
USAGE, FAILED = 2, 1  # exit statuses: a mistake in the command; a refusal by the cluster


def run(*args, input=None, timeout=60):
    return subprocess.run([*CLI, *map(str, args)], check=False, input=input, capture_output=True,
                          timeout=timeout)


def ok(*args, **kwargs):
    r = run(*args, **kwargs)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout.decode()


def one_line_error(r, status):
    """The user-error contract: exit `status`, exactly one line on stderr, no traceback."""
    err = r.stderr.decode()
    assert (r.returncode, err.count("\n")) == (status, 1) and "Traceback" not in err, \
        (r.returncode, err)
    return err
