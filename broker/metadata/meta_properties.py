"""`meta.properties`: which cluster a data directory belongs to, as Kafka's storage tool writes it.

Every node keeps it beside its logs; a directory of another cluster is refused at start, so
nodes of two clusters never mix their metadata.
"""
from __future__ import annotations

import base64
import uuid
from pathlib import Path


def read_meta_properties(data_dir: Path, node_id: int, cluster_id: str | None) -> dict[str, str]:
    """`meta.properties` of `data_dir`, written with a new cluster id if it has none; raises
    ValueError when it belongs to another cluster than `cluster_id`."""
    path = data_dir / "meta.properties"
    props: dict[str, str] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if "=" in line and not line.startswith("#"):
                k, v = line.split("=", 1)
                props[k.strip()] = v.strip()
        if cluster_id and props.get("cluster.id") != cluster_id:
            raise ValueError(f"{path} belongs to cluster {props.get('cluster.id')}, "
                             f"not {cluster_id}")
        return props
    props = {"version": "1", "node.id": str(node_id),
             "cluster.id": cluster_id or short_uuid()}
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return props


def short_uuid() -> str:
    """A random id in Kafka's form (a UUID, base64 without padding)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
