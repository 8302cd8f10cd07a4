"""`lipsync-studio api token create|list|revoke`: the API's tokens from a terminal.

The person at the terminal is the one approving: `create NAME` prints a new token once
(it is kept only hashed), `list` the names, `revoke NAME` takes one away, and a running
app closes that client's connections within a second (it watches the file).
"""

from __future__ import annotations

import argparse
import sys
import time

from app.command_line import fail


def add_parser(subparsers) -> argparse.ArgumentParser:
    api = subparsers.add_parser(
        "api", help="the API's tokens for bots and tools (docs/api.md); opens no window",
        description="Every API client needs a token. Make one here for a bot or tool (or "
        "approve its request in the app), list them, or revoke one.")
    commands = api.add_subparsers(dest="api_command", metavar="COMMAND", required=True)
    token = commands.add_parser("token", help="create, list or revoke API tokens")
    actions = token.add_subparsers(dest="token_command", metavar="ACTION", required=True)
    create = actions.add_parser("create", help="make a token for the client NAME and print it")
    create.add_argument("name", help="who the token is for (a bot, a tool), 1-64 characters")
    actions.add_parser("list", help="the clients that have a token")
    revoke = actions.add_parser("revoke", help="take NAME's token away (its connections close)")
    revoke.add_argument("name")
    return api


def run(args: argparse.Namespace) -> int:
    from app.api.tokens import TOKENS_FILE, TokenError, TokenStore
    from app.settings import config_dir

    store = TokenStore(config_dir() / TOKENS_FILE)
    if store.problem is not None:
        return fail(store.problem)
    try:
        if args.token_command == "create":
            token = store.create(args.name)
            print(token)
            print(f"(a token for {args.name.strip()!r}: give it to the client as "
                  "'Authorization: Bearer TOKEN' or ?token=TOKEN; it is not shown again)",
                  file=sys.stderr)
        elif args.token_command == "list":
            entries = store.names()
            if not entries:
                print("No API tokens yet: lipsync-studio api token create NAME")
            for entry in entries:
                made = time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.created))
                print(f"{entry.name}\tcreated {made}")
        elif not store.revoke(args.name):
            return fail(f"no token named {args.name!r} (lipsync-studio api token list)")
        else:
            print(f"revoked {args.name.strip()!r}")
    except TokenError as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(f"cannot write {store.path}: {exc.strerror or exc}")
    return 0
