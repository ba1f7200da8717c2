"""A job started before its input topic exists says so, once, and reads the topic once it is
created (as spark-submit runs it: the line comes from the query's source, in Spark's own
Python process)."""
import subprocess
import uuid

import pytest
from sparkprocs import BIN, REPO, environment, kill_marked
from sparktools import committed, create_topic, produce, unique, wait_for


@pytest.mark.parametrize("job,topic_flag", [("bank_balance", "--transactions-topic"),
                                            ("clickstream", "--pageviews-topic")])
def test_a_job_says_once_that_its_input_topic_is_missing_and_waits_for_it(broker, tmp_path,
                                                                          job, topic_flag):
    topic, group, mark = unique("input"), unique("group"), uuid.uuid4().hex
    log = tmp_path / "job.log"
    line = f"Topic '{topic}' does not exist yet: the query reads it once it is created"
    with open(log, "wb") as out:
        p = subprocess.Popen(
            [str(BIN / "spark-submit"), "--properties-file", "spark-conf/spark-defaults.conf",
             f"jobs/{job}.py", "--bootstrap-servers", broker.bootstrap, "--checkpoint",
             str(tmp_path / "checkpoint"), "--trigger", "processing-time=1 second",
             "--group-id", group, topic_flag, topic], cwd=REPO, env=environment(mark),
            stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: line in log.read_text(errors="replace") or p.poll() is not None,
                 "the job to say its input topic is missing", deadline=300)
        assert p.poll() is None, log.read_text(errors="replace")[-5000:]
        create_topic(broker.bootstrap, topic, 1)
        produce(broker.bootstrap, topic, [(0, b"a", b'{"amount": 1}', None)] * 3)
        # The query commits its progress to its group when it plans the batch after a read.
        wait_for(lambda: committed(broker.bootstrap, group, topic, 1) == {0: 3}
                 or p.poll() is not None, "the job to read the created topic", deadline=300)
        assert p.poll() is None, log.read_text(errors="replace")[-5000:]
        assert log.read_text(errors="replace").count(line) == 1
    finally:
        kill_marked(mark)
        p.wait()
