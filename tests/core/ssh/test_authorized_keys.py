"""authorized_keys edits: our key added once, removed alone, every other byte kept."""

from __future__ import annotations

import base64
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparksync.core.ssh.authorized_keys import add_key, count_key, has_key, key_blob, remove_key, split_lines


def key_line(seed: int, comment: str = "someone@laptop", key_type: str = "ssh-ed25519") -> str:
    blob = len(key_type).to_bytes(4, "big") + key_type.encode() + bytes([seed]) * 32
    return f"{key_type} {base64.b64encode(blob).decode()} {comment}"


OURS = key_line(1, "sparksync@laptop")
OTHER = key_line(2)
THIRD = key_line(3, "", key_type="ecdsa-sha2-nistp256")


def test_adding_to_an_empty_file_gives_just_our_line():
    assert add_key(b"", OURS) == OURS.encode() + b"\n"


def test_adding_keeps_existing_lines_and_fixes_a_missing_final_newline():
    old = f"# keys\n{OTHER}".encode()
    assert add_key(old, OURS) == old + b"\n" + OURS.encode() + b"\n"


def test_adding_twice_changes_nothing_the_second_time():
    once = add_key(OTHER.encode() + b"\n", OURS)
    assert add_key(once, OURS) == once
    assert count_key(once, OURS) == 1


@pytest.mark.parametrize(
    "present",
    [
        OURS.replace("sparksync@laptop", "renamed comment"),
        f'from="10.0.0.0/8",no-pty {OURS}',
        f'command="echo a b c",restrict {OURS}',
        f"  {OURS}\r",
        OURS.split(" ", 2)[0] + " " + OURS.split(" ", 2)[1],  # no comment at all
    ],
)
def test_our_key_is_found_whatever_options_or_comment_surround_it(present):
    content = f"{OTHER}\n{present}\n".encode()
    assert has_key(content, key_blob(OURS))
    assert add_key(content, OURS) == content
    assert remove_key(content, OURS) == f"{OTHER}\n".encode()


def test_removing_takes_only_our_lines_and_keeps_every_other_byte():
    old = (
        b"# first comment\r\n"
        + OTHER.encode()
        + b"\r\n"
        + OURS.encode()
        + b"\n"
        + b"\n"
        + b"\xff\xfe not utf-8 \xc3\n"
        + f'restrict,command="x y" {THIRD}'.encode()
        + b"\n"
        + OURS.encode()
        + b"\n"  # a duplicate someone made by hand
        + b"# last line, no newline"
    )
    expected = old.replace(OURS.encode() + b"\n", b"")
    assert remove_key(old, OURS) == expected
    assert count_key(expected, OURS) == 0
    assert count_key(expected, THIRD) == 1


def test_removing_our_last_line_without_newline_keeps_the_rest_intact():
    assert remove_key(f"{OTHER}\n{OURS}".encode(), OURS) == f"{OTHER}\n".encode()


def test_removing_a_key_that_is_not_there_returns_the_same_bytes():
    old = f"{OTHER}\n# x".encode()
    assert remove_key(old, OURS) == old


def test_a_key_in_a_quoted_option_is_not_mistaken_for_the_line_key():
    tricky = f'command="echo {OURS}" {OTHER}'
    assert key_blob(tricky) == key_blob(OTHER)


@pytest.mark.parametrize(
    "line", ["", "# ssh-ed25519 AAAA", "no-pty", "ssh-ed25519 not*base64", "garbage here"]
)
def test_lines_without_a_key_have_no_blob(line):
    assert key_blob(line) is None


def test_a_line_that_is_no_key_cannot_be_added_or_removed():
    with pytest.raises(ValueError, match="not a public key line"):
        add_key(b"", "hello world")
    with pytest.raises(ValueError, match="not a public key line"):
        remove_key(b"", "")


@given(st.lists(st.binary(max_size=40).filter(lambda b: b"\n" not in b), max_size=8), st.booleans())
def test_split_lines_round_trips_any_content(lines, trailing_newline):
    content = b"\n".join(lines) + (b"\n" if trailing_newline and lines else b"")
    assert b"".join(split_lines(content)) == content


@given(st.lists(st.sampled_from([OTHER, THIRD, "# note", "", "\r", OURS]), max_size=8), st.booleans())
def test_add_then_remove_gives_back_the_other_lines(lines, trailing_newline):
    content = "\n".join(lines).encode() + (b"\n" if trailing_newline and lines else b"")
    added = add_key(content, OURS)
    assert count_key(added, OURS) == max(1, count_key(content, OURS))
    # The only byte ever added to what was there: the newline a last line lacked.
    glued = count_key(content, OURS) == 0 and content and not content.endswith(b"\n")
    assert remove_key(added, OURS) == remove_key(content, OURS) + (b"\n" if glued else b"")


def test_a_real_ssh_keygen_public_key_is_recognised(tmp_path):
    import subprocess

    path = tmp_path / "k"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    line = (tmp_path / "k.pub").read_text().strip()
    assert key_blob(line) == base64.b64decode(line.split()[1])
    assert os.path.exists(path)
