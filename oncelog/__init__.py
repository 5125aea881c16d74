"""oncelog: an exactly-once streaming log that speaks the Kafka protocol."""

__version__ = "0.1.0"
