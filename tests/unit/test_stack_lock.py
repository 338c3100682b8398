"""One embedded stack per state directory: :class:`curaflow.devstack.stack.StackLock`.

``flock`` locks belong to an open file description, so two locks of one process on one
file exclude each other like two processes' would."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from curaflow.devstack.stack import LOCK_FILE, StackBusy, StackLock


def test_a_second_holder_is_refused_with_the_first_ones_pid_and_command(tmp_path: Path) -> None:
    first, second = StackLock(tmp_path / "state", "curaflow run"), StackLock(tmp_path / "state", "curaflow dev")
    first.acquire()
    first.acquire()  # idempotent
    assert stat.S_IMODE(os.stat(tmp_path / "state" / LOCK_FILE).st_mode) == 0o600
    with pytest.raises(StackBusy) as busy:
        second.acquire()
    assert (busy.value.pid, busy.value.command) == (os.getpid(), "curaflow run")
    assert str(busy.value) == (
        f"another curaflow command holds the embedded stack of {tmp_path / 'state'}: curaflow run (pid {os.getpid()})"
    )
    first.release()
    first.release()  # idempotent
    second.acquire()  # free again; the file now names the new holder
    with pytest.raises(StackBusy) as busy:
        first.acquire()
    assert busy.value.command == "curaflow dev"
    second.release()


def test_a_holder_whose_file_says_nothing_is_named_unknown(tmp_path: Path) -> None:
    """The file is written just after the lock is taken: a refusal in between (or a file
    someone emptied) still refuses, with the pid unknown."""
    first = StackLock(tmp_path, "curaflow run")
    first.acquire()
    (tmp_path / LOCK_FILE).write_text("")
    with pytest.raises(StackBusy) as busy:
        StackLock(tmp_path).acquire()
    assert (busy.value.pid, busy.value.command) == (None, None)
    assert "a process (pid unknown)" in str(busy.value)
    first.release()


def test_a_dead_holders_name_is_not_given_for_the_living_one(tmp_path: Path) -> None:
    """What a holder killed before its release left in the file (its pid, now gone) is not
    said of the process that holds the lock now and has not written its name yet; a
    release empties the file."""
    first = StackLock(tmp_path, "curaflow run")
    first.acquire()
    (tmp_path / LOCK_FILE).write_text('{"pid": 999999999, "command": "curaflow dev"}')
    with pytest.raises(StackBusy) as busy:
        StackLock(tmp_path).acquire()
    assert (busy.value.pid, busy.value.command) == (None, None)
    first.release()
    assert (tmp_path / LOCK_FILE).read_text() == ""
