"""Reading checkov's parsed HCL: every attribute and block arrives wrapped in a list."""


def first_value(conf, name):
    """The attribute `name` of a resource (or block) configuration, unwrapped; None when absent."""
    value = conf.get(name) if isinstance(conf, dict) else None
    if isinstance(value, list):
        value = value[0] if value else None
    return value


def first_block(conf, name):
    """The first `name` block of a configuration, or None."""
    value = first_value(conf, name)
    return value if isinstance(value, dict) else None


def is_set(conf, name):
    """Whether the attribute `name` has a non-empty value."""
    return first_value(conf, name) not in (None, "", [])
