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


def failure(worker, name):
    """A failed task's trace whole (Python's traceback sits inside Spark's), and the worker's
    log: what a failure on a loaded machine needs to be understood from its report alone."""
    return (f"{name} failed:\n{task(worker, name).get('trace')}\n--- the worker's log, its end "
            f"---\n{worker.log[-6000:]}")


def start(worker, name, config):
    status, body = worker.call("PUT", f"/connectors/{name}/config", config)
    assert status == 201, body


def sink_lines(worker, name, path, count):
    """The sink's first `count` lines, once written (or the task's trace if it failed)."""
    def written():
        assert task(worker, name).get("state") != "FAILED", failure(worker, name)
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


NESTED = {"type": "struct", "optional": False, "fields": [
    {"field": "id", "type": "int64", "optional": False},
    {"field": "score", "type": "float64", "optional": True},
    {"field": "address", "type": "struct", "optional": True, "fields": [
        {"field": "city", "type": "string", "optional": False},
        {"field": "zip", "type": "string", "optional": False}]},
    {"field": "tags", "type": "array", "optional": True, "items": {"type": "string"}}]}


def setup_flatten_cast(worker, broker, directory):
    """Flatten opens a nested struct (and an optional one that is null), then Cast narrows,
    parses and prints fields as Java does."""
    topic = create_topic(broker.bootstrap, unique("nested"))
    produce(broker.bootstrap, topic, [
        (0, None, envelope_of(NESTED, {"id": 300, "score": 1e10, "tags": ["a"],
                                       "address": {"city": "Boston", "zip": "02139"}}), None),
        (0, None, envelope_of(NESTED, {"id": 7, "score": 0.5, "tags": None, "address": None}),
         None)])
    out = directory / "flat.txt"
    start(worker, "smt-flatten-cast", {
        "connector.class": SINK, "topics": topic, "file": str(out),
        "value.converter": JSON, "value.converter.schemas.enable": "true",
        "transforms": "flat,cast",
        "transforms.flat.type": T + "Flatten$Value", "transforms.flat.delimiter": "_",
        "transforms.cast.type": T + "Cast$Value",
        "transforms.cast.spec": "id:int8,score:string,address_zip:int32"})
    return {"out": out}


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
        ("source", setup_source), ("fails", setup_fails), ("nothing", setup_nothing),
        ("flatten_cast", setup_flatten_cast))}


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


def test_flatten_then_cast_in_a_sink(worker, pipelines):
    got = sink_lines(worker, "smt-flatten-cast", pipelines["flatten_cast"]["out"], 2)
    assert got == [
        {"id": 44, "score": "1.0E10", "address_city": "Boston", "address_zip": 2139,
         "tags": ["a"]},
        {"id": 7, "score": "0.5", "address_city": None, "address_zip": None, "tags": None}]
    assert worker.call("DELETE", "/connectors/smt-flatten-cast")[0] == 204


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


def test_validate_answers_casts_spec_as_kafka_does(worker):
    def errors(spec):
        config = {"connector.class": "FileStreamSink", "name": "v", "topics": "t",
                  "file": "/tmp/v", "transforms": "c,f", "transforms.c.type": T + "Cast$Key",
                  "transforms.f.type": T + "Flatten$Value"}
        if spec is not None:
            config["transforms.c.spec"] = spec
        status, body = worker.call("PUT", "/connector-plugins/FileStreamSink/config/validate",
                                   config)
        assert status == 200
        found = {c["value"]["name"]: c["value"]["errors"] for c in body["configs"]
                 if c["value"]["errors"]}
        assert body["error_count"] == len(found)
        return found
    assert errors("a:int8,b:float32") == {}
    assert errors(None) == {"transforms.c.spec": [
        'Missing required configuration "transforms.c.spec" which has no default value.']}
    assert errors("") == {"transforms.c.spec": ["Must specify at least one field to cast."]}
    assert errors("a:bytes") == {"transforms.c.spec": [
        "Cast transformation does not support casting to BYTES; supported types are [INT8, "
        "INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING]"]}
    assert errors("a:int7") == {"transforms.c.spec": [
        "Invalid type found in casting spec: int7"]}
    assert errors("int8,a:string") == {"transforms.c.spec": [
        "Cast transformations that specify a type to cast the entire value to may ony specify "
        "a single cast in their spec"]}


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


def test_cast_converts_as_java_and_updates_the_schema():
    schema = {"type": "struct", "optional": False, "fields": [
        {"field": "small", "type": "int64", "optional": False},
        {"field": "ratio", "type": "float32", "optional": True, "default": 1.5},
        {"field": "flag", "type": "string", "optional": False},
        {"field": "big", "type": "float64", "optional": False},
        {"field": "at", "type": "int64", "optional": False,
         "name": "org.apache.kafka.connect.data.Timestamp", "version": 1},
        {"field": "kept", "type": "string", "optional": False}]}
    value = envelope_of(schema, {"small": 65_537, "ratio": None, "flag": "TRUE", "big": -3e9,
                                 "at": STAMP, "kept": "x"})
    out = chain_of({"transforms": "c", "transforms.c.type": T + "Cast$Value",
                    "transforms.c.spec": "small:int16,ratio:string,flag:boolean,big:int32,"
                                         "at:string"}).apply(batch_of([value]))
    got = json.loads(out.column("value")[0].as_py())
    assert got["payload"] == {"small": 1, "ratio": "1.5", "flag": True, "big": -2_147_483_648,
                              "at": "2023-11-14T22:13:20.123Z", "kept": "x"}
    assert got["schema"]["fields"] == [
        {"type": "int16", "optional": False, "field": "small"},
        {"type": "string", "optional": True, "field": "ratio", "default": "1.5"},
        {"type": "boolean", "optional": False, "field": "flag"},
        {"type": "int32", "optional": False, "field": "big"},
        {"type": "string", "optional": False, "field": "at"},
        {"field": "kept", "type": "string", "optional": False}]
    with pytest.raises(DataException, match=r"^Value \(12x\) was out of range for requested "
                                            r"data type$"):
        chain_of({"transforms": "c", "transforms.c.type": T + "Cast$Value",
                  "transforms.c.spec": "kept:int64"}).apply(batch_of([envelope_of(
                      schema, {"small": 1, "ratio": 1.0, "flag": "", "big": 0.0, "at": 0,
                               "kept": "12x"})]))


def test_cast_of_a_whole_string_key_and_of_schemaless_fields():
    """A StringConverter key cast as a whole to int64; schemaless fields inferred as a Long, a
    Double, a String; a map refused with Kafka's message."""
    string = converter({"converter": "org.apache.kafka.connect.storage.StringConverter"})
    plain = converter({"converter": JSON, "schemas.enable": "false"})
    chain = transform_chain({"transforms": "k,v", "transforms.k.type": T + "Cast$Key",
                             "transforms.k.spec": "int64", "transforms.v.type": T + "Cast$Value",
                             "transforms.v.spec": "n:int8,x:float32,s:float64,missing:string"},
                            {"key": string, "value": plain}, True)
    out = chain.apply(batch_of([json.dumps({"n": 255, "x": 0.1, "s": " 2.5e3 "}).encode()],
                               keys=[b"00042"]))
    assert out.column("key").to_pylist() == [b"42"]
    assert json.loads(out.column("value")[0].as_py()) == {
        "n": -1, "x": pytest.approx(0.1, rel=1e-7), "s": 2500.0, "missing": None}
    with pytest.raises(DataException, match=r"^Cast transformation does not support casting "
                                            r"from MAP; supported types are \[INT8, INT16, "
                                            r"INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING, "
                                            r"BYTES\]$"):
        chain.apply(batch_of([json.dumps({"n": {"a": 1}}).encode()], keys=[b"1"]))


def test_flatten_with_a_schema_keeps_optionality_and_defaults():
    schema = {"type": "struct", "optional": False, "name": "Order", "fields": [
        {"field": "id", "type": "int32", "optional": False},
        {"field": "ship", "type": "struct", "optional": True,
         "default": {"to": {"city": "Paris"}}, "fields": [
             {"field": "to", "type": "struct", "optional": False, "fields": [
                 {"field": "city", "type": "string", "optional": False}]}]}]}
    out = chain_of({"transforms": "f", "transforms.f.type": T + "Flatten$Value"}).apply(
        batch_of([envelope_of(schema, {"id": 1, "ship": {"to": {"city": "Oslo"}}}),
                  envelope_of(schema, {"id": 2, "ship": None}), None]))
    got = [json.loads(v) if v else None for v in out.column("value").to_pylist()]
    assert got[0]["schema"] == {"name": "Order", "type": "struct", "optional": False,
                                "fields": [
        {"type": "int32", "optional": False, "field": "id"},
        {"type": "string", "optional": True, "default": "Paris", "field": "ship.to.city"}]}
    assert [g["payload"] for g in got[:2]] == [{"id": 1, "ship.to.city": "Oslo"},
                                           {"id": 2, "ship.to.city": "Paris"}]
    assert got[2] is None  # a tombstone goes through
    mapped = {**schema, "fields": [{"field": "m", "type": "map", "optional": True,
                                    "keys": {"type": "string"}, "values": {"type": "string"}}]}
    with pytest.raises(DataException, match=r"^Flatten transformation does not support MAP for "
                                            r"record with schemas \(for field m\)\.$"):
        chain_of({"transforms": "f", "transforms.f.type": T + "Flatten$Value"}).apply(
            batch_of([envelope_of(mapped, {"m": {}})]))
    with pytest.raises(DataException, match=r"^Only Map objects supported in absence of schema "
                                            r"for \[flattening\], found: java.lang.Long$"):
        chain_of({"transforms": "f", "transforms.f.type": T + "Flatten$Key"},
                 schemas="false").apply(batch_of([b"{}"], keys=[b"5"]))
