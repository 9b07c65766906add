"""Model sources checked before any load: a Hub id offline passes only when its files are in the cache."""

import pytest

from hf_distill.cli import sources
from hf_distill.cli.errors import ConfigError


def _cache_repo(cache_dir, repo_id: str, filename: str) -> None:
    """A Hub cache entry as huggingface_hub lays it out: refs/main names a snapshot holding `filename`."""
    repo = cache_dir / f"models--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc123")
    snapshot = repo / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / filename).write_text("{}")


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setattr(sources, "hub_offline", lambda: True)


@pytest.mark.parametrize("filename", ["config.json", "adapter_config.json"])
def test_a_cached_model_or_adapter_passes_offline(tmp_path, offline, filename):
    _cache_repo(tmp_path, "someone/model", filename)
    sources.check_model_source("teacher_name_or_path", "someone/model", cache_dir=str(tmp_path))


def test_an_uncached_hub_id_is_refused_offline_naming_the_field(tmp_path, offline):
    _cache_repo(tmp_path, "someone/model", "README.md")
    with pytest.raises(ConfigError, match=r"teacher_name_or_path='someone/model' is not a local folder and not in the Hub cache"):
        sources.check_model_source("teacher_name_or_path", "someone/model", cache_dir=str(tmp_path))
