"""The broker's connections to its peers (`broker/server/peer_channel.py`), against a real
broker: requests racing to one address while its connection opens share that connection, and
closing the channel leaves no connection open."""
import asyncio

import pytest
from tcp import ends
from waiting import wait_until

from minilog.broker.server.peer_channel import PeerChannel
from minilog.connector.protocol import ApiKey, request

pytestmark = pytest.mark.timeout(120)


def test_sends_racing_on_one_address_open_one_connection(broker):
    body = request(ApiKey.API_VERSIONS).cls(client_software_name="peer",
                                            client_software_version="1")

    async def race() -> int:
        peers = PeerChannel(2)
        try:
            answers = await asyncio.gather(*(
                peers.send(("127.0.0.1", broker.port), ApiKey.API_VERSIONS, body, 3,
                           timeout=30) for _ in range(3)))
            assert all(a.error_code == 0 for a in answers)
            return len(ends(broker.port))
        finally:
            peers.close()
    assert asyncio.run(race()) == 1
    wait_until(lambda: not ends(broker.port), 30, "every connection to the broker closed")
