"""__consumer_offsets record formats, byte for byte as Kafka writes them."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from gregor_broker.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberRecord,
    OffsetAndMetadata,
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
    hash_is_cheap,
    java_string_hashcode,
    partition_for,
    replay,
)


def test_java_string_hashcode_matches_java() -> None:
    # Well-known values of Java's String.hashCode.
    assert java_string_hashcode("") == 0
    assert java_string_hashcode("a") == 97
    assert java_string_hashcode("hello") == 99162322
    assert java_string_hashcode("Aa") == java_string_hashcode("BB") == 2112
    assert java_string_hashcode("polygenelubricants") == -(2**31)
    assert java_string_hashcode("ü€") == 252 * 31 + 0x20AC


def _one_unit_at_a_time(value: str) -> int:
    """The definition: h = 31 * h + unit over UTF-16 code units, in 32 bits."""
    result = 0
    data = value.encode("utf-16-be")
    for i in range(0, len(data), 2):
        result = (31 * result + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return result - (1 << 32) if result & 0x80000000 else result


@given(st.text(max_size=80))
def test_java_string_hashcode_in_strides_matches_the_definition(value: str) -> None:
    assert java_string_hashcode(value) == _one_unit_at_a_time(value)


def test_long_ids_hash_like_short_ones_and_are_kept() -> None:
    long_id = "group-\U0001f600-" + "x" * 5000 + "-end"
    assert not hash_is_cheap(long_id)
    assert java_string_hashcode(long_id) == _one_unit_at_a_time(long_id)
    assert hash_is_cheap(long_id)
    assert java_string_hashcode(long_id) == _one_unit_at_a_time(long_id)
    assert hash_is_cheap("short")


def test_partition_for_follows_kafka_utils_abs() -> None:
    # Utils.abs(Integer.MIN_VALUE) is 0 in Kafka, not MIN_VALUE.
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("a", 50) == 97 % 50


def test_offset_commit_key_layout() -> None:
    key = encode_offset_commit_key(OffsetCommitKey("g", "topic", 3))
    assert key == struct.pack(">hh1sh5si", 1, 1, b"g", 5, b"topic", 3)
    assert decode_key(key) == OffsetCommitKey("g", "topic", 3)


def test_offset_commit_value_v3_layout() -> None:
    value = encode_offset_commit_value(OffsetAndMetadata(42, 7, "meta", 1000))
    assert value == struct.pack(">hqih4sq", 3, 42, 7, 4, b"meta", 1000)
    assert decode_offset_commit_value(value) == OffsetAndMetadata(42, 7, "meta", 1000, -1)


def test_offset_commit_value_with_expiry_is_v1() -> None:
    value = encode_offset_commit_value(OffsetAndMetadata(5, -1, "", 1000, 2000))
    assert value == struct.pack(">hqhqq", 1, 5, 0, 1000, 2000)
    assert decode_offset_commit_value(value).expire_timestamp == 2000


def test_group_metadata_key_and_value_v3_layout() -> None:
    assert encode_group_metadata_key(GroupMetadataKey("grp")) == struct.pack(">hh3s", 2, 3, b"grp")
    member = MemberRecord("m-1", "i-1", "cid", "/1.2.3.4", 300000, 10000, b"sub", b"asg")
    value = GroupMetadataValue("consumer", 4, "range", "m-1", 123, (member,))
    encoded = encode_group_metadata_value(value)
    expected = (
        struct.pack(">hh8si", 3, 8, b"consumer", 4)
        + struct.pack(">h5sh3sq", 5, b"range", 3, b"m-1", 123)
        + struct.pack(">i", 1)
        + struct.pack(">h3sh3sh3sh8s", 3, b"m-1", 3, b"i-1", 3, b"cid", 8, b"/1.2.3.4")
        + struct.pack(">iii3si3s", 300000, 10000, 3, b"sub", 3, b"asg")
    )
    assert encoded == expected
    assert decode_group_metadata_value(encoded) == value


def test_group_metadata_value_v0_is_read() -> None:
    v0 = (
        struct.pack(">hh8si", 0, 8, b"consumer", 1)
        + struct.pack(">h5sh3si", 5, b"range", 3, b"m-1", 1)
        + struct.pack(">h3sh1sh1si", 3, b"m-1", 1, b"c", 1, b"h", 6000)
        + struct.pack(">i1si1s", 1, b"s", 1, b"a")
    )
    value = decode_group_metadata_value(v0)
    assert value.members[0].session_timeout_ms == 6000
    assert value.members[0].rebalance_timeout_ms == 6000
    assert value.members[0].assignment == b"a"


@given(
    st.text(max_size=20),
    st.text(max_size=20),
    st.integers(0, 2**31 - 1),
    st.integers(-1, 2**62),
    st.text(max_size=30),
)
def test_offset_records_round_trip(group, topic, partition, offset, metadata) -> None:
    key = OffsetCommitKey(group, topic, partition)
    value = OffsetAndMetadata(offset, -1, metadata, 5)
    assert decode_key(encode_offset_commit_key(key)) == key
    assert decode_offset_commit_value(encode_offset_commit_value(value)) == value


def test_replay_keeps_the_latest_value_and_honours_tombstones() -> None:
    def commit(group: str, partition: int, offset: int) -> tuple[bytes, bytes]:
        return (
            encode_offset_commit_key(OffsetCommitKey(group, "t", partition)),
            encode_offset_commit_value(OffsetAndMetadata(offset, -1, "", 1)),
        )

    group_key = encode_group_metadata_key(GroupMetadataKey("a"))
    loaded = replay(
        [
            commit("a", 0, 1),
            commit("a", 0, 5),
            commit("a", 1, 9),
            (encode_offset_commit_key(OffsetCommitKey("a", "t", 1)), None),
            commit("b", 0, 3),
            (encode_offset_commit_key(OffsetCommitKey("b", "t", 0)), None),
            (group_key, encode_group_metadata_value(GroupMetadataValue("consumer", 1, None, None))),
            (group_key, None),
            (struct.pack(">h", 9) + b"future record kind", b"ignored"),
        ]
    )
    assert {g: {k: v.offset for k, v in o.items()} for g, o in loaded.offsets.items()} == {
        "a": {("t", 0): 5}
    }
    assert loaded.groups == {}
    assert loaded.skipped == 1
