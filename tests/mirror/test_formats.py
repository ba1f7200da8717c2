"""MM2's record formats, byte for byte: the expected bytes are written out by hand from
Kafka's Schema types (STRING: INT16 length + UTF-8; INT16/32/64 big-endian; checkpoints and
heartbeats start with version 0), the layout `RemoteClusterUtils` and MM2's formatters read."""
import pytest
from minilog.mirror.formats import Checkpoint, FormatError, Heartbeat, OffsetSync


def test_offset_sync_bytes():
    s = OffsetSync("orders", 2, 1000, 7)
    assert s.key() == b"\x00\x06orders" + b"\x00\x00\x00\x02"
    assert s.value() == (1000).to_bytes(8, "big") + (7).to_bytes(8, "big")
    assert OffsetSync.parse(s.key(), s.value()) == s


def test_checkpoint_bytes():
    c = Checkpoint("billing", "A.orders", 1, 42, 40, "m")
    assert c.key() == b"\x00\x07billing" + b"\x00\x08A.orders" + b"\x00\x00\x00\x01"
    assert c.value() == (b"\x00\x00" + (42).to_bytes(8, "big") + (40).to_bytes(8, "big")
                         + b"\x00\x01m")
    assert Checkpoint.parse(c.key(), c.value()) == c


def test_heartbeat_bytes():
    h = Heartbeat("A", "B", 1700000000000)
    assert h.key() == b"\x00\x01A\x00\x01B"
    assert h.value() == b"\x00\x00" + (1700000000000).to_bytes(8, "big")
    assert Heartbeat.parse(h.key(), h.value()) == h


def test_short_or_unknown_versions_are_refused():
    c = Checkpoint("g", "t", 0, 1, 1)
    with pytest.raises(FormatError, match="bytes end"):
        Checkpoint.parse(c.key(), c.value()[:-3])
    with pytest.raises(FormatError, match="version 1"):
        Checkpoint.parse(c.key(), b"\x00\x01" + c.value()[2:])
