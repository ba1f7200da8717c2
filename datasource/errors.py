"""The connector's own error: below every other module of the package, so that options,
values and the readers and writers all raise it without importing one another."""


class OptionError(ValueError):
    """An invalid or conflicting option of the minilog source or sink."""
