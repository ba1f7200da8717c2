"""Kafka's JAAS configuration lines, as Java clients, Spark users and brokers write them.

`org.apache.kafka.common.security.scram.ScramLoginModule required username="alice"
password="secret";` names a client's SASL credentials; a broker's PLAIN login module lists
its users as `user_<name>="<password>"` options. Only the module name, the control flag and
`key="value"` (or bare `key=value`) options are understood, which is all Kafka's login
modules take.
"""
import re

from .types import ConfigError

_ENTRY = re.compile(r"""\s*(?P<module>[\w.$]+)\s+(?P<flag>required|requisite|sufficient|optional)
                        (?P<options>(?:\s+[\w.\-]+\s*=\s*(?:"(?:[^"\\]|\\.)*"|[^\s;"]+))*)\s*;\s*""",
                    re.VERBOSE)
_OPTION = re.compile(r"""([\w.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))""")

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


def parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """(login module class name, {option: value}) of one JAAS entry; ConfigError otherwise."""
    match = _ENTRY.fullmatch(text.strip() if text.strip().endswith(";") else text.strip() + ";")
    if match is None:
        raise ConfigError("sasl.jaas.config must look like '<LoginModule> required "
                          "username=\"...\" password=\"...\";' (the value given is not "
                          "shown: it may hold a password)")
    options = {}
    for key, quoted, bare in _OPTION.findall(match.group("options")):
        options[key] = re.sub(r"\\(.)", r"\1", quoted) if bare == "" else bare
    return match.group("module"), options


def client_credentials(text: str) -> tuple[str, str]:
    """(username, password) of a client's PlainLoginModule or ScramLoginModule entry."""
    module, options = parse_jaas(text)
    if module.rsplit(".", 1)[-1] not in ("PlainLoginModule", "ScramLoginModule"):
        raise ConfigError(f"sasl.jaas.config: minilog supports PlainLoginModule and "
                          f"ScramLoginModule, got {module}")
    try:
        return options["username"], options["password"]
    except KeyError as e:
        raise ConfigError(f"sasl.jaas.config: {module} needs {e.args[0]}=\"...\"") from None


def plain_users(text: str) -> dict[str, str]:
    """{user: password} from a broker's PlainLoginModule entry (`user_alice="secret"`)."""
    _, options = parse_jaas(text)
    return {k[len("user_"):]: v for k, v in options.items() if k.startswith("user_")}
