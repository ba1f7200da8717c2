"""Typed values (`valueFormat`): a placeholder until JSON and Avro decoding land."""


def value_format(opts):
    """The ValueFormat the options ask for, or None for Spark's binary `value` column."""
    if opts.get("valueformat") is not None:
        from .options import OptionError
        raise OptionError("Option 'valueFormat' is not supported yet")
    return None
