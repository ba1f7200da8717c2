"""The argument parser of every minilog command line: Kafka users' habits, one-line errors.

Abbreviated flags are refused, in subcommands too (`topics create --partition 3` is an error,
not a silent `--partitions`), and a bad command line is one line on stderr and exit status 2,
never argparse's usage block.
"""
import argparse


class Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        kwargs["allow_abbrev"] = False  # subparsers are built by this class too
        super().__init__(*args, **kwargs)

    def error(self, message):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")
