"""The node's model store: roots, listing with cached manifests, a copy received, verified, finalized."""

from __future__ import annotations

import hashlib
import os

import pytest
from pydantic import ValidationError

from sparksync_agent.models import ModelError, ModelStore
from sparksync_agent.models.roots import default_hf_cache
from sparksync_agent.protocol import (
    FinalizeRequest,
    ModelFile,
    ModelFormat,
    ModelState,
    ReceiveRequest,
    RootKind,
    RootsConfig,
    VerifyRequest,
)
from tests.core.models.model_files import flip_byte, write_safetensors, write_tiny_gguf


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    state = tmp_path / "state"
    state.mkdir()
    return ModelStore(state)


def sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_default_roots_are_the_store_and_the_hf_cache_under_hf_home(store, tmp_path):
    roots = store.roots
    assert roots.hf_cache == tmp_path / "hf" / "hub" == default_hf_cache()
    assert roots.store == tmp_path.parent / os.environ["SPARKSYNC_HOME"] / "models" or roots.store.name == "models"
    listing = store.list()
    assert [(r.kind, r.exists) for r in listing.roots] == [(RootKind.store, False), (RootKind.hf_cache, False)]
    assert all(r.free_bytes and r.free_bytes > 0 for r in listing.roots)  # of the nearest existing parent


def test_a_listing_finds_gguf_and_safetensors_models_and_hashes_each_file_once(store, tmp_path):
    root = store.roots.store
    gguf = write_tiny_gguf(root)
    write_safetensors(root / "org" / "st-model", shards=2, shard_bytes=4096)
    hub = store.roots.hf_cache / "models--acme--hubby"
    snap = hub / "snapshots" / "abc123"
    write_safetensors(snap, shards=1, shard_bytes=2048)
    (hub / "refs").mkdir(parents=True)
    (hub / "refs" / "main").write_text("abc123")

    first = store.list()
    by_name = {m.name: m for m in first.models}
    assert sorted(by_name) == ["acme/hubby", "org/st-model", "tiny"]
    tiny = by_name["tiny"]
    assert (tiny.format, tiny.state, tiny.path, tiny.quantization) == (
        ModelFormat.gguf, ModelState.present, str(gguf), "F32"
    )
    assert tiny.files == [ModelFile(path="tiny.gguf", size=gguf.stat().st_size, sha256=sha(gguf))]
    st = by_name["org/st-model"]
    assert (st.format, st.root_kind, st.quantization) == (ModelFormat.safetensors, RootKind.store, "bfloat16")
    assert [f.path for f in st.files] == [
        "config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
        "model.safetensors.index.json",
    ]
    assert by_name["acme/hubby"].root_kind is RootKind.hf_cache
    assert first.hashed_files == 1 + 4 + 3

    again = ModelStore(store.state_dir).list()  # a new agent reads the cache from disk
    assert again.hashed_files == 0
    assert again.models == first.models


def test_a_changed_file_is_hashed_again_but_a_flipped_byte_is_seen_only_by_a_fresh_verify(store):
    root = store.roots.store
    folder = write_safetensors(root / "m", shards=2, shard_bytes=4096)
    manifest = {m.name: m for m in store.list().models}["m"].files
    shard = folder / "model-00001-of-00002.safetensors"
    flip_byte(shard)
    assert store.list().hashed_files == 0  # size and mtime unchanged: the cache answers
    verdict = store.verify(VerifyRequest(name="m", files=manifest, staging=False))
    assert (verdict.ok, verdict.mismatched) == (False, ["model-00001-of-00002.safetensors"])
    shard.write_bytes(b"new content")
    listed = store.list()
    assert listed.hashed_files == 1


def test_a_copy_is_partial_in_staging_until_verified_and_finalized(store, tmp_path):
    source = write_safetensors(tmp_path / "src" / "m", shards=2, shard_bytes=8192)
    manifest = [ModelFile(path=p.name, size=p.stat().st_size, sha256=sha(p)) for p in sorted(source.iterdir())]
    total = sum(f.size for f in manifest)
    reply = store.receive(ReceiveRequest(name="org/m", size_bytes=total))
    assert reply.partial_bytes == 0 and reply.free_bytes > total
    staging = tmp_path / "copy"
    for f in manifest[:2]:
        (tmp_path / reply.staging / f.path).write_bytes((source / f.path).read_bytes())
    [listed] = store.list().models
    assert (listed.name, listed.state) == ("org/m", ModelState.partial)
    assert all(f.sha256 is None for f in listed.files)
    assert store.receive(ReceiveRequest(name="org/m", size_bytes=total)).partial_bytes == sum(
        f.size for f in manifest[:2]
    )
    half = store.verify(VerifyRequest(name="org/m", files=manifest))
    assert not half.ok and half.missing == [f.path for f in manifest[2:]]
    for f in manifest[2:]:
        (tmp_path / reply.staging / f.path).write_bytes((source / f.path).read_bytes())
    assert store.verify(VerifyRequest(name="org/m", files=manifest)).ok
    entry = store.finalize(FinalizeRequest(name="org/m", format=ModelFormat.safetensors, files=manifest))
    assert entry.state is ModelState.present and entry.directory == str(store.roots.store / "org" / "m")
    assert not (store.roots.staging).exists() or not any(store.roots.staging.rglob("*"))
    assert [m.state for m in store.list().models] == [ModelState.present]
    assert staging  # (unused name kept short)


def test_a_push_from_staging_sends_only_received_files_of_the_named_copy(store, tmp_path):
    from sparksync_agent.models import JobBoard
    from sparksync_agent.protocol import PushRequest

    board = JobBoard(store)

    def push(files, from_staging=True) -> PushRequest:
        return PushRequest(name="org/m", host="10.0.0.2", user="u", staging="/s", files=files,
                           from_staging=from_staging)  # fmt: skip

    with pytest.raises(ModelError) as refused:
        board._push_source(push(["a.safetensors"]))
    assert (refused.value.status, refused.value.code) == (404, "no_staging")  # nothing received: nothing to send
    reply = store.receive(ReceiveRequest(name="org/m", size_bytes=100))
    staging = tmp_path / reply.staging
    (staging / "a.safetensors").write_bytes(b"x" * 10)
    (tmp_path / "secret").write_text("not a model's")
    (staging / "link.safetensors").symlink_to(tmp_path / "secret")
    (staging / "sub").mkdir()
    directory, sizes = board._push_source(push(["a.safetensors"]))
    assert directory == store.staging_of("org/m") and sizes == {"a.safetensors": 10}
    for absent in (["link.safetensors"], ["sub"], ["not-there"]):  # not a file rsync wrote into the copy
        with pytest.raises(ModelError) as refused:
            board._push_source(push(absent))
        assert (refused.value.status, refused.value.code) == (404, "no_file"), absent
    for bad in (["../../secret"], ["/etc/passwd"], []):  # refused on the wire, by the schema's own rules
        with pytest.raises(ValidationError):
            push(bad)
        if bad:  # and by the store itself, for a caller that skips the wire model
            with pytest.raises(ModelError) as refused:
                store.staged("org/m", bad)
            assert (refused.value.status, refused.value.code) == (400, "bad_path"), bad
    with pytest.raises(ModelError) as refused:
        store.staged("org/m", [])
    assert (refused.value.status, refused.value.code) == (400, "bad_files")
    with pytest.raises(ModelError) as refused:  # the present copy is what a plain push sends: none here
        board._push_source(push(["a.safetensors"], from_staging=False))
    assert refused.value.status == 404


def test_receive_refuses_with_the_numbers_when_the_copy_will_not_fit(store):
    with pytest.raises(ModelError) as refused:
        store.receive(ReceiveRequest(name="huge", size_bytes=1 << 60))
    assert refused.value.status == 409 and refused.value.code == "no_space"
    assert "needs" in str(refused.value) and "free" in str(refused.value)


def test_roots_are_configurable_and_must_be_absolute(store, tmp_path):
    store.set_config(RootsConfig(store=str(tmp_path / "mine"), extra=[str(tmp_path / "more")]))
    write_tiny_gguf(tmp_path / "more", "other")
    assert store.roots.store == tmp_path / "mine"
    assert [(m.name, m.root_kind) for m in store.list().models] == [("other", RootKind.extra)]
    with pytest.raises(ValidationError):  # the wire model says so: /openapi.json carries the rule
        RootsConfig(store="relative/path")
    with pytest.raises(ModelError):  # and the store holds to it for a config that skipped validation
        store.set_config(RootsConfig.model_construct(store="relative/path", hf_cache=None, extra=[]))


def test_delete_removes_a_model_and_refuses_one_a_workload_uses(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    used: list[list[str]] = []
    store = ModelStore(tmp_path, in_use=lambda paths: used.append(paths) or (["w1"] if "busy" in paths[0] else []))
    write_tiny_gguf(store.roots.store / "busy")
    write_tiny_gguf(store.roots.store, "free")
    with pytest.raises(ModelError) as refused:
        store.delete("busy")
    assert refused.value.status == 409 and "w1" in str(refused.value)
    store.delete("free")
    assert [m.name for m in store.list().models] == ["busy"]


def test_a_name_that_climbs_out_of_the_store_is_refused(store):
    for bad in ("../etc", "a/../../b", "/abs", "a/b/c", ""):
        with pytest.raises(ValidationError):  # the wire model's pattern, as /openapi.json says
            ReceiveRequest(name=bad, size_bytes=1)
        with pytest.raises(ModelError) as refused:  # and the store's own check, for one that skipped it
            store.receive(ReceiveRequest.model_construct(name=bad, size_bytes=1, repair=False))
        assert refused.value.status == 400, bad
    assert not store.roots.staging.exists()


def test_a_root_over_a_big_tree_walks_only_the_folders_that_hold_a_model(store, tmp_path, monkeypatch):
    # A root set to "/" or a home must not walk everything under it on each listing: a folder
    # is walked (every file, for its manifest) only once its own entries show a model.
    from sparksync_agent.models import scan

    big = tmp_path / "big"
    deep = big / "projects" / "src" / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (deep / "notes.txt").write_text("not a model")
    write_safetensors(big / "org" / "st-model", shards=1, shard_bytes=1024)
    walked: list = []
    real_files = scan._files
    monkeypatch.setattr(scan, "_files", lambda folder: walked.append(folder) or real_files(folder))
    store.set_config(RootsConfig(store=str(tmp_path / "mine"), extra=[str(big)]))
    assert [m.name for m in store.list().models] == ["org/st-model"]
    assert walked == [big / "org" / "st-model"]
