"""The demo the README's first command runs: a local broker, transactions, replayed balances."""
import subprocess
import sys


def test_bank_demo_replays_balances_that_match_what_was_written():
    # the README's command, `minilog demo`, through the console script's entry point
    entry = "import sys; from minilog.connector.cli import main; sys.exit(main())"
    r = subprocess.run([sys.executable, "-c", entry, "demo", "--transactions", "3000",
                        "--accounts", "5"], check=False, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "replayed balances match the transactions written" in r.stdout
    assert sum(line.startswith("account-") for line in r.stdout.splitlines()) == 5
