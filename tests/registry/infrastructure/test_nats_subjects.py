"""Tests of pubsubml.registry.infrastructure.nats_subjects: subjects, stream names, URLs."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from pubsubml.registry.infrastructure.nats_subjects import check_nats_url, feed_subject, stream_name
from registry.conftest import make_settings


def test_subjects_name_the_database_without_its_password() -> None:
    a = feed_subject("postgresql+psycopg://u:one@127.0.0.1/test?options=-csearch_path%3Dx")
    assert a == feed_subject("postgresql+psycopg://u:two@127.0.0.1/test?options=-csearch_path%3Dx")
    assert a != feed_subject("postgresql+psycopg://u:one@127.0.0.1/test?options=-csearch_path%3Dy")
    assert a != feed_subject("sqlite:///registry.db")
    assert "one" not in a and a.startswith("pubsubml.feed.")


@pytest.mark.parametrize("url", ["http://127.0.0.1:4222", "127.0.0.1:4222", "nats://", "x"])
def test_urls_that_name_no_nats_server_are_refused(url: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="NATS server URL"):
        check_nats_url(url)
    with pytest.raises(ValidationError, match="NATS server URL"):
        make_settings("sqlite:///x.db", tmp_path, nats_url=url)
    assert make_settings("sqlite:///x.db", tmp_path, nats_url="").nats_url is None


def test_a_stream_is_named_after_its_subject_digest() -> None:
    subject = feed_subject("sqlite:///registry.db")
    assert stream_name(subject) == "PUBSUBML_FEED_" + subject.removeprefix("pubsubml.feed.")
