"""A minimal blocking Kafka protocol client on kio: for admin commands that confluent-kafka
does not offer (DescribeProducers) and for tests that must send exact bytes."""

from __future__ import annotations

import io
import socket
import struct

from ..protocol.requests import decode_response, request_module, write_request

__all__ = ["RawClient", "decode_response", "list_offsets_latest", "produce_request", "request_module", "write_request"]


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
