"""`minilog users add|list|remove`: SCRAM credentials, as `kafka-configs.sh --entity-type users`
manages them (`--add-config 'SCRAM-SHA-256=[password=...]'`), through the admin client."""
import getpass

from minilog.connector.client import AdminClient
from minilog.connector.client.admin_users import DEFAULT_ITERATIONS, MECHANISMS


def add_parser(sub, common):
    users = sub.add_parser("users", help="SCRAM users: add, list, remove")
    usub = users.add_subparsers(dest="action", metavar="ACTION", required=True)
    mechanisms = ", ".join(MECHANISMS)
    p = usub.add_parser("add", parents=[common], help="create a user or change its password")
    p.add_argument("user")
    p.add_argument("--password", help="the password (asked for when not given)")
    p.add_argument("--mechanism", action="append", choices=list(MECHANISMS), metavar="MECHANISM",
                   help=f"one of {mechanisms} (repeatable; default both)")
    p.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS,
                   help=f"SCRAM iterations, 4096 to 16384 (default {DEFAULT_ITERATIONS})")
    p = usub.add_parser("list", parents=[common], help="users and their SCRAM mechanisms")
    p.add_argument("users", nargs="*", metavar="USER")
    p = usub.add_parser("remove", parents=[common], help="delete a user's credentials")
    p.add_argument("user")
    p.add_argument("--mechanism", action="append", choices=list(MECHANISMS), metavar="MECHANISM",
                   help="only this mechanism's credential (repeatable; default all)")


def run(args, out, conf):
    with AdminClient(conf) as admin:
        if args.action == "add":
            password = args.password
            if password is None:
                password = getpass.getpass(f"Password for {args.user}: ")
            for mechanism in args.mechanism or MECHANISMS:
                admin.upsert_scram_credential(args.user, mechanism, password, args.iterations)
            out.write(f"Set {', '.join(args.mechanism or MECHANISMS)} credentials of user "
                      f"{args.user}.\n")
        elif args.action == "list":
            found = admin.describe_user_scram_credentials(args.users or None)
            for user, infos in sorted(found.items()):
                described = ", ".join(f"{i.mechanism} (iterations={i.iterations})" for i in infos)
                out.write(f"{user}\t{described}\n")
        else:
            mechanisms = args.mechanism
            if not mechanisms:
                found = admin.describe_user_scram_credentials([args.user])
                mechanisms = [i.mechanism for i in found.get(args.user, [])]
            for mechanism in mechanisms:
                admin.delete_scram_credential(args.user, mechanism)
            out.write(f"Removed {', '.join(mechanisms)} credentials of user {args.user}.\n")
