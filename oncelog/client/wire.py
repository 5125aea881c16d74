"""A minimal blocking Kafka protocol client on kio: for admin commands that confluent-kafka
does not offer (DescribeProducers) and for tests that must send exact bytes."""

from __future__ import annotations

import io
import socket
import struct

from kio.index import load_payload_module
from kio.serial.errors import OutOfBoundValue
from kio.static.constants import EntityType

from ..protocol import codec, guard
from ..protocol.timestamps import decode_with_negative_timestamps


def request_module(api_key: int, version: int):
    return load_payload_module(api_key, version, EntityType.request)


def write_request(out, request, correlation_id: int, client_id: str) -> None:
    """Write header and body of a kio request (no size prefix) to the stream ``out``."""
    cls = type(request)
    header_cls = cls.__header_schema__
    header = header_cls(request_api_key=cls.__api_key__, request_api_version=cls.__version__,
                        correlation_id=correlation_id, client_id=client_id)
    codec.writer(header_cls)(out, header)
    codec.writer(cls)(out, request)


def decode_response(raw: bytes, request_cls) -> tuple[int, object]:
    """(correlation id, response) of a response frame (without its size prefix) to a request
    of class ``request_cls``.

    A ``datetime_i64`` field holding -1 (Kafka's "no time", e.g. DescribeTransactions'
    ``transaction_start_time`` of an Empty transactional id) decodes as ``None``, and unknown
    tagged fields are skipped: kio refuses both, so the frame is then decoded again through
    :func:`..protocol.timestamps.decode_with_negative_timestamps` (the slow path, taken only after
    kio refused; if that fails too, kio's own error is raised). Before kio, the frame is walked by
    :func:`..protocol.guard.check_response`: a count or length the frame cannot hold is a
    :class:`..protocol.codec.DecodeError` (a ValueError) instead of kio's process abort.
    """
    resp_cls = codec.response_class(request_cls.__api_key__, request_cls.__version__)
    try:
        guard.check_response(resp_cls, raw)  # kio would abort the process on a huge array count
    except guard.Refused as exc:
        raise codec.DecodeError(f"response to {request_cls.__name__} v{request_cls.__version__}: {exc}") from None
    correlation_id = struct.unpack_from(">i", raw)[0]
    offset = 4 if resp_cls.__header_schema__.__version__ == 0 else 5
    read = codec.reader(resp_cls)
    try:
        return correlation_id, read(raw, offset)[0]
    except (OutOfBoundValue, KeyError) as refused:
        try:
            return correlation_id, decode_with_negative_timestamps(resp_cls, read, raw, offset)
        except Exception:
            raise refused from None


class RawClient:
    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def recv_frame(self) -> bytes:
        size = struct.unpack(">i", self._recv_exactly(4))[0]
        return self._recv_exactly(size)

    def _recv_exactly(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed by broker")
            buf += chunk
        return bytes(buf)

    def encode(self, request) -> bytes:
        self.correlation_id += 1
        buf = io.BytesIO()
        write_request(buf, request, self.correlation_id, "rawclient")
        return buf.getvalue()

    def request(self, request):
        self.send_frame(self.encode(request))
        return self.read_response(type(request))

    def read_response(self, request_cls):
        correlation_id, resp = decode_response(self.recv_frame(), request_cls)
        if correlation_id != self.correlation_id:
            raise ConnectionError(f"response for correlation id {correlation_id}, expected {self.correlation_id}")
        return resp

    def is_closed(self, timeout: float = 5.0) -> bool:
        """True once the broker has closed this connection."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False


def produce_request(topic: str, partition: int, records: bytes, *, acks: int = -1, version: int = 9):
    import datetime

    m = request_module(0, version)
    return m.ProduceRequest(
        transactional_id=None, acks=acks, timeout=datetime.timedelta(seconds=10),
        topic_data=(m.TopicProduceData(name=topic, partition_data=(m.PartitionProduceData(index=partition, records=records),)),),
    )


def list_offsets_latest(client: RawClient, topic: str, partition: int = 0) -> int:
    m = request_module(2, 7)
    req = m.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(
        m.ListOffsetsTopic(name=topic, partitions=(m.ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1, timestamp=-1),)),))
    resp = client.request(req)
    return resp.topics[0].partitions[0].offset
