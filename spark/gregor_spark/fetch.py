"""What one Spark task does: read offsets ``[start, end)`` of one partition as Arrow batches.

Runs on executors, in a pickled copy of the reader: it opens its own confluent-kafka consumer,
assigns exactly the one partition at ``start``, and turns each list that ``consume()`` returns
(whole fetched batches) into one ``pyarrow.RecordBatch``. The end is below the high watermark
the driver saw, so a read never waits for data that is not there yet. Offsets may be missing
inside the range (compaction, transaction markers): the read stops at the first record at or
past ``end``, or when the consumer reports the end of the partition.
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import logging
import time
from collections.abc import Iterator

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
from pyspark.sql.datasource import InputPartition

from gregor_spark.arrow_batch import record_batch
from gregor_spark.client import consumer_config
from gregor_spark.options import SourceOptions
from gregor_spark.planning import OffsetRange

log = logging.getLogger("gregor_spark")

# Messages asked of consume() at once; librdkafka hands over what it has buffered (whole
# fetched batches), up to this many.
CONSUME_BATCH = 10_000
# consume() returns early only once it has CONSUME_BATCH messages; otherwise it waits this
# long. librdkafka prefetches ahead of the application, so a short wait loses nothing while
# data flows and does not stall the tail of a range (the EOF arrives in the same queue).
CONSUME_WAIT_S = 0.05

DATA_LOSS_HINT = (
    "Some data may have been lost because they are not available in Kafka any more; either "
    "the data was aged out by Kafka or the topic may have been deleted before all the data in "
    "the topic was processed. If you don't want your streaming query to fail on such cases, "
    'set the source option "failOnDataLoss" to "false".'
)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while one fetched list becomes an Arrow batch.

    ``consume()`` allocates a tracked ``Message`` per record and the column builders a tuple
    per record: tens of thousands of container objects per list, which trigger collections
    that scan the whole heap of a Spark Python worker (pyspark, pandas, pyarrow), over and
    over. None of these objects form cycles (reference counting frees them), so pausing the
    collector loses nothing; it is measured to cut a task's Python CPU by about a third
    (docs/spark.md). It is back on, as it was, before the batch is handed to Spark.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class DataLossError(RuntimeError):
    """Offsets a read needed are gone from the log and ``failOnDataLoss`` is on."""


def report_data_loss(options: SourceOptions, offsets: OffsetRange, now_from: int) -> None:
    """Fail, or log the skipped range, when ``[offsets.start, now_from)`` is gone."""
    message = (
        f"Offsets [{offsets.start}, {now_from}) of {offsets.topic}-{offsets.partition} are "
        "no longer in the log (deleted by retention or DeleteRecords)"
    )
    if options.fail_on_data_loss:
        raise DataLossError(f"{message}. {DATA_LOSS_HINT}")
    log.warning("%s; skipping them (failOnDataLoss is false).", message)


def read_partition(options: SourceOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """A task's rows. When a plan has no ranges at all (an empty topic, filters that leave
    nothing), Spark still runs one task with its placeholder ``InputPartition(None)``
    (pyspark ``plan_data_source_read``): that task reads nothing."""
    if not isinstance(partition, OffsetRange):
        return iter(())
    return read_range(options, partition)


def read_range(options: SourceOptions, offsets: OffsetRange) -> Iterator[pa.RecordBatch]:
    if offsets.size == 0:
        return
    consumer = Consumer(consumer_config(options))
    try:
        yield from _read(consumer, options, offsets)
    finally:
        consumer.close()


def _read(
    consumer: Consumer, options: SourceOptions, offsets: OffsetRange
) -> Iterator[pa.RecordBatch]:
    topic_partition = TopicPartition(offsets.topic, offsets.partition)
    low, high = consumer.get_watermark_offsets(topic_partition, timeout=30.0)
    start = offsets.start
    if start < low:
        report_data_loss(options, offsets, min(low, offsets.end))
        start = low
    if start >= offsets.end:
        return
    if high < offsets.end:
        # The log ends before the planned end (truncated after a leader change, or deleted).
        message = (
            f"{offsets.topic}-{offsets.partition}: planned to read up to offset {offsets.end} "
            f"but the log now ends at {high}"
        )
        if options.fail_on_data_loss:
            raise DataLossError(f"{message}. {DATA_LOSS_HINT}")
        log.warning("%s; reading up to %d.", message, high)
    consumer.assign([TopicPartition(offsets.topic, offsets.partition, start)])
    deadline = time.monotonic() + options.poll_timeout_ms / 1000
    position = start
    while position < offsets.end:
        with collector_paused():
            batch, at_end, last = _next_batch(consumer, options, offsets, position, high)
        if batch is not None:
            position = last + 1
            deadline = time.monotonic() + options.poll_timeout_ms / 1000
            yield batch
        if at_end:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{offsets.topic}-{offsets.partition}: no records for "
                f"{options.poll_timeout_ms} ms while reading offset {position} of "
                f"[{offsets.start}, {offsets.end}) (kafkaConsumer.pollTimeoutMs)"
            )


def _next_batch(
    consumer: Consumer, options: SourceOptions, offsets: OffsetRange, position: int, high: int
) -> tuple[pa.RecordBatch | None, bool, int]:
    """One ``consume()`` list as an Arrow batch (None if it held no records in range), whether
    the range is finished, and the last offset in the batch. The ``Message`` objects die here,
    before the batch goes to Spark."""
    messages = consumer.consume(CONSUME_BATCH, timeout=CONSUME_WAIT_S)
    if not messages:
        return None, False, position - 1
    if any(map(Message.error, messages)):
        records, at_end = _split_events(messages, offsets, position, high)
    else:
        # The usual case: records only, in offset order; cut at the range's end.
        records, at_end = messages, False
        if messages[-1].offset() >= offsets.end:
            cut = bisect.bisect_left(messages, offsets.end, key=Message.offset)
            records, at_end = messages[:cut], True
    if not records:
        return None, at_end, position - 1
    return record_batch(records, options.include_headers), at_end, records[-1].offset()


def _split_events(
    messages: list[Message], offsets: OffsetRange, position: int, high: int
) -> tuple[list[Message], bool]:
    """The records of a ``consume()`` list that also holds events: end of partition (the
    log holds nothing more, so offsets up to ``end`` were gaps) or errors, which fail."""
    records = []
    at_end = False
    for message in messages:
        error = message.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                at_end = message.offset() >= min(offsets.end, high)
                continue
            if error.code() == KafkaError.OFFSET_OUT_OF_RANGE:
                raise DataLossError(
                    f"{offsets.topic}-{offsets.partition}: offset {position} is out of "
                    f"range. {DATA_LOSS_HINT}"
                )
            raise KafkaException(error)
        if message.offset() >= offsets.end:
            return records, True
        records.append(message)
    return records, at_end
