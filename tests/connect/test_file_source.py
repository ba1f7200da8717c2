"""FileStreamSource's file reading, without Spark: a micro-batch ends after its last complete
line, and its rows are the lines as Connect reads them (ended at \\n, \\r\\n or \\r; bytes that
are not UTF-8 replaced, as Java's reader does)."""
from minilog.connect.file_source import FileLinesStreamReader, FileRange, last_line_end


def _reader(path):
    return FileLinesStreamReader({"file": str(path), "connector": "c",
                                  "offset.storage.topic": "o", "client": "{}"})


def test_a_batch_holds_the_complete_lines_as_connect_reads_them(tmp_path):
    lines = [f"línea {i} " + "x" * (i % 50) for i in range(300)] + ["", "z"]
    data = ("\r\n".join(lines[:100]) + "\n" + "\r".join(lines[100:200]) + "\n" +
            "\n".join(lines[200:]) + "\n").encode()
    path = tmp_path / "in.txt"
    path.write_bytes(data + b"a line not ended yet")
    end = last_line_end(str(path), 0, 1 << 30)
    assert end == len(data)
    assert last_line_end(str(path), end, 1 << 30) == end  # only the unended line left
    assert last_line_end(str(path), len(data) + 20, 1 << 30) == len(data) + 20  # nothing new
    [batch] = _reader(path).read(FileRange(str(path), 0, end))
    assert batch.column(0).to_pylist() == lines
    assert str(batch.schema.field(0).type) == "string"


def test_bytes_that_are_not_utf8_are_replaced_not_fatal(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"ok\nbad \xff\xfe byte\nok again\n")
    [batch] = _reader(path).read(FileRange(str(path), 0, path.stat().st_size))
    assert batch.column(0).to_pylist() == ["ok", "bad \ufffd\ufffd byte", "ok again"]
