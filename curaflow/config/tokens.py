"""Each Pixiv account's refresh token as it will be sent: explicit, else the stored one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import SecretStr

from curaflow.config.base import Loc, SettingsProblem

if TYPE_CHECKING:
    from pathlib import Path

    from curaflow.sources.pixiv.config import PixivSettings


def read_stored_tokens(pixiv: PixivSettings, state_dir: Path) -> None:
    """Give each Pixiv account its refresh token as it will be sent: one set explicitly
    (the file, the environment) always wins; else the one ``curaflow pixiv login``
    stored (``<state_dir>/pixiv/<account>.refresh-token``,
    :mod:`curaflow.sources.pixiv.login`). ``pixiv`` is changed in place.

    Every token is used without the whitespace (and byte-order mark) around it: a
    token pasted with a newline is curaflow's formatting, never sent to Pixiv to be
    refused as the account's ``invalid_grant``. A token with whitespace or a control
    character *inside* it is refused here, naming its setting.

    Args:
        pixiv: the ``[pixiv]`` section (its top-level token is account ``default``'s).
        state_dir: the resolved state directory.

    Raises:
        SettingsProblem: a token holds whitespace or an unprintable character inside
            (naming its setting; a stored token is no setting's).
    """
    from curaflow.sources.pixiv.login import stored_token

    def cleaned(token: SecretStr | None, field: str, at: Loc | None = None) -> SecretStr | None:
        if token is None:
            return None
        value = token.get_secret_value().strip().lstrip("\ufeff").strip()
        if not value:
            return None
        if not value.isprintable() or any(c.isspace() for c in value):
            raise SettingsProblem(
                f"{field} holds whitespace or an unprintable character inside the token", [at] if at else []
            )
        return SecretStr(value)

    pixiv.refresh_token = cleaned(pixiv.refresh_token, "pixiv.refresh_token", ("pixiv", "refresh_token"))
    if pixiv.refresh_token is None and (found := stored_token(state_dir, "default")):
        pixiv.refresh_token = cleaned(SecretStr(found), "the stored token of account 'default'")
    for name, account in pixiv.accounts.items():
        at: Loc = ("pixiv", "accounts", name, "refresh_token")
        account.refresh_token = cleaned(account.refresh_token, f"pixiv.accounts.{name}.refresh_token", at)
        if account.refresh_token is None and (found := stored_token(state_dir, name)):
            account.refresh_token = cleaned(SecretStr(found), f"the stored token of account {name!r}")
