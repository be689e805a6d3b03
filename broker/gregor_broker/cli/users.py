"""``gregor users scram``: set, delete and list SCRAM credentials (like kafka-configs).

SASL listeners with SCRAM-SHA-256 or SCRAM-SHA-512 check clients against credentials
kept in ZooKeeper under /config/users/<user>, in Kafka's format (salt, stored key,
server key, iterations; never the password). Brokers pick up a change within moments,
without a restart. Kafka's admin clients can do the same with AlterUserScramCredentials.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys

from gregor_broker.cli import zk_target
from gregor_broker.cluster.scram_credentials import (
    alter_scram_credentials,
    read_all_scram_credentials,
    read_scram_credentials,
)
from gregor_broker.security.scram import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
    credential_from_password,
)

EXAMPLES = """\
examples:
  gregor users scram set alice --password alice-secret
  GREGOR_SCRAM_PASSWORD=s3cret gregor users scram set bob --mechanism SCRAM-SHA-512
  gregor users scram list
  gregor users scram delete alice --mechanism SCRAM-SHA-256
"""
PASSWORD_ENV = "GREGOR_SCRAM_PASSWORD"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "users",
        help="users' SASL/SCRAM credentials: set, delete, list",
        description=__doc__.replace("``", ""),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
    groups = parser.add_subparsers(title="commands", metavar="COMMAND")
    scram = groups.add_parser(
        "scram",
        help="SCRAM-SHA-256/512 credentials in ZooKeeper",
        description=__doc__.replace("``", ""),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    scram.set_defaults(func=lambda args: scram.print_help() or 2)
    commands = scram.add_subparsers(title="commands", metavar="COMMAND")

    set_parser = commands.add_parser(
        "set",
        help="create or replace a user's credential",
        description="Create or replace the credential of USER for one or both mechanisms. "
        f"The password comes from --password, ${PASSWORD_ENV}, or a prompt.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    zk_target.add_arguments(set_parser)
    set_parser.add_argument("user", help="the user name clients log in with")
    set_parser.add_argument("--password", help=f"the password (else ${PASSWORD_ENV} or a prompt)")
    _mechanism_argument(set_parser, "mechanisms to set (default: both)")
    set_parser.add_argument(
        "--iterations",
        type=int,
        default=DEFAULT_ITERATIONS,
        help=f"PBKDF2 iterations, {MIN_ITERATIONS}..{MAX_ITERATIONS} "
        f"(default {DEFAULT_ITERATIONS})",
    )
    set_parser.set_defaults(func=set_command)

    delete_parser = commands.add_parser(
        "delete",
        help="remove a user's credential",
        description="Remove the credential of USER for one or both mechanisms.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    zk_target.add_arguments(delete_parser)
    delete_parser.add_argument("user")
    _mechanism_argument(delete_parser, "mechanisms to remove (default: all the user has)")
    delete_parser.set_defaults(func=delete_command)

    list_parser = commands.add_parser(
        "list",
        help="show users and their mechanisms",
        description="Show every user with a SCRAM credential (mechanism and iterations).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    zk_target.add_arguments(list_parser)
    list_parser.add_argument("user", nargs="?", help="only this user")
    list_parser.set_defaults(func=list_command)


def _mechanism_argument(parser: argparse.ArgumentParser, text: str) -> None:
    parser.add_argument(
        "--mechanism",
        action="append",
        choices=sorted(MECHANISMS),
        help=f"{text}; repeat for both",
    )


def _fail(message: str) -> int:
    print(f"gregor users scram: {message}", file=sys.stderr)
    return 1


def set_command(args: argparse.Namespace) -> int:
    if not MIN_ITERATIONS <= args.iterations <= MAX_ITERATIONS:
        return _fail(f"--iterations must be within {MIN_ITERATIONS}..{MAX_ITERATIONS}")
    if not args.user:
        return _fail("the user name must not be empty")
    password = args.password or os.environ.get(PASSWORD_ENV)
    if password is None:
        if not sys.stdin.isatty():
            return _fail(f"no password: give --password or set ${PASSWORD_ENV}")
        password = getpass.getpass(f"password for {args.user}: ")
    if not password:
        return _fail("the password must not be empty")
    mechanisms = args.mechanism or sorted(MECHANISMS)
    upsert = {
        m: credential_from_password(m, password, iterations=args.iterations) for m in mechanisms
    }
    try:
        with zk_target.connect(args) as admin:
            alter_scram_credentials(admin, args.user, upsert)
    except zk_target.NoZooKeeper as error:
        return _fail(str(error))
    print(f"{args.user}: set {', '.join(mechanisms)} ({args.iterations} iterations)")
    return 0


def delete_command(args: argparse.Namespace) -> int:
    try:
        with zk_target.connect(args) as admin:
            existing = read_scram_credentials(admin, args.user)
            mechanisms = args.mechanism or sorted(existing)
            missing = [m for m in mechanisms if m not in existing]
            if missing or not mechanisms:
                return _fail(f"{args.user} has no {', '.join(missing) or 'SCRAM'} credential")
            alter_scram_credentials(admin, args.user, {}, tuple(mechanisms))
    except zk_target.NoZooKeeper as error:
        return _fail(str(error))
    print(f"{args.user}: deleted {', '.join(mechanisms)}")
    return 0


def list_command(args: argparse.Namespace) -> int:
    try:
        with zk_target.connect(args) as admin:
            if args.user:
                found = {args.user: read_scram_credentials(admin, args.user)}
                found = {u: c for u, c in found.items() if c}
            else:
                found = read_all_scram_credentials(admin)
    except zk_target.NoZooKeeper as error:
        return _fail(str(error))
    if not found:
        print("no SCRAM credentials")
        return 0 if not args.user else 1
    width = max(len("USER"), *(len(u) for u in found))
    print(f"{'USER':<{width}}  MECHANISM      ITERATIONS")
    for user, credentials in sorted(found.items()):
        for mechanism, credential in sorted(credentials.items()):
            print(f"{user:<{width}}  {mechanism:<13}  {credential.iterations}")
    return 0
