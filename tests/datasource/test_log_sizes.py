"""The offset → bytes map behind maxBytesPerTrigger, from log sizes seen at each trigger."""
from minilog.datasource.log_sizes import LogSizeMap, ends_within_bytes

A, B = ("t", 0), ("t", 1)


def test_the_backlog_found_at_the_start_is_measured_by_its_average():
    sizes = LogSizeMap()
    sizes.observe(A, 0, 100, 10_000)
    assert sizes.bytes_between(A, 10, 30) == 2_000


def test_records_that_arrive_later_are_measured_by_the_growth_of_the_log():
    """100 small records (100 bytes each) found at the start, then 10 of 5000 bytes: a range
    over the new ones costs what they hold, not the log's average."""
    sizes = LogSizeMap()
    sizes.observe(A, 0, 100, 10_000)
    sizes.observe(A, 0, 110, 60_000)
    assert sizes.bytes_between(A, 100, 102) == 10_000
    assert sizes.bytes_between(A, 90, 101) == 1_000 + 5_000


def test_a_log_whose_start_moved_starts_a_new_map():
    sizes = LogSizeMap()
    sizes.observe(A, 0, 100, 10_000)
    sizes.observe(A, 0, 110, 60_000)
    sizes.observe(A, 50, 120, 7_000)   # retention removed the front: 70 offsets, 7000 bytes
    assert sizes.bytes_between(A, 100, 110) == 1_000


def test_each_partition_reads_the_same_fraction_of_what_it_has():
    sizes = LogSizeMap()
    sizes.observe(A, 0, 40, 80_000)    # 2000 bytes a record
    sizes.observe(B, 0, 40, 8_000)     # 200
    end = ends_within_bytes({A: 0, B: 0}, {A: 40, B: 40}, 22_000, sizes)
    assert end == {A: 10, B: 10}       # 20000 + 2000 bytes


def test_everything_fits_means_no_bound():
    sizes = LogSizeMap()
    sizes.observe(A, 0, 40, 8_000)
    assert ends_within_bytes({A: 0}, {A: 40}, 8_000, sizes) is None


def test_a_record_larger_than_the_bound_is_still_read():
    sizes = LogSizeMap()
    sizes.observe(A, 0, 2, 2_000_000)
    sizes.observe(B, 0, 1, 1_000_000)
    assert ends_within_bytes({A: 0, B: 0}, {A: 2, B: 1}, 1_000, sizes) == {A: 1, B: 0}
