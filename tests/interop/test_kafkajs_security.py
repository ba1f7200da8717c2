"""kafkajs 2.2 over SSL, SASL_PLAINTEXT and SASL_SSL with PLAIN and both SCRAMs: a client we
did not write, against the broker that listens with every protocol (security_tools)."""
import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest
from security_tools import COMBINATIONS, IDS, PASSWORD, USER, SecureBroker, make_certificates

HERE = Path(__file__).parent
SECURED = [(c, i) for c, i in zip(COMBINATIONS, IDS) if c[0] != "PLAINTEXT"]


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory):
    """The suite's broker of every protocol, without the 3 s a new group waits for members:
    each combination joins a group of its own."""
    b = SecureBroker(make_certificates(tmp_path_factory.mktemp("certs")),
                     extra=["-o", "group.initial.rebalance.delay.ms=0"]).start()
    yield b
    b.cleanup()


def _run(kafkajs: Path, settings: dict) -> dict:
    r = subprocess.run(["node", str(HERE / "kafkajs_secure.js"), json.dumps(settings)],
                       check=False, capture_output=True, text=True, timeout=120,
                       env={"NODE_PATH": str(kafkajs), "PATH": os.environ["PATH"]})
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _settings(broker: SecureBroker, protocol: str, mechanism, password: str = PASSWORD) -> dict:
    return {"bootstrap": broker.bootstrap_for(protocol), "topic": f"js-{uuid.uuid4().hex[:8]}",
            "count": 20, "ca": str(broker.certs.ca) if "SSL" in protocol else None,
            "mechanism": mechanism, "username": USER, "password": password, "retries": 5}


@pytest.mark.parametrize("protocol,mechanism", [c for c, _ in SECURED], ids=[i for _, i in SECURED])
def test_kafkajs_produces_and_consumes_in_a_group(secure_broker, kafkajs, protocol, mechanism):
    out = _run(kafkajs, _settings(secure_broker, protocol, mechanism))
    assert sorted(out["got"], key=lambda v: int(v[1:])) == [f"v{i}" for i in range(20)]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kafkajs_wrong_password_is_a_sasl_authentication_failure(secure_broker, kafkajs, mechanism):
    settings = {**_settings(secure_broker, "SASL_SSL", mechanism, password="wrong"),
                "expectFailure": True, "retries": 0}
    out = _run(kafkajs, settings)
    assert out["error"] == "KafkaJSSASLAuthenticationError", out
    assert out["message"].endswith("Authentication failed during authentication due to invalid "
                                   f"credentials with SASL mechanism {mechanism}"), out
