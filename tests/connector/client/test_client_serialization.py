"""JSON and Avro (Confluent framing) through a real broker and back."""
import time

import pytest
from clienttools import make_topic
from minilog.connector.client import Consumer, Producer, TopicPartition
from minilog.connector.client.serialization import (
    AvroDeserializer,
    AvroSerializer,
    JSONDeserializer,
    JSONSerializer,
    SerializationError,
)

pytestmark = pytest.mark.timeout(60)
SCHEMA = {"type": "record", "name": "Payment",
          "fields": [{"name": "account", "type": "string"}, {"name": "amount", "type": "long"}]}


def test_confluent_framing_is_magic_byte_then_schema_id():
    data = AvroSerializer(SCHEMA, schema_id=42)({"account": "alice", "amount": 5})
    assert data[:5] == b"\x00\x00\x00\x00\x2a"
    assert AvroDeserializer(schemas={42: SCHEMA})(data) == {"account": "alice", "amount": 5}
    with pytest.raises(SerializationError, match="unknown Avro schema id"):
        AvroDeserializer(schemas={7: SCHEMA})(data)
    with pytest.raises(SerializationError, match="magic"):
        AvroDeserializer(SCHEMA, framed=True)(b"\x01rest")
    with pytest.raises(SerializationError):
        AvroSerializer(SCHEMA)({"account": "bob"})
    with pytest.raises(SerializationError):
        AvroSerializer({"type": "nonsense"})


def test_bare_avro_and_json_and_tombstones():
    avro = AvroSerializer(SCHEMA)
    assert AvroDeserializer(SCHEMA)(avro({"account": "a", "amount": -1})) == \
        {"account": "a", "amount": -1}
    assert JSONDeserializer()(JSONSerializer()({"a": [1, 2]})) == {"a": [1, 2]}
    assert avro(None) is None and JSONSerializer()(None) is None
    with pytest.raises(SerializationError):
        JSONDeserializer()(b"{nope")


@pytest.mark.parametrize("fmt", ["json", "avro"])
def test_serializers_plug_into_producer_and_consumer(cluster, fmt):
    topic = make_topic(cluster.bootstrap)
    if fmt == "json":
        ser, de = JSONSerializer(), JSONDeserializer()
    else:
        ser, de = AvroSerializer(SCHEMA, schema_id=1), AvroDeserializer(schemas={1: SCHEMA})
    values = [{"account": f"acct-{i}", "amount": i * 100} for i in range(20)]
    with Producer({"bootstrap.servers": cluster.bootstrap, "value.serializer": ser}) as p:
        for v in values:
            p.send(topic, v, key=v["account"])
        assert p.flush(30) == 0
    with Consumer({"bootstrap.servers": cluster.bootstrap, "auto.offset.reset": "earliest",
                   "value.deserializer": de}) as c:
        c.assign([TopicPartition(topic, 0)])
        got, deadline = [], time.monotonic() + 30
        while len(got) < len(values) and time.monotonic() < deadline:
            got += c.poll(0.5)
    assert [r.value for r in got] == values
