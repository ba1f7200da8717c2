"""Configuration by Kafka's names: coercion from strings, validation, clear errors."""
import pytest
from minilog.connector.client import Config, ConfigError


def test_strings_are_coerced_as_the_cli_passes_them():
    c = Config("producer", {"bootstrap.servers": "a:1, b:2", "linger.ms": "20",
                            "acks": "1", "enable.idempotence": "false",
                            "compression.type": "ZSTD"})
    assert c["bootstrap.servers"] == [("a", 1), ("b", 2)]
    assert (c["linger.ms"], c["acks"], c["enable.idempotence"]) == (20, 1, False)
    assert c["compression.type"] == "zstd" and c["batch.size"] == 16384


def test_idempotence_defaults_on_with_acks_all_and_is_checked():
    assert Config("producer", {"bootstrap.servers": "a:1"})["enable.idempotence"] is True
    assert Config("producer", {"bootstrap.servers": "a:1", "acks": 1})["enable.idempotence"] is False
    with pytest.raises(ConfigError, match="acks=all"):
        Config("producer", {"bootstrap.servers": "a:1", "acks": "1", "enable.idempotence": True})
    with pytest.raises(ConfigError, match="<= 5"):
        Config("producer", {"bootstrap.servers": "a:1", "enable.idempotence": "true",
                            "max.in.flight.requests.per.connection": 6})


def test_mistakes_are_errors_with_a_hint():
    with pytest.raises(ConfigError, match="did you mean 'linger.ms'"):
        Config("producer", {"bootstrap.servers": "a:1", "linger.m": 5})
    with pytest.raises(ConfigError, match="integer"):
        Config("consumer", {"bootstrap.servers": "a:1", "fetch.min.bytes": "lots"})
    with pytest.raises(ConfigError, match="earliest, latest, none"):
        Config("consumer", {"bootstrap.servers": "a:1", "auto.offset.reset": "start"})
    with pytest.raises(ConfigError, match="host:port"):
        Config("admin", {"bootstrap.servers": "nohostport"})
    with pytest.raises(ConfigError, match="required"):
        Config("admin", {})
    with pytest.raises(ConfigError, match="enable.idempotence"):
        Config("producer", {"bootstrap.servers": "a:1", "transactional.id": "x",
                            "enable.idempotence": False})


def test_other_roles_keys_are_accepted_so_one_dict_serves_all():
    shared = {"bootstrap.servers": "a:1", "acks": "all", "group.id": "g",
              "auto.offset.reset": "smallest"}
    assert Config("consumer", shared)["auto.offset.reset"] == "earliest"
    assert "group.id" not in Config("producer", shared)
