"""Who a node is: its stable id, and the names that stand for it now.

A node's **id** is fixed when it is paired and never changes afterwards:

- the node id of the agent already on the node, when there is one (its
  state dir's ``node_id``);
- otherwise the first 128 bits of its pinned host key's SHA-256 fingerprint,
  in hex (the same shape as an agent's own ids). Two computers pairing the
  same node before any agent runs there give it the same id.

Deploy writes the id into the agent's state dir, so from then on the agent
reports it too (its hello, its mDNS record). Re-pairing (a new host key,
our key lost) keeps the id; only unpairing ends it. "This computer" is a
node too: its id is the local agent's node id.

Every store keys a node by its id. Its **name** is a label that rename
changes; users type names and see names, and ``NodeNames`` turns one into
the other at the edge. Data written before ids existed is keyed by name:
it is attached by the node's current name, or by one of its former names
(the registry keeps them), so a rename never orphans it.
"""

from __future__ import annotations

import base64
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from sparksync_agent import state as agent_state

from sparksync.core.agents.this_computer import LOCAL_NODE_NAME, is_local
from sparksync.core.base import paths

if TYPE_CHECKING:
    from sparksync.core.nodes.registry import PairedNode, Registry

log = logging.getLogger(__name__)

# Ids go into keyring entry names, SQL values and file contents: plain characters only.
NODE_ID_RE = re.compile(r"^[0-9A-Za-z][0-9A-Za-z._-]{3,63}$")
_ID_HEX_DIGITS = 32


def is_node_id(text: str) -> bool:
    return bool(NODE_ID_RE.match(text))


def node_id_from_fingerprint(fingerprint: str) -> str:
    """The id of a node without an agent: its host key's ``SHA256:...`` fingerprint, as 32 hex digits."""
    encoded = fingerprint.removeprefix("SHA256:")
    digest = base64.b64decode(encoded + "=" * (-len(encoded) % 4))
    if len(digest) * 2 < _ID_HEX_DIGITS:
        raise ValueError(f"{fingerprint!r} is not a SHA256 host-key fingerprint")
    return digest.hex()[:_ID_HEX_DIGITS]


def local_node_id(state_dir: Path | None = None) -> str:
    """This computer's id: its local agent's node id (made now if that agent never ran)."""
    directory = paths.ensure_dir(Path(state_dir) if state_dir is not None else paths.local_agent_state_dir())
    return agent_state.load_or_create_node_id(directory)


@dataclass(frozen=True)
class NodeNames:
    """Which node each name stands for now, and each node's current name.

    Built from the registry (and this computer), never changed: take a new
    one to see a rename. Current names win over former ones.
    """

    names: Mapping[str, str] = field(default_factory=dict)  # id -> current name
    former: Mapping[str, str] = field(default_factory=dict)  # a former name -> id

    @classmethod
    def of(cls, nodes: Iterable[PairedNode], local_id: str | None = None) -> NodeNames:
        return cls._of(((n.node_id, n.name, tuple(n.former_names)) for n in nodes), local_id)

    @classmethod
    def _of(cls, identities: Iterable[tuple[str, str, tuple[str, ...]]], local_id: str | None) -> NodeNames:
        names: dict[str, str] = {}
        former: dict[str, str] = {}
        for node_id, name, former_names in identities:
            names[node_id] = name
            for old in former_names:
                former.setdefault(old, node_id)
        if local_id is not None and local_id not in names:
            names[local_id] = LOCAL_NODE_NAME
        return cls(names, former)

    @classmethod
    def current(cls, registry: Registry | None = None, *, local: bool = True) -> NodeNames:
        """The registry's nodes (and this computer's id unless ``local`` is False).

        An unreadable registry gives no paired names (logged): the stores
        that ask then leave names as they find them, rather than fail.
        """
        from sparksync.core.base.errors import SparkSyncError
        from sparksync.core.nodes.registry import Registry

        try:
            identities = (registry if registry is not None else Registry()).identities()
        except SparkSyncError as exc:
            log.warning("node names: the registry cannot be read (%s); names are left as they are", exc)
            identities = []
        local_id = None
        if local:
            try:
                local_id = local_node_id()
            except OSError as exc:
                log.warning("node names: this computer's id cannot be read (%s)", exc)
        return cls._of(identities, local_id)

    @property
    def ids(self) -> dict[str, str]:
        """Current name -> id."""
        return {name: node_id for node_id, name in self.names.items()}

    def id_of(self, name: str) -> str | None:
        """The id ``name`` stands for: a current name, ``local``, then a former name."""
        ids = self.ids
        if name in ids:
            return ids[name]
        if is_local(name):
            return ids.get(LOCAL_NODE_NAME)
        return self.former.get(name)

    def name_of(self, node_id: str) -> str | None:
        return self.names.get(node_id)

    def resolve(self, text: str) -> str | None:
        """The id of the node ``text`` names, or is the id of; None when it is neither."""
        if text in self.names:
            return text
        return self.id_of(text)

    def relabel(self, node_ids: Mapping[str, str]) -> dict[str, str]:
        """For a record's ``{name it used: id}``: ``{that name: the node's current name}``.

        A node that is gone (unpaired) keeps its old label, unless a paired
        node has that name now: then it reads "<name> (unpaired)", so the
        record never mixes the two up.
        """
        current = {old: self.names[node_id] for old, node_id in node_ids.items() if node_id in self.names}
        taken = set(self.names.values())
        gone = {old: f"{old} (unpaired)" if old in taken else old for old in node_ids if old not in current}
        return {**current, **gone}

    def ids_for(self, names: Iterable[str], known: Mapping[str, str] | None = None) -> dict[str, str]:
        """``{name: id}`` for the names that stand for a node (``known`` first: a record's own ids)."""
        found: dict[str, str] = {}
        for name in names:
            node_id = (known or {}).get(name) or self.id_of(name)
            if node_id is not None:
                found[name] = node_id
        return found
