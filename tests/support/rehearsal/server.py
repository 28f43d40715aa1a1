"""The moto server on loopback that stands in for the stack's table, bus, topic and queue."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import boto3

from devkit.schema import create_table
from tests.support.rehearsal.stack import ACCOUNT, REGION, StandIn, Synth

STAND_IN_QUEUE = "rehearsal-bus-tap"


@dataclass
class World:
    endpoint_url: str
    stand_in: StandIn
    dynamodb: Any
    events: Any
    sqs: Any
    queue_url: str
    # The X-Ray daemon's address as Lambda gives it under active tracing
    # (AWS_XRAY_DAEMON_ADDRESS): whatever a tracer in the process sends lands here.
    xray: socket.socket

    @property
    def xray_port(self) -> int:
        return int(self.xray.getsockname()[1])

    def drain_xray(self) -> list[str]:
        """Every datagram received so far, as text (an X-Ray segment is a JSON header line and a
        JSON document; ADOT's spans a JSON header line and base64 OTLP): unparsed, so whatever
        arrived is shown as it came."""
        received: list[str] = []
        self.xray.setblocking(False)
        while True:
            try:
                datagram = self.xray.recv(65536)
            except BlockingIOError:
                return received
            received.append(datagram.decode("utf-8", errors="replace"))

    def drain_bus(self) -> list[dict[str, Any]]:
        received: list[dict[str, Any]] = []
        while True:
            page = self.sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10)
            messages = page.get("Messages", [])
            if not messages:
                return received
            for message in messages:
                received.append(json.loads(message["Body"]))
                self.sqs.delete_message(
                    QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"]
                )


@contextmanager
def moto_world(synth: Synth) -> Iterator[World]:
    """A moto server on loopback holding the stand-in table, bus, topic and queue, and a UDP
    socket in place of the X-Ray daemon (the code sends it nothing: it imports no tracer)."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        stand_in = StandIn(synth)
        kwargs: dict[str, Any] = {"region_name": REGION, "endpoint_url": endpoint}
        dynamodb = boto3.client("dynamodb", **kwargs)
        create_table(dynamodb, stand_in.table_name, synth.template)
        events = boto3.client("events", **kwargs)
        events.create_event_bus(Name=stand_in.bus_name)
        sns = boto3.client("sns", **kwargs)
        for logical_id in synth.of_type("AWS::SNS::Topic"):
            sns.create_topic(Name=stand_in.refs[logical_id].rsplit(":", 1)[1])
        sqs = boto3.client("sqs", **kwargs)
        queue_url = sqs.create_queue(QueueName=STAND_IN_QUEUE)["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        events.put_rule(
            Name="everything",
            EventBusName=stand_in.bus_name,
            EventPattern=json.dumps({"account": [ACCOUNT]}),
        )
        events.put_targets(
            Rule="everything",
            EventBusName=stand_in.bus_name,
            Targets=[{"Id": "tap", "Arn": queue_arn}],
        )
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as xray:
            xray.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
            xray.bind(("127.0.0.1", 0))
            yield World(
                endpoint_url=endpoint,
                stand_in=stand_in,
                dynamodb=dynamodb,
                events=events,
                sqs=sqs,
                queue_url=queue_url,
                xray=xray,
            )
    finally:
        server.stop()
