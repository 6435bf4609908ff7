"""The agent's state dir: a node id is created once, never put over one another process wrote."""

from __future__ import annotations

import threading

import pytest
from sparksync_agent.atomic import write_atomic
from sparksync_agent.state import NODE_ID_FILE, load_or_create_node_id


def test_a_node_id_is_made_once_and_kept(tmp_path):
    made = load_or_create_node_id(tmp_path)
    assert len(made) == 32 and (tmp_path / NODE_ID_FILE).read_text() == made + "\n"
    assert oct((tmp_path / NODE_ID_FILE).stat().st_mode & 0o777) == "0o600"
    assert load_or_create_node_id(tmp_path) == made


def test_an_empty_node_id_file_is_replaced(tmp_path):
    (tmp_path / NODE_ID_FILE).write_text("\n")
    made = load_or_create_node_id(tmp_path)
    assert made and (tmp_path / NODE_ID_FILE).read_text() == made + "\n"


def test_processes_making_the_node_id_at_once_all_get_the_same_one(tmp_path):
    barrier, ids = threading.Barrier(8), []

    def make() -> None:
        barrier.wait()
        ids.append(load_or_create_node_id(tmp_path))

    threads = [threading.Thread(target=make) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(ids)) == 1 and (tmp_path / NODE_ID_FILE).read_text() == ids[0] + "\n"


def test_create_only_refuses_an_existing_file_and_leaves_no_temporary_behind(tmp_path):
    path = tmp_path / "f"
    write_atomic(path, "first", replace=False)
    with pytest.raises(FileExistsError):
        write_atomic(path, "second", replace=False)
    assert path.read_text() == "first" and [p.name for p in tmp_path.iterdir()] == ["f"]


def test_an_id_the_client_writes_first_is_kept_and_an_empty_one_is_then_replaced(tmp_path, monkeypatch):
    import sparksync_agent.state as state

    calls = []

    def client_first(path, data, mode=0o600, *, replace=True):
        calls.append(replace)
        if len(calls) == 1:  # the client creates the file (empty: a half-done write) just before us
            path.write_text("")
            raise FileExistsError(path)
        write_atomic(path, data, mode, replace=replace)

    monkeypatch.setattr(state, "write_atomic", client_first)
    made = load_or_create_node_id(tmp_path)  # read again outside the lock, then replace the empty one
    assert calls == [False, True] and (tmp_path / NODE_ID_FILE).read_text() == made + "\n" and len(made) == 32
    (tmp_path / NODE_ID_FILE).write_text("theirs\n")
    assert load_or_create_node_id(tmp_path) == "theirs"
