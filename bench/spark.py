"""spark: the `format("minilog")` read and write benchmark (issue 8); waits for the connector.

Planned: streaming read rows/s through `format("minilog")` into a `noop` sink against a
synthetic Python DataSource yielding the same Arrow batches (target >= 0.6 of it), and write
rows/s.
"""
from .report import main_args


def main(argv=None):
    main_args(argv)
    print("spark: not yet: waits for the Spark connector (format(\"minilog\"))")


if __name__ == "__main__":
    main()
