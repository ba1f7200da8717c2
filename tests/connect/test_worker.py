"""`minilog connect` as a Connect user tries it: a worker process, a real broker, the REST API
over HTTP (urllib, curl, kafka-connect-py), FileStreamSource and FileStreamSink connectors through
their lives, Connect's answers to what it refuses. One worker (one Spark session) for the module;
the worker killed with -9 and restarted is test_kill9_pipelines.py."""
import json
import os
import re
import signal
import subprocess
import sys
import urllib.request

import pytest
from brokers import free_port, wait_for_port
from connecttools import ConnectWorker, append_lines, progress, task_state
from sparktools import consume_all, create_topic, produce, unique
from waiting import wait_until

pytestmark = pytest.mark.timeout(600)

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
DEADLINE = 480.0  # a connector's first lines through Spark, on a loaded machine (load 12 on 2 cores: minutes)


@pytest.fixture(scope="module")
def worker(broker, tmp_path_factory):
    w = ConnectWorker(tmp_path_factory.mktemp("connect"), broker.bootstrap).start()
    yield w
    w.stop()


def test_root_and_plugins_answer_as_connect(worker):
    status, root = worker.call("GET", "/")
    assert status == 200 and root["version"] and root["kafka_cluster_id"]
    status, plugins = worker.call("GET", "/connector-plugins")
    assert status == 200
    assert {(p["class"], p["type"]) for p in plugins} == {
        (SOURCE, "source"), (SINK, "sink"), ("io.confluent.connect.jdbc.JdbcSinkConnector", "sink"),
        *((f"org.apache.kafka.connect.mirror.Mirror{kind}Connector", "source")
          for kind in ("Source", "Checkpoint", "Heartbeat"))}


def console_page(console_port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{console_port}{path}", timeout=60) as page:
        return page.status, page.read().decode()


def row(page, row_id):
    found = re.search(rf'<tr id="{re.escape(row_id)}">(.*?)</tr>', page, re.S)
    assert found, f"no row {row_id} in:\n{page}"
    return {cls: value.strip() for cls, value in
            re.findall(r'<td class="([a-z-]+)">(.*?)</td>', found.group(1), re.S)}


def test_status_and_console_show_a_sinks_records_and_lag(worker, broker, tmp_path):
    """The sink's lag is its topic's end less what it has read: shown while it is paused, in
    its status and on the console's Connect page (one console for this worker, one for a
    worker that does not answer)."""
    topic = create_topic(broker.bootstrap, unique("progress"))
    produce(broker.bootstrap, topic, [(0, None, f"r{i}".encode(), None) for i in range(100)])
    sink_file = tmp_path / "out.txt"
    status, _ = worker.call("PUT", "/connectors/lagging-sink/config", {
        "connector.class": SINK, "file": str(sink_file), "topics": topic})
    assert status == 201
    wait_until(lambda: progress(worker, "lagging-sink").get("lag") == 0
               and progress(worker, "lagging-sink").get("records") == 100, DEADLINE,
               "100 records through the sink, lag 0")
    produce(broker.bootstrap, topic, [(0, None, f"q{i}".encode(), None) for i in range(20)])
    wait_until(lambda: progress(worker, "lagging-sink").get("lag") == 0  # each batch once
               and progress(worker, "lagging-sink").get("records") == 120, DEADLINE,
               "120 records through the sink, lag 0")
    assert worker.call("PUT", "/connectors/lagging-sink/pause")[0] == 202
    wait_until(lambda: task_state(worker, "lagging-sink") == "PAUSED", DEADLINE, "PAUSED")
    produce(broker.bootstrap, topic, [(0, None, f"s{i}".encode(), None) for i in range(30)])
    wait_until(lambda: progress(worker, "lagging-sink").get("lag") == 30, 60, "lag 30")
    assert progress(worker, "lagging-sink")["records"] == 120

    ports, procs = [free_port(), free_port()], []
    try:
        for port, connect in zip(ports, (worker.url, f"http://127.0.0.1:{free_port()}")):
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "minilog.connector.cli", "-b", broker.bootstrap,
                 "console", "--listen", f"127.0.0.1:{port}", "--connect", connect],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
        for port, proc in zip(ports, procs):  # both start side by side
            wait_for_port(port, 60, proc)
        status, page = console_page(ports[0], "/connect")
        assert status == 200
        shown = row(page, "connector-lagging-sink-0")
        assert (shown["task-state"], shown["records"], shown["lag"]) == ("PAUSED", "120", "30")
        status, page = console_page(ports[0], "/")
        assert '<a href="/connect">Connect</a>' in page
        status, page = console_page(ports[1], "/connect")
        assert status == 200 and 'id="worker-error"' in page and "did not answer" in page
    finally:
        for proc in procs:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert worker.call("DELETE", "/connectors/lagging-sink")[0] == 204


def test_source_offsets_are_connects_records_in_the_offsets_topic(worker, broker, tmp_path):
    """What Kafka's Connect writes, key and value, so its tools read it."""
    topic = create_topic(broker.bootstrap, unique("offsets"))
    source_file = tmp_path / "in.txt"
    append_lines(source_file, 0, 10)
    status, _ = worker.call("PUT", "/connectors/offset-source/config", {
        "connector.class": SOURCE, "file": str(source_file), "topic": topic})
    assert status == 201
    size = source_file.stat().st_size
    key = json.dumps(["offset-source", {"filename": str(source_file)}], separators=(",", ":"))

    def stored():
        records = consume_all(broker.bootstrap, "connect-cluster-offsets", 25)
        values = [json.loads(v) for _, _, k, v, _ in records if k.decode() == key]
        return values and values[-1] == {"position": size}
    wait_until(stored, DEADLINE, f"{{'position': {size}}} under {key}")
    assert worker.call("DELETE", "/connectors/offset-source")[0] == 204


def test_configs_are_connects_records_in_the_config_topic(worker, broker):
    status, _ = worker.call("PUT", "/connectors/stored/config", {
        "connector.class": SINK, "file": "/dev/null", "topics": "nothing-here"})
    assert status == 201
    records = consume_all(broker.bootstrap, "connect-cluster-configs", 1)
    latest = {k.decode(): json.loads(v) if v else None for _, _, k, v, _ in records}
    assert latest["connector-stored"] == {"properties": {
        "connector.class": SINK, "file": "/dev/null", "topics": "nothing-here", "name": "stored"}}
    assert latest["commit-stored"] == {"tasks": 1}
    assert worker.call("DELETE", "/connectors/stored")[0] == 204
    records = consume_all(broker.bootstrap, "connect-cluster-configs", 1)
    assert [v for _, _, k, v, _ in records if k == b"connector-stored"][-1] is None


def test_put_config_creates_then_updates(worker, tmp_path):
    config = {"connector.class": SINK, "file": str(tmp_path / "a.txt"), "topics": "t-put"}
    status, info = worker.call("PUT", "/connectors/put-me/config", config)
    assert status == 201 and info["config"]["file"] == config["file"]
    status, info = worker.call("PUT", "/connectors/put-me/config",
                               {**config, "file": str(tmp_path / "b.txt")})
    assert status == 200 and info["config"]["file"] == str(tmp_path / "b.txt")
    assert worker.call("GET", "/connectors/put-me/config") == (200, {**info["config"]})
    assert worker.call("DELETE", "/connectors/put-me")[0] == 204
    assert worker.call("GET", "/connectors/put-me") == (
        404, {"error_code": 404, "message": "Connector put-me not found"})


def test_unknown_connector_is_404(worker):
    for method, path in (("GET", "/connectors/nope"), ("GET", "/connectors/nope/config"),
                         ("GET", "/connectors/nope/status"), ("GET", "/connectors/nope/tasks"),
                         ("DELETE", "/connectors/nope")):
        assert worker.call(method, path) == (
            404, {"error_code": 404, "message": "Connector nope not found"}), (method, path)


def test_duplicate_name_is_409(worker, tmp_path):
    body = {"name": "twice", "config": {"connector.class": SINK, "topics": "t-twice",
                                        "file": str(tmp_path / "twice.txt")}}
    assert worker.call("POST", "/connectors", body)[0] == 201
    assert worker.call("POST", "/connectors", body) == (
        409, {"error_code": 409, "message": "Connector twice already exists"})
    assert worker.call("DELETE", "/connectors/twice")[0] == 204


def test_unknown_class_is_400_with_connects_message(worker):
    status, body = worker.call("POST", "/connectors", {"name": "bad", "config": {
        "connector.class": "com.example.NoSuchConnector", "topics": "x"}})
    assert status == 400 and body["error_code"] == 400
    assert body["message"].startswith("Connector configuration is invalid and contains the "
                                      "following 1 error(s):\nInvalid value "
                                      "com.example.NoSuchConnector for configuration "
                                      "connector.class: Class com.example.NoSuchConnector "
                                      "could not be found.")
    assert worker.call("GET", "/connectors/bad")[0] == 404


def test_missing_required_setting_is_400_listing_it(worker, tmp_path):
    status, body = worker.call("POST", "/connectors", {"name": "no-topic", "config": {
        "connector.class": "FileStreamSource", "file": str(tmp_path / "x")}})
    assert status == 400
    assert 'Missing required configuration "topic" which has no default value.' \
        in body["message"].splitlines()


def test_malformed_json_is_500_as_connect_answers_it(worker):
    status, body = worker.call("POST", "/connectors", raw=b'{"name": "x", "config": {')
    assert status == 500 and body["error_code"] == 500 and body["message"]
    assert worker.call("GET", "/connectors/x")[0] == 404


def test_unknown_path_is_connects_404(worker):
    assert worker.call("GET", "/no/such/path") == (
        404, {"error_code": 404, "message": "HTTP 404 Not Found"})


def test_validate_lists_each_fields_errors(worker):
    status, body = worker.call("PUT", "/connector-plugins/FileStreamSink/config/validate",
                               {"connector.class": "FileStreamSink", "tasks.max": "x"})
    assert status == 200 and body["name"] == SINK
    errors = {c["value"]["name"]: c["value"]["errors"] for c in body["configs"]}
    assert errors["tasks.max"] == ["Invalid value x for configuration tasks.max: Not a number "
                                   "of type INT"]
    assert errors["topics"] == ["Must configure one of topics or topics.regex"]
    assert errors["name"] == ['Missing required configuration "name" which has no default '
                              'value.']
    assert body["error_count"] == sum(len(e) for e in errors.values())


def test_a_task_that_cannot_start_is_failed_with_its_trace(worker, tmp_path):
    """Connect's ByteArrayConverter refuses the file source's strings; so does this worker."""
    status, _ = worker.call("PUT", "/connectors/bytes-source/config", {
        "connector.class": SOURCE, "file": str(tmp_path / "in.txt"), "topic": "t-bytes",
        "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter"})
    assert status == 201
    wait_until(lambda: task_state(worker, "bytes-source") == "FAILED", DEADLINE, "FAILED")
    status, body = worker.call("GET", "/connectors/bytes-source/status")
    assert body["connector"]["state"] == "RUNNING"
    assert "ByteArrayConverter is not compatible with objects of type class java.lang.String" \
        in body["tasks"][0]["trace"]
    status, body = worker.call("POST", "/connectors/bytes-source/restart?includeTasks=true"
                                       "&onlyFailed=true")
    assert status == 202 and body["tasks"][0]["state"] == "RESTARTING"
    wait_until(lambda: task_state(worker, "bytes-source") == "FAILED", DEADLINE,
               "FAILED again after the restart")
    assert worker.call("DELETE", "/connectors/bytes-source")[0] == 204


def test_a_query_that_dies_is_a_failed_task_with_sparks_error(worker, broker, tmp_path):
    topic = create_topic(broker.bootstrap, unique("dies"))
    from sparktools import produce
    produce(broker.bootstrap, topic, [(0, None, b"one", None)])
    status, _ = worker.call("PUT", "/connectors/dying-sink/config", {
        "connector.class": SINK, "topics": topic, "file": str(tmp_path / "no-dir" / "out.txt")})
    assert status == 201
    wait_until(lambda: task_state(worker, "dying-sink") == "FAILED", DEADLINE, "FAILED")
    trace = worker.call("GET", "/connectors/dying-sink/status")[1]["tasks"][0]["trace"]
    assert "No such file or directory" in trace
    assert worker.call("DELETE", "/connectors/dying-sink")[0] == 204


def test_stop_reset_and_alter_offsets_then_resume(worker, broker, tmp_path):
    """KIP-875: offsets shown, reset and altered while the connector is STOPPED; resumed, the
    source reads from the altered position."""
    topic = create_topic(broker.bootstrap, unique("kip875"))
    source_file = tmp_path / "in.txt"
    lines = append_lines(source_file, 0, 10)
    status, _ = worker.call("PUT", "/connectors/kip875/config", {
        "connector.class": SOURCE, "file": str(source_file), "topic": topic})
    assert status == 201
    partition = {"filename": str(source_file)}
    size = source_file.stat().st_size
    wait_until(lambda: worker.call("GET", "/connectors/kip875/offsets")[1] == {
        "offsets": [{"partition": partition, "offset": {"position": size}}]}, DEADLINE,
        "the source's offset at the end of its file")
    assert worker.call("DELETE", "/connectors/kip875/offsets") == (400, {
        "error_code": 400, "message": "Connectors must be in the STOPPED state before their "
        "offsets can be modified. This can be done for the specified connector by issuing a "
        "'PUT' request to the '/connectors/kip875/stop' endpoint"})
    assert worker.call("PUT", "/connectors/kip875/stop")[0] == 204
    wait_until(lambda: worker.call("GET", "/connectors/kip875/status")[1]["connector"]["state"]
               == "STOPPED", DEADLINE, "STOPPED")
    assert worker.call("DELETE", "/connectors/kip875/offsets") == (200, {
        "message": "The offsets for this connector have been reset successfully"})
    assert worker.call("GET", "/connectors/kip875/offsets") == (200, {"offsets": []})
    fifth = len("".join(f"{line}\n" for line in lines[:5]).encode())
    assert worker.call("PATCH", "/connectors/kip875/offsets", {"offsets": [
        {"partition": partition, "offset": {"position": fifth}}]}) == (200, {
            "message": "The offsets for this connector have been altered successfully"})
    assert worker.call("PUT", "/connectors/kip875/resume")[0] == 202
    records = consume_all(broker.bootstrap, topic, 1, expect=15, deadline=DEADLINE)
    assert [v.decode() for _, _, _, v, _ in records] == lines + lines[5:]
    assert worker.call("DELETE", "/connectors/kip875")[0] == 204


def test_driven_by_kafka_connect_py(worker, broker, tmp_path):
    """kafka-connect-py (a Connect REST client from PyPI, not ours) through a connector's life:
    its calls succeed where Connect's answers would, and raise where Connect's would."""
    kafka_connect = pytest.importorskip("kafka_connect")
    from requests import HTTPError
    kc = kafka_connect.KafkaConnect(url=worker.url)
    assert {"version", "commit", "kafka_cluster_id"} <= set(kc.get_cluster_info())
    topic = create_topic(broker.bootstrap, unique("kcpy"))
    source_file = tmp_path / "in.txt"
    lines = append_lines(source_file, 0, 5)
    config = {"connector.class": SOURCE, "file": str(source_file), "topic": topic}
    created = kc.create_connector({"name": "kcpy", "config": config})
    assert created == {"name": "kcpy", "config": {**config, "name": "kcpy"},
                       "tasks": [{"connector": "kcpy", "task": 0}], "type": "source"}
    assert kc.get_connector_config("kcpy") == {**config, "name": "kcpy"}
    assert "kcpy" in kc.list_connectors()
    assert kc.list_connector_tasks("kcpy")[0]["id"] == {"connector": "kcpy", "task": 0}

    def states():
        status = kc.get_connector_status("kcpy")
        return status["connector"]["state"], [t["state"] for t in status["tasks"]]
    wait_until(lambda: states() == ("RUNNING", ["RUNNING"]), DEADLINE, "kcpy RUNNING")
    records = consume_all(broker.bootstrap, topic, 1, expect=5, deadline=DEADLINE)
    assert [v.decode() for _, _, _, v, _ in records] == lines
    wait_until(lambda: progress(worker, "kcpy").get("records") == 5, 60, "5 records in progress")
    worker_id = kc.get_connector_status("kcpy")["connector"]["worker_id"]
    status = kc.get_connector_status("kcpy")
    assert status["tasks"][0].pop("progress")["records"] == 5  # minilog's, beside Connect's
    assert status == {
        "name": "kcpy", "type": "source",
        "connector": {"state": "RUNNING", "worker_id": worker_id},
        "tasks": [{"id": 0, "state": "RUNNING", "worker_id": worker_id}]}
    task = kc.get_connector_task_status("kcpy", 0)
    assert task.pop("progress")["records"] == 5
    assert task == {"id": 0, "state": "RUNNING", "worker_id": worker_id}
    assert kc.list_connectors(expand="status")["kcpy"]["status"]["tasks"][0]["state"] \
        == "RUNNING"

    assert kc.pause_connector("kcpy") is None
    wait_until(lambda: states() == ("PAUSED", ["PAUSED"]), DEADLINE, "kcpy PAUSED")
    assert kc.resume_connector("kcpy") is None
    wait_until(lambda: states() == ("RUNNING", ["RUNNING"]), DEADLINE, "kcpy RUNNING again")
    assert kc.restart_connector("kcpy") is None  # 204: the connector object only
    restarted = kc.restart_connector("kcpy", include_tasks=True, only_failed=True)  # 202
    assert restarted["name"] == "kcpy" and restarted["tasks"][0]["state"] == "RUNNING"

    validated = kc.validate_connector_config("FileStreamSource", {
        "connector.class": SOURCE, "name": "kcpy-bad", "file": "/tmp/x"})
    assert validated["name"] == SOURCE and validated["error_count"] == 1
    errors = {c["value"]["name"]: c["value"]["errors"] for c in validated["configs"]}
    assert errors["topic"] == ['Missing required configuration "topic" which has no default '
                               'value.']
    for call, code, message in (
            (lambda: kc.create_connector({"name": "kcpy-bad", "config": {
                "connector.class": "com.example.NoSuchConnector"}}), 400,
             "Connector configuration is invalid"),
            (lambda: kc.create_connector({"name": "kcpy", "config": config}), 409,
             "Connector kcpy already exists"),
            (lambda: kc.get_connector_task_status("kcpy", 7), 404,
             "No status found for task kcpy-7")):
        with pytest.raises(HTTPError) as raised:
            call()
        assert raised.value.response.status_code == code
        body = raised.value.response.json()
        assert body["error_code"] == code and body["message"].startswith(message), body

    assert kc.delete_connector("kcpy") is None
    with pytest.raises(HTTPError) as raised:
        kc.get_connector("kcpy")
    assert raised.value.response.json() == {"error_code": 404,
                                            "message": "Connector kcpy not found"}


def test_a_fresh_worker_started_sparks_python_processes_ahead_of_its_connectors(worker):
    """A worker with nothing to restore runs the one-row warm-up query (connect/warmup.py)
    beside its connectors; it ends, and says so, however the module's connectors went."""
    wait_until(lambda: "Spark's Python processes started" in worker.log
               or "ahead of the connectors failed" in worker.log, DEADLINE, "the warm-up's end")
    assert "Spark's Python processes started in" in worker.log, worker.log[-4000:]
