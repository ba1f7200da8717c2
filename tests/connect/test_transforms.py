"""Single Message Transforms and predicates, configured as Kafka Connect configures them, run by
a `minilog connect` worker process against a real broker: records produced with
confluent-kafka go through a FileStreamSink's chain (JsonConverter with and without schemas),
a FileStreamSource's chain routes lines to another topic, and bad transform settings are
answered as Connect answers them (over urllib and curl). One worker for the module."""
import json
import subprocess

import pyarrow as pa
import pytest
from connecttools import ConnectWorker
from minilog.connect.converters import converter
from minilog.connect.field_transforms import DataException
from minilog.connect.transforms import transform_chain
from sparktools import consume_all, create_topic, produce, unique
from waiting import wait_until

pytestmark = pytest.mark.timeout(600)

T = "org.apache.kafka.connect.transforms."
P = T + "predicates."
SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
JSON = "org.apache.kafka.connect.json.JsonConverter"
DEADLINE = 480.0  # a connector's first records through Spark on a loaded machine
STAMP = 1_700_000_000_123  # the records' Kafka timestamp, ms
SCHEMA = {"type": "struct", "optional": False, "fields": [
    {"field": "id", "type": "int64", "optional": False},
    {"field": "name", "type": "string", "optional": True},
    {"field": "card", "type": "string", "optional": True},
    {"field": "paid", "type": "int64", "optional": True,
     "name": "org.apache.kafka.connect.data.Timestamp", "version": 1}]}


@pytest.fixture(scope="module")
def worker(broker, tmp_path_factory):
    w = ConnectWorker(tmp_path_factory.mktemp("connect-smt"), broker.bootstrap).start()
    yield w
    w.stop()


def lines_of(path):
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []


def task(worker, name):
    status, body = worker.call("GET", f"/connectors/{name}/status")
    return body["tasks"][0] if status == 200 and body["tasks"] else {}


def start(worker, name, config):
    status, body = worker.call("PUT", f"/connectors/{name}/config", config)
    assert status == 201, body


def sink_lines(worker, name, path, count):
    """The sink's first `count` lines, once written (or the task's trace if it failed)."""
    def written():
        assert task(worker, name).get("state") != "FAILED", task(worker, name)
        return len(lines_of(path)) >= count
    wait_until(written, DEADLINE, f"{count} lines from {name}")
    return [json.loads(line) for line in lines_of(path)]


def test_plugins_list_transforms_and_predicates_unless_connectors_only(worker):
    status, every = worker.call("GET", "/connector-plugins?connectorsOnly=false")
    assert status == 200
    listed = {(p["class"], p["type"]) for p in every}
    for name in ("InsertField$Value", "InsertField$Key", "ReplaceField$Value",
                 "MaskField$Value", "TimestampConverter$Value", "RegexRouter", "Filter"):
        assert (T + name, "transformation") in listed
    for name in ("TopicNameMatches", "HasHeaderKey", "RecordIsTombstone"):
        assert (P + name, "predicate") in listed
    assert (SINK, "sink") in listed and (JSON, "converter") in listed
    status, connectors = worker.call("GET", "/connector-plugins")
    assert {p["type"] for p in connectors} == {"source", "sink"}


def setup_schemas(worker, broker, directory):
    """InsertField, MaskField, ReplaceField and TimestampConverter on Connect structs; a Filter
    drops tombstones, another the records with a `skip` header; the first id is past both."""
    topic = create_topic(broker.bootstrap, unique("orders"))

    def envelope(i):
        return json.dumps({"schema": SCHEMA, "payload": {
            "id": i, "name": f"n{i}", "card": "4111-1111", "paid": STAMP + i}}).encode()
    produce(broker.bootstrap, topic, [
        (0, b"k0", envelope(0), [("skip", b"1")], STAMP), (0, b"k1", envelope(1), None, STAMP),
        (0, b"k2", None, None, STAMP), (0, b"k3", envelope(3), [("other", b"")], STAMP)])
    out = directory / "schemas.txt"
    start(worker, "smt-schemas", {
        "connector.class": SINK, "topics": topic, "file": str(out),
        "value.converter": JSON, "value.converter.schemas.enable": "true",
        "transforms": "tombstones,skipped,meta,mask,rename,paid",
        "predicates": "isTombstone,hasSkip",
        "predicates.isTombstone.type": P + "RecordIsTombstone",
        "predicates.hasSkip.type": P + "HasHeaderKey", "predicates.hasSkip.name": "skip",
        "transforms.tombstones.type": T + "Filter",
        "transforms.tombstones.predicate": "isTombstone",
        "transforms.skipped.type": T + "Filter", "transforms.skipped.predicate": "hasSkip",
        "transforms.meta.type": T + "InsertField$Value", "transforms.meta.topic.field": "src",
        "transforms.meta.offset.field": "off!", "transforms.meta.timestamp.field": "at",
        "transforms.meta.static.field": "env", "transforms.meta.static.value": "prod",
        "transforms.mask.type": T + "MaskField$Value", "transforms.mask.fields": "card",
        "transforms.mask.replacement": "****",
        "transforms.rename.type": T + "ReplaceField$Value",
        "transforms.rename.renames": "name:full_name", "transforms.rename.exclude": "env",
        "transforms.paid.type": T + "TimestampConverter$Value", "transforms.paid.field": "paid",
        "transforms.paid.target.type": "string",
        "transforms.paid.format": "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"})
    return {"topic": topic, "out": out}


def setup_schemaless(worker, broker, directory):
    """Schemaless maps; RegexRouter renames the topic before InsertField reads it; a negated
    TopicNameMatches keeps the Filter off this topic; TimestampConverter reads epoch seconds."""
    topic = create_topic(broker.bootstrap, unique("clicks"))
    produce(broker.bootstrap, topic, [
        (0, None, json.dumps({"user": f"u{i}", "secret": 42, "at": 1_700_000_000 + i,
                              "drop": True}).encode(), None, STAMP) for i in range(3)])
    out = directory / "schemaless.txt"
    start(worker, "smt-schemaless", {
        "connector.class": SINK, "topics": topic, "file": str(out),
        "value.converter": JSON, "value.converter.schemas.enable": "false",
        "transforms": "others,route,where,mask,slim,day", "predicates": "mine",
        "predicates.mine.type": P + "TopicNameMatches", "predicates.mine.pattern": "clicks.*",
        "transforms.others.type": T + "Filter", "transforms.others.predicate": "mine",
        "transforms.others.negate": "true",
        "transforms.route.type": T + "RegexRouter", "transforms.route.regex": "clicks(.*)",
        "transforms.route.replacement": "web$1",
        "transforms.where.type": T + "InsertField$Value", "transforms.where.topic.field": "t",
        "transforms.where.partition.field": "p",
        "transforms.mask.type": T + "MaskField$Value", "transforms.mask.fields": "secret",
        "transforms.slim.type": T + "ReplaceField$Value", "transforms.slim.exclude": "drop",
        "transforms.day.type": T + "TimestampConverter$Value", "transforms.day.field": "at",
        "transforms.day.target.type": "string", "transforms.day.format": "yyyy-MM-dd HH:mm:ss",
        "transforms.day.unix.precision": "seconds"})
    return {"routed": "web" + topic.removeprefix("clicks"), "out": out}


def setup_source(worker, broker, directory):
    """A source's RegexRouter sends the file's lines to another topic than its `topic`."""
    topic = create_topic(broker.bootstrap, unique("raw"))
    routed = create_topic(broker.bootstrap, "cooked" + topic.removeprefix("raw"))
    source = directory / "in.txt"
    source.write_text("".join(f"line {i}\n" for i in range(5)))
    start(worker, "smt-source", {
        "connector.class": SOURCE, "file": str(source), "topic": topic,
        "transforms": "route", "transforms.route.type": T + "RegexRouter",
        "transforms.route.regex": "raw(.*)", "transforms.route.replacement": "cooked$1"})
    return {"topic": topic, "routed": routed}


def setup_fails(worker, broker, directory):
    """MaskField needs a struct or a map: a StringConverter value fails as it does in Kafka."""
    topic = create_topic(broker.bootstrap, unique("plain"))
    produce(broker.bootstrap, topic, [(0, None, b"just text", None)])
    start(worker, "smt-fails", {
        "connector.class": SINK, "topics": topic, "file": str(directory / "fails.txt"),
        "transforms": "mask", "transforms.mask.type": T + "MaskField$Value",
        "transforms.mask.fields": "x"})
    return {}


def setup_nothing(worker, broker, directory):
    """InsertField with nothing to insert: valid settings, refused when the task configures it."""
    start(worker, "smt-nothing", {
        "connector.class": SINK, "topics": "t-nothing", "file": str(directory / "nothing.txt"),
        "transforms": "ins", "transforms.ins.type": T + "InsertField$Value"})
    return {}


@pytest.fixture(scope="module")
def pipelines(worker, broker, tmp_path_factory):
    """Every pipeline's connector created at once, so that their queries start and run side
    by side in the worker (the module's time is the slowest one's, not their sum); each test
    then checks its own, and deletes it."""
    directory = tmp_path_factory.mktemp("smt-pipelines")
    return {name: setup(worker, broker, directory) for name, setup in (
        ("schemas", setup_schemas), ("schemaless", setup_schemaless),
        ("source", setup_source), ("fails", setup_fails), ("nothing", setup_nothing))}


def test_sink_chain_over_json_with_schemas(worker, pipelines):
    got = sink_lines(worker, "smt-schemas", pipelines["schemas"]["out"], 2)
    assert got == [
        {"id": i, "full_name": f"n{i}", "card": "****",
         "paid": f"2023-11-14T22:13:20.{123 + i}Z", "src": pipelines["schemas"]["topic"],
         "off": i, "at": STAMP} for i in (1, 3)]
    assert worker.call("DELETE", "/connectors/smt-schemas")[0] == 204


def test_sink_chain_over_schemaless_json_and_a_router(worker, pipelines):
    got = sink_lines(worker, "smt-schemaless", pipelines["schemaless"]["out"], 3)
    assert got == [{"user": f"u{i}", "secret": 0, "at": f"2023-11-14 22:13:2{i}",
                    "t": pipelines["schemaless"]["routed"], "p": 0} for i in range(3)]
    assert worker.call("DELETE", "/connectors/smt-schemaless")[0] == 204


def test_source_chain_routes_lines_to_another_topic(worker, broker, pipelines):
    topics = pipelines["source"]
    records = consume_all(broker.bootstrap, topics["routed"], 1, expect=5, deadline=DEADLINE)
    assert [v.decode() for _, _, _, v, _ in records] == [f"line {i}" for i in range(5)]
    assert consume_all(broker.bootstrap, topics["topic"], 1) == []
    assert worker.call("DELETE", "/connectors/smt-source")[0] == 204


def test_a_record_a_transform_cannot_take_fails_the_task_with_connects_message(worker,
                                                                              pipelines):
    wait_until(lambda: task(worker, "smt-fails").get("state") == "FAILED", DEADLINE, "FAILED")
    assert "Only Struct objects supported for [mask fields], found: java.lang.String" \
        in task(worker, "smt-fails")["trace"]
    assert worker.call("DELETE", "/connectors/smt-fails")[0] == 204


def test_a_transform_that_refuses_its_settings_fails_at_start(worker, pipelines):
    wait_until(lambda: task(worker, "smt-nothing").get("state") == "FAILED", DEADLINE, "FAILED")
    assert "No field insertion configured" in task(worker, "smt-nothing")["trace"]
    assert worker.call("DELETE", "/connectors/smt-nothing")[0] == 204


def test_validate_lists_each_transform_settings_errors(worker):
    status, body = worker.call("PUT", "/connector-plugins/FileStreamSink/config/validate", {
        "connector.class": "FileStreamSink", "name": "v", "topics": "t", "file": "/tmp/v",
        "transforms": "route,ts,mask,nope,neg", "predicates": "p",
        "transforms.route.type": T + "RegexRouter", "transforms.route.replacement": "x",
        "transforms.ts.type": T + "TimestampConverter$Value",
        "transforms.ts.target.type": "Instant",
        "transforms.mask.type": T + "MaskField$Value", "transforms.mask.fields": "",
        "transforms.nope.type": "com.example.NoSuchTransform",
        "transforms.neg.type": T + "Filter", "transforms.neg.negate": "true",
        "predicates.p.type": P + "TopicNameMatches", "predicates.p.pattern": "(unclosed"})
    assert status == 200
    errors = {c["value"]["name"]: c["value"]["errors"] for c in body["configs"]
              if c["value"]["errors"]}
    assert errors.pop("transforms.route.regex") == [
        'Missing required configuration "transforms.route.regex" which has no default value.']
    assert errors.pop("transforms.ts.target.type") == [
        "Invalid value Instant for configuration transforms.ts.target.type: String must be one "
        "of: string, unix, Date, Time, Timestamp"]
    assert errors.pop("transforms.mask.fields") == [
        "Invalid value [] for configuration transforms.mask.fields: Empty list"]
    assert errors.pop("transforms.nope.type") == [
        "Invalid value com.example.NoSuchTransform for configuration transforms.nope.type: "
        "Class com.example.NoSuchTransform could not be found."]
    assert errors.pop("transforms.neg.type") == [
        "Config 'transforms.neg.negate' was provided but there is no config "
        "'transforms.neg.predicate' defining a predicate to be negated."]
    assert errors.pop("predicates.p.pattern")[0].startswith(
        "Invalid value (unclosed for configuration predicates.p.pattern: Invalid regex: ")
    assert errors == {} and body["error_count"] == 6
    assert {"Transforms", "Predicates", "Transforms: route", "Predicates: p"} <= set(
        body["groups"])


def test_create_with_an_unknown_transform_is_400_over_curl(worker, tmp_path):
    """As a Connect user checks it: curl, the status and Connect's message."""
    body = json.dumps({"name": "smt-bad", "config": {
        "connector.class": SINK, "topics": "t", "file": str(tmp_path / "x"),
        "transforms": "a,b", "transforms.a.type": T + "InsertField$Valu",
        "transforms.b.type": T + "RegexRouter", "transforms.b.regex": "x"}})
    result = subprocess.run(
        ["curl", "-sS", "--max-time", "60", "-o", "-", "-w", "\n%{http_code}", "-X", "POST",
         "-H", "Content-Type: application/json", "--data", body, f"{worker.url}/connectors"],
        capture_output=True, text=True, timeout=90, check=True)
    answer, code = result.stdout.rsplit("\n", 1)
    assert code == "400"
    message = json.loads(answer)["message"]
    assert message.splitlines()[:3] == [
        "Connector configuration is invalid and contains the following 2 error(s):",
        f"Invalid value {T}InsertField$Valu for configuration transforms.a.type: Class "
        f"{T}InsertField$Valu could not be found.",
        'Missing required configuration "transforms.b.replacement" which has no default '
        'value.']
    assert worker.call("GET", "/connectors/smt-bad")[0] == 404


# ---- the chain on Arrow batches, without a worker: the cases too many for a pipeline each ----
def chain_of(settings, value_converter=JSON, schemas="true", sink=True):
    """The chain the worker's query would run (on Spark's Arrow batches), built from `settings`."""
    converters = {"key": converter({"converter": value_converter, "schemas.enable": schemas}),
                  "value": converter({"converter": value_converter, "schemas.enable": schemas})}
    return transform_chain(settings, converters, sink)


def batch_of(values, topics=None, keys=None):
    n = len(values)
    return pa.RecordBatch.from_pydict({
        "key": pa.array(keys or [None] * n, pa.binary()), "value": pa.array(values, pa.binary()),
        "topic": topics or ["t"] * n, "partition": pa.array([0] * n, pa.int32()),
        "offset": pa.array(range(n), pa.int64())})


def envelope_of(schema, payload):
    return json.dumps({"schema": schema, "payload": payload}).encode()


def test_timestamp_converter_between_connects_logical_types():
    """Timestamp → Date and Time (JsonConverter's days and ms of the day), a string parsed with
    a SimpleDateFormat → unix micros, with the schema updated as Kafka updates it."""
    schema = {"type": "struct", "optional": False, "fields": [
        {"field": "at", "type": "int64", "optional": True,
         "name": "org.apache.kafka.connect.data.Timestamp", "version": 1},
        {"field": "when", "type": "string", "optional": False}]}
    value = envelope_of(schema, {"at": 86_400_000 * 3 + 5_000, "when": "03/01/1970 00:00:05"})
    for target, expected in (("Date", 3), ("Time", 5_000), ("unix", 86_400_000 * 3 + 5_000)):
        out = chain_of({"transforms": "c", "transforms.c.type": T + "TimestampConverter$Value",
                        "transforms.c.field": "at", "transforms.c.target.type": target}
                       ).apply(batch_of([value]))
        got = json.loads(out.column("value")[0].as_py())
        assert got["payload"]["at"] == expected, target
        assert got["schema"]["fields"][0]["type"] == ("int32" if target != "unix" else "int64")
    out = chain_of({"transforms": "c", "transforms.c.type": T + "TimestampConverter$Value",
                    "transforms.c.field": "when", "transforms.c.target.type": "unix",
                    "transforms.c.format": "dd/MM/yyyy HH:mm:ss",
                    "transforms.c.unix.precision": "microseconds"}).apply(batch_of([value]))
    got = json.loads(out.column("value")[0].as_py())
    assert got["payload"]["when"] == (86_400_000 * 2 + 5_000) * 1000
    assert got["schema"]["fields"][1] == {"type": "int64", "optional": False, "field": "when"}


def test_mask_field_masks_by_type_and_refuses_what_kafka_refuses():
    value = json.dumps({"n": 5, "x": 1.5, "b": True, "s": "secret", "l": [1], "m": {"a": 1},
                        "keep": "me"}).encode()
    out = chain_of({"transforms": "m", "transforms.m.type": T + "MaskField$Value",
                    "transforms.m.fields": "n,x,b,s,l,m,absent"}, schemas="false"
                   ).apply(batch_of([value]))
    assert json.loads(out.column("value")[0].as_py()) == {
        "n": 0, "x": 0.0, "b": False, "s": "", "l": [], "m": {}, "keep": "me", "absent": None}
    with pytest.raises(DataException, match=r"Cannot mask value of type class "
                        r"java.lang.Boolean with custom replacement."):
        chain_of({"transforms": "m", "transforms.m.type": T + "MaskField$Value",
                  "transforms.m.fields": "b", "transforms.m.replacement": "x"},
                 schemas="false").apply(batch_of([value]))


def test_key_transforms_and_a_router_apply_only_where_the_predicate_says():
    keys = [json.dumps({"id": i, "pii": "p"}).encode() for i in range(3)]
    out = chain_of({
        "transforms": "k,r", "predicates": "a",
        "predicates.a.type": P + "TopicNameMatches", "predicates.a.pattern": "a.*",
        "transforms.k.type": T + "ReplaceField$Key", "transforms.k.include": "id",
        "transforms.k.predicate": "a",
        "transforms.r.type": T + "RegexRouter", "transforms.r.regex": "(a|b)-(.*)",
        "transforms.r.replacement": "$2.$1", "transforms.r.predicate": "a",
        "transforms.r.negate": "true"}, schemas="false").apply(
        batch_of([b"{}"] * 3, topics=["a-1", "b-2", "c"], keys=keys))
    assert out.column("topic").to_pylist() == ["a-1", "2.b", "c"]
    assert [json.loads(k) for k in out.column("key").to_pylist()] == [
        {"id": 0}, {"id": 1, "pii": "p"}, {"id": 2, "pii": "p"}]
