from pathlib import Path

from sparksync.core.base import paths


def test_home_moves_every_client_path(home):
    assert paths.config_dir() == home / "config"
    assert paths.data_dir() == home / "data"
    assert paths.cache_dir() == home / "cache"
    assert paths.log_dir() == home / "logs"


def test_local_agent_lives_apart_from_a_node_agent(home):
    from sparksync_agent.paths import default_state_dir

    assert paths.local_agent_state_dir() == home / "data" / "local-agent"
    assert paths.local_agent_state_dir() != default_state_dir()


def test_without_home_platformdirs_decides(monkeypatch):
    monkeypatch.delenv("SPARKSYNC_HOME", raising=False)
    for directory in (paths.config_dir(), paths.data_dir(), paths.cache_dir(), paths.log_dir()):
        assert "sparksync" in directory.parts or "sparksync" in str(directory)
        assert directory.is_absolute()


def test_ensure_dir_is_private(tmp_path: Path):
    made = paths.ensure_dir(tmp_path / "a" / "b")
    assert made.is_dir() and made.stat().st_mode & 0o077 == 0
