"""SCRAM credentials in a cluster live in the metadata log: a user created through any broker
is known to every broker, survives metadata snapshots (the log before them deleted) and a
restart of every node."""
import pytest
from clustertools import wait_for
from test_metadata_log import SMALL, first_offset

from minilog.connector.client import AdminClient

pytestmark = pytest.mark.timeout(240)


def _users(cluster, node):
    with AdminClient({"bootstrap.servers": cluster.broker(node).bootstrap}) as admin:
        return {u: sorted(i.mechanism for i in infos)
                for u, infos in admin.describe_user_scram_credentials().items()}


def test_a_user_created_through_one_broker_is_known_to_all_after_snapshots_and_restarts(
        make_cluster):
    c = make_cluster(3, **SMALL)
    with AdminClient({"bootstrap.servers": c.broker(3).bootstrap}) as admin:
        admin.upsert_scram_credential("alice", "SCRAM-SHA-256", "alice-secret")
        admin.upsert_scram_credential("bob", "SCRAM-SHA-512", "bob-secret")
        admin.delete_scram_credential("bob", "SCRAM-SHA-512")
    for node in (1, 2, 3):
        wait_for(lambda: _users(c, node) == {"alice": ["SCRAM-SHA-256"]},
                 f"node {node} to know alice")
    for i in range(20):  # enough metadata to snapshot and delete the log's prefix
        c.create_topic(f"filler-{i:02d}", partitions=1, rf=1)
    for node in (1, 2, 3):
        wait_for(lambda: first_offset(c.broker(node)) > 0, f"node {node} to delete its prefix")
    c.stop()
    c.start()
    for node in (1, 2, 3):
        wait_for(lambda: _users(c, node) == {"alice": ["SCRAM-SHA-256"]},
                 f"node {node} to know alice after a restart from a snapshot")


def test_seeds_do_not_bring_back_what_the_admin_api_changed(make_cluster):
    """Every node is started with `sasl.scram` seeds; a credential rotated (other
    iterations) and one deleted through the Admin API stay so after every node restarts."""
    seeds = ";".join(f"SCRAM-SHA-512=[name={u},password={u}-seed]" for u in ("root", "mallory"))
    c = make_cluster(3, **{"sasl.scram": seeds})
    with AdminClient({"bootstrap.servers": c.broker(2).bootstrap}) as admin:
        admin.upsert_scram_credential("root", "SCRAM-SHA-512", "root-rotated", 8192)
        admin.delete_scram_credential("mallory", "SCRAM-SHA-512")

    def iterations(node):
        with AdminClient({"bootstrap.servers": c.broker(node).bootstrap}) as admin:
            return {u: [i.iterations for i in infos]
                    for u, infos in admin.describe_user_scram_credentials().items()}
    for node in (1, 2, 3):
        wait_for(lambda: iterations(node) == {"root": [8192]}, f"node {node} to apply them")
    c.stop()
    c.start()
    for node in (1, 2, 3):
        wait_for(lambda: iterations(node) == {"root": [8192]},
                 f"node {node} to keep them after a restart")
