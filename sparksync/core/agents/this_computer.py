"""This computer's name as a node: ``this computer``, or ``local`` / ``this-computer`` on a command line.

Kept free of imports: plans, records and the faces all spell the name the same way.
"""

from __future__ import annotations

LOCAL_NODE_NAME = "this computer"
LOCAL_ALIAS = "local"  # what a command line takes for this computer, beside its name


def is_local(name: str) -> bool:
    """Whether ``name`` means this computer (``local``, ``this computer`` or ``this-computer``, any case)."""
    return " ".join(name.replace("-", " ").split()).lower() in (LOCAL_ALIAS, LOCAL_NODE_NAME)


def canonical_name(name: str) -> str:
    """This computer's one name for ``local`` and its spellings; any other name as given."""
    return LOCAL_NODE_NAME if is_local(name) else name
