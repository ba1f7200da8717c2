"""SCRAM credentials through KIP-554's admin APIs, driven by confluent-kafka's AdminClient:
what it creates logs in, what it deletes does not, and the broker keeps them across a restart."""
import pytest
from confluent_kafka import KafkaException
from confluent_kafka import Producer as CKProducer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from security_tools import SecureBroker, librdkafka_settings, make_certificates


def _admin(broker):
    return AdminClient(librdkafka_settings(broker, "SASL_SSL", "SCRAM-SHA-256"))


def _logs_in(broker, user, password, mechanism="SCRAM-SHA-512"):
    conf = librdkafka_settings(broker, "SASL_SSL", mechanism, user=user, password=password)
    try:
        CKProducer(conf).list_topics(timeout=15)
    except KafkaException:
        return False
    return True


def _alter(admin, alterations):
    for future in admin.alter_user_scram_credentials(alterations).values():
        future.result(60)


def test_a_user_created_by_confluent_kafka_logs_in_and_is_described(secure_broker):
    admin = _admin(secure_broker)
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    _alter(admin, [UserScramCredentialUpsertion("carol", info, b"carol-secret")])
    described = admin.describe_user_scram_credentials(["carol"])["carol"].result(60)
    assert [(c.mechanism, c.iterations) for c in described.scram_credential_infos] == \
        [(ScramMechanism.SCRAM_SHA_512, 8192)]
    assert _logs_in(secure_broker, "carol", "carol-secret")


def test_a_deleted_credential_no_longer_logs_in(secure_broker):
    admin = _admin(secure_broker)
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    _alter(admin, [UserScramCredentialUpsertion("dave", info, b"dave-secret")])
    _alter(admin, [UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_512)])
    with pytest.raises(KafkaException, match="RESOURCE_NOT_FOUND|does not exist"):
        admin.describe_user_scram_credentials(["dave"])["dave"].result(60)
    assert not _logs_in(secure_broker, "dave", "dave-secret")


def test_iterations_out_of_kafkas_bounds_are_refused(secure_broker):
    admin = _admin(secure_broker)
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100)
    with pytest.raises(KafkaException, match="UNACCEPTABLE_CREDENTIAL|Iterations"):
        _alter(admin, [UserScramCredentialUpsertion("erin", info, b"erin-secret")])


def test_credentials_survive_a_restart(secure_broker):
    admin = _admin(secure_broker)
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    _alter(admin, [UserScramCredentialUpsertion("frank", info, b"frank-secret")])
    secure_broker.stop()
    secure_broker.start()
    assert _logs_in(secure_broker, "frank", "frank-secret")


def test_seeds_do_not_undo_the_admin_api_across_a_restart(tmp_path):
    """`sasl.scram` seeds create a credential only where none was ever set (Kafka's
    `--add-scram`, applied once): a password rotated and a user deleted through
    AlterUserScramCredentials stay so when the broker restarts with the same settings."""
    seeds = ";".join(f"SCRAM-SHA-512=[name={u},password={u}-seed]" for u in ("root", "mallory"))
    broker = SecureBroker(make_certificates(tmp_path / "certs"),
                          extra=["-o", f"sasl.scram={seeds}"]).start()
    try:
        admin = AdminClient(librdkafka_settings(broker, "SASL_SSL", "SCRAM-SHA-512", "root",
                                                "root-seed"))
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
        _alter(admin, [UserScramCredentialUpsertion("root", info, b"root-rotated"),
                       UserScramCredentialDeletion("mallory", ScramMechanism.SCRAM_SHA_512)])
        broker.stop()
        broker.start()
        assert _logs_in(broker, "root", "root-rotated")
        assert not _logs_in(broker, "root", "root-seed")
        assert not _logs_in(broker, "mallory", "mallory-seed")
    finally:
        broker.cleanup()
