"""``python -m curaflow.sources.pixiv.replay``: its port is bound before it says it serves."""

from __future__ import annotations

import sys
from typing import Any

import pytest
import uvicorn

from curaflow.process.httpserver import bind_socket
from curaflow.sources.pixiv.replay import __main__ as replay_main


def test_a_taken_port_is_one_line_naming_port_and_exit_2_without_the_banner(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a taken port it printed ``Pixiv replay on http://127.0.0.1:8300 (Ctrl-C stops it)``
    and then uvicorn's ``[Errno 98] address already in use``, exit 3 (a newcomer's
    finding). Now the port is bound first: one line naming ``--port``, exit 2 like every
    command that cannot listen, and no banner."""
    taken = bind_socket("127.0.0.1", 0)
    port = taken.getsockname()[1]
    served: list[object] = []
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, *args, **kwargs: served.append(self))
    monkeypatch.setattr(sys, "argv", ["replay", "--port", str(port)])
    try:
        with pytest.raises(SystemExit) as exited:
            replay_main.main()
    finally:
        taken.close()
    said = capsys.readouterr()
    assert exited.value.code == 2
    assert "Pixiv replay on" not in said.out + said.err
    assert said.err.count("\n") == 1, said.err
    assert f"cannot listen on 127.0.0.1:{port}" in said.err and "--port" in said.err
    assert not served


def test_the_dev_stacks_port_taken_says_curaflow_dev_serves_one_there(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """8300 is where ``curaflow dev`` serves its replay by default: the usual holder is named."""
    from curaflow.cli.stack import DevPorts
    from curaflow.process import httpserver

    def taken(host: str, port: int) -> Any:
        raise httpserver.CannotListen(host, port, OSError(98, "Address already in use"))

    monkeypatch.setattr(replay_main, "bind_socket", taken)
    monkeypatch.setattr(sys, "argv", ["replay"])
    with pytest.raises(SystemExit) as exited:
        replay_main.main()
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert f"cannot listen on 127.0.0.1:{DevPorts.replay}" in err
    assert "curaflow dev" in err and "--port" in err


def test_the_banner_comes_after_the_bind_and_names_the_bound_port(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The server serves the socket bound before the banner (``--port 0``: the port picked)."""
    served: list[Any] = []

    def run(self: uvicorn.Server, sockets: list[Any] | None = None) -> None:
        served.extend(sockets or [])
        print("serving", flush=True)

    monkeypatch.setattr(uvicorn.Server, "run", run)
    monkeypatch.setattr(sys, "argv", ["replay", "--port", "0"])
    replay_main.main()
    out = capsys.readouterr().out
    assert len(served) == 1
    port = served[0].getsockname()[1]
    served[0].close()
    assert port != 0
    assert out == f"Pixiv replay on http://127.0.0.1:{port} (Ctrl-C stops it)\nserving\n"
