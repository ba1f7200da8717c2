"""kcat (Debian's, built with librdkafka's SSL and SASL) produces and consumes over every
security protocol and mechanism, configured with -X as its users do."""
import shutil
import subprocess
import uuid

import pytest
from security_tools import COMBINATIONS, IDS, librdkafka_settings

pytestmark = pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")


def _kcat(conf, *args, input=None):
    settings = [a for k, v in conf.items() if k != "bootstrap.servers"
                for a in ("-X", f"{'sasl.mechanisms' if k == 'sasl.mechanism' else k}={v}")]
    return subprocess.run(["kcat", "-b", conf["bootstrap.servers"], *settings, *args],
                          input=input, capture_output=True, timeout=120, check=False)


@pytest.mark.parametrize("protocol,mechanism", COMBINATIONS, ids=IDS)
def test_kcat_produces_and_consumes(secure_broker, protocol, mechanism):
    conf = librdkafka_settings(secure_broker, protocol, mechanism)
    topic = f"kcat-{uuid.uuid4().hex[:8]}"
    produced = _kcat(conf, "-P", "-t", topic, input=b"one\ntwo\n")
    assert produced.returncode == 0, produced.stderr.decode()
    consumed = _kcat(conf, "-C", "-t", topic, "-o", "beginning", "-e", "-c", "2")
    assert consumed.returncode == 0, consumed.stderr.decode()
    assert consumed.stdout.decode().split() == ["one", "two"]


def test_kcat_with_a_wrong_password_fails_and_says_why(secure_broker):
    conf = librdkafka_settings(secure_broker, "SASL_SSL", "SCRAM-SHA-256", password="wrong")
    r = _kcat(conf, "-L", "-m", "10")
    assert r.returncode != 0 and b"Authentication failed" in r.stderr
