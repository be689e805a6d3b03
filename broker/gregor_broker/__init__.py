"""Gregor: a Kafka-compatible streaming log. The broker and everything the cluster shares."""
