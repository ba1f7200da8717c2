"""Java-style `.properties` files (key=value or key: value, # and ! comments, a backslash
continuing a line), the format of Kafka's server.properties and of the client files its tools
take with --command-config."""
from pathlib import Path


class PropertiesError(ValueError):
    """A file that cannot be read or a line that is not key=value; the message says where."""


def read_properties(path) -> dict:
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise PropertiesError(f"cannot read {path}: {e.strerror}") from None
    props, pending = {}, ""
    for n, raw in enumerate(text.splitlines(), 1):
        line = pending + raw.strip() if pending else raw.strip()
        if not pending and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and (len(line) - len(line.rstrip("\\"))) % 2:
            pending = line[:-1]  # a continued line, as JAAS settings are often written
            continue
        pending = ""
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            raise PropertiesError(f"{path}:{n}: expected key=value, got {raw!r}")
        props[line[:sep].strip()] = line[sep + 1:].strip()
    return props
