"""ElectLeaders: a preferred or unclean leader election, decided by the active controller.

Forwarded to the controller like the other admin requests (`controller_router.py`), authorized
there with ALTER on the cluster; answered once the leadership records have committed, when
every broker is about to act on them (Kafka's KRaft controller answers at the same point).
"""
from minilog.connector.protocol import ApiKey, ErrorCode

from ...metadata.controller import PREFERRED, UNCLEAN
from ...metadata.controller_result import NotController
from ..controller_router import answer_all, election_response
from . import handles


@handles(ApiKey.ELECT_LEADERS, 0, 2)
async def elect_leaders(broker, header, req):
    election_type = req.election_type if header.api_version >= 1 else PREFERRED
    if election_type not in (PREFERRED, UNCLEAN):
        return election_response(ErrorCode.INVALID_REQUEST, {})
    controller = broker.controller
    if controller is None or not controller.active:
        return answer_all(ApiKey.ELECT_LEADERS, req, ErrorCode.NOT_CONTROLLER)
    wanted = None
    if req.topic_partitions is not None:
        wanted = {}
        for t in req.topic_partitions:
            wanted.setdefault(t.topic, []).extend(t.partitions)
    try:
        elected = await broker.quorum.commit(controller.elect_leaders(election_type, wanted))
    except NotController:
        return answer_all(ApiKey.ELECT_LEADERS, req, ErrorCode.NOT_CONTROLLER)
    return election_response(0, elected)
