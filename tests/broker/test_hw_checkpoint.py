"""`replication-offset-checkpoint`: Kafka's text format, read back as written, and a missing or
torn file read as "nothing known" (a replica then starts from 0, never from its log end)."""
from minilog.broker.storage import hw_checkpoint


def test_written_marks_read_back_in_kafkas_format(tmp_path):
    hw_checkpoint.write(tmp_path, {("b", 1): 7, ("a", 0): 42})
    assert (tmp_path / hw_checkpoint.FILE).read_text() == "0\n2\na 0 42\nb 1 7\n"
    assert hw_checkpoint.read(tmp_path) == {("a", 0): 42, ("b", 1): 7}


def test_a_missing_or_torn_file_knows_nothing(tmp_path):
    assert hw_checkpoint.read(tmp_path) == {}
    (tmp_path / hw_checkpoint.FILE).write_text("0\n2\na 0 4")  # cut mid-line: no offset lost
    assert hw_checkpoint.read(tmp_path) == {("a", 0): 4}
    (tmp_path / hw_checkpoint.FILE).write_text("0\n1\na 0")
    assert hw_checkpoint.read(tmp_path) == {}
