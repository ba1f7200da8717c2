"""Replication policies: how a source topic is named on the target, as MirrorMaker 2 names it.

DefaultReplicationPolicy prefixes the source cluster's alias (`orders` from A is `A.orders` on
B), so a topic's origin shows in its name and a flow never copies back what it copied (A->B
skips B's `A.*`, B->A skips A's `B.*`). IdentityReplicationPolicy keeps the name (a migration),
so it cannot tell copies from originals: MM2 says not to run it in both directions, and the
heartbeats topic still gets the prefix, as MM2 does. The internal topics' names are MM2's.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
IDENTITY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
POLICIES = {DEFAULT: "default", "DefaultReplicationPolicy": "default",
            IDENTITY: "identity", "IdentityReplicationPolicy": "identity"}
HEARTBEATS = "heartbeats"


@dataclass(frozen=True)
class ReplicationPolicy:
    kind: str = "default"   # default | identity
    separator: str = "."

    def remote_topic(self, source: str, topic: str) -> str:
        """The name of `source`'s `topic` on the target."""
        if self.kind == "identity" and topic != HEARTBEATS:
            return topic
        return f"{source}{self.separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        """The cluster a remote topic came from (None: a local topic, or the identity policy's
        copies, which look local)."""
        if self.kind == "identity":
            head, sep, rest = topic.partition(self.separator)
            return head if sep and rest == HEARTBEATS else None
        head, sep, _ = topic.partition(self.separator)
        return head if sep else None

    def offset_syncs_topic(self, target: str) -> str:
        return f"mm2-offset-syncs{self.separator}{target}{self.separator}internal"

    def checkpoints_topic(self, source: str) -> str:
        return f"{source}{self.separator}checkpoints{self.separator}internal"


def is_internal(topic: str) -> bool:
    """MM2's ReplicationPolicy.isInternalTopic (and its checkpoints and offset-syncs topics):
    never mirrored, whatever the topic filter says."""
    return (topic.startswith(("__", ".")) or topic.endswith((".internal", "-internal"))
            or topic == "minilog-sink-decisions")


def policy_of(class_name: str, separator: str = ".") -> ReplicationPolicy:
    """The policy a `replication.policy.class` names, or ValueError naming the two known."""
    kind = POLICIES.get(class_name.strip())
    if kind is None:
        raise ValueError(f"replication.policy.class: {class_name.strip()!r} is not a policy "
                         f"minilog implements ({DEFAULT} or {IDENTITY})")
    return ReplicationPolicy(kind, separator)


def source_pattern(policy: ReplicationPolicy, source: str, target: str, include: str,
                   exclude: str) -> str:
    """One anchored regex of the topics a flow `source`->`target` copies, for Spark's
    subscribePattern: MM2's include and exclude lists (each a full match, as Java's
    `matcher.matches()`), minus internal topics and, with the default policy, the topics that
    came from the target (no copying back)."""
    never = [r"__.*", r"\..*", r".*[\-\.]internal", r"minilog-sink-decisions"]
    if policy.kind == "default":
        never.append(re.escape(target + policy.separator) + ".*")
    skip = "|".join(f"(?:{p})" for p in never + ([exclude] if exclude else []))
    return f"^(?!(?:{skip})$)(?:{include})$"
