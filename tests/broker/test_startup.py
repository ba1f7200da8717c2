"""What `minilog broker start` says as it starts, as an operator reads it: a few lines that say
where it listens, where the data is and what recovery did; a port in use is one line, exit 1."""
import socket
import subprocess
import sys

from brokers import MinilogBroker

from minilog.connector.client import AdminClient, NewTopic, Producer

START = [sys.executable, "-m", "minilog.broker", "start"]


def test_an_empty_data_directory_starts_in_a_few_lines(tmp_path):
    broker = MinilogBroker(data_dir=tmp_path).start()
    try:
        broker.stop()
        lines = broker.log().splitlines()
    finally:
        broker.cleanup()
    assert len(lines) <= 4, lines  # [created __consumer_offsets], listening, data, stopped
    text = "\n".join(lines)
    assert f"listening on 127.0.0.1:{broker.port}" in text
    assert f"data in {broker.log_dir}: a new, empty directory" in text
    assert "recover" not in text and "Traceback" not in text


def test_a_restart_after_kill_9_summarizes_recovery_in_one_line(tmp_path):
    broker = MinilogBroker(data_dir=tmp_path).start()
    try:
        with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
            admin.create_topics([NewTopic("payments", 3)])
        with Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"}) as producer:
            for i in range(30):
                producer.send("payments", value=b"%d" % i, partition=i % 3)
            producer.flush(30)
        broker.kill()
        segment = broker.log_dir / "payments-1" / f"{0:020d}.log"
        with open(segment, "ab") as f:
            f.write(b"\x00torn tail!!!")  # 13 bytes of a batch that never finished
        seen = len(broker.log())
        broker.start()
        broker.stop()
        lines = broker.log()[seen:].splitlines()
    finally:
        broker.cleanup()
    text = "\n".join(lines)
    assert len(lines) <= 3, lines  # listening, data, stopped
    assert (f"data in {broker.log_dir}: 1 topic (3 partitions), 0 consumer groups; recovered "
            "53 partition logs after an unclean shutdown in") in text, text
    assert "13 bytes of torn or corrupt tail cut in 1 partition" in text, text


def test_a_clean_restart_says_so(tmp_path):
    broker = MinilogBroker(data_dir=tmp_path).start()
    try:
        broker.stop()
        seen = len(broker.log())
        broker.start()
        broker.stop()
        text = broker.log()[seen:]
    finally:
        broker.cleanup()
    assert f"data in {broker.log_dir}: 0 topics (0 partitions), 0 consumer groups; last shutdown " \
           "was clean" in text, text


def test_a_port_in_use_is_one_line_and_exit_1_and_leaves_the_data_alone(tmp_path):
    broker = MinilogBroker(data_dir=tmp_path).start()
    try:
        broker.stop()  # a clean stop: its marker must survive the failed start below
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            r = subprocess.run([*START, "--listen", f"127.0.0.1:{port}", "--data-dir",
                                str(broker.log_dir)], capture_output=True, text=True, timeout=60,
                               check=False)
        assert r.returncode == 1, r.stderr
        assert r.stderr == (f"minilog broker: cannot listen on 127.0.0.1:{port}: Address already "
                            "in use (is another broker running there?)\n")
        assert r.stdout == ""
        seen = len(broker.log())
        broker.start()
        broker.stop()
        assert "last shutdown was clean" in broker.log()[seen:]
    finally:
        broker.cleanup()


def test_sigterm_as_soon_as_the_port_answers_stops_cleanly(tmp_path):
    """A supervisor may signal the broker the moment it accepts connections, while the broker
    still loads its logs: it must start, then stop cleanly (exit 0, "stopped cleanly")."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path / "broker.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(START + ["--listen", f"127.0.0.1:{port}", "--data-dir",
                                         str(tmp_path / "data")], stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        for _ in range(200000):  # bounded: until the port answers or the broker exits
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None:
                    break
        proc.terminate()  # at once: no wait for the broker to settle
        code = proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    text = log.read_text()
    assert code == 0, text
    assert "stopped cleanly" in text and "Traceback" not in text, text


def test_a_data_directory_deleted_under_the_broker_stops_it_with_one_line_and_exit_1(tmp_path):
    """Records written after the data directory is gone would be acknowledged and lost at the
    next start: the broker stops instead, as Kafka stops when its last log directory fails."""
    import shutil

    from waiting import wait_until

    broker = MinilogBroker(data_dir=tmp_path).start()
    try:
        with Producer({"bootstrap.servers": broker.bootstrap}) as producer:
            producer.send("before", value=b"kept")
            producer.flush(30)
        shutil.rmtree(broker.log_dir)
        wait_until(lambda: broker.proc.poll() is not None, 60, "the broker to stop by itself")
        lines = broker.log().splitlines()
    finally:
        broker.cleanup()
    assert broker.proc.returncode == 1
    text = "\n".join(lines)
    assert f"data directory {broker.log_dir} was removed or replaced" in text
    assert "Traceback" not in text
